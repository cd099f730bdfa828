// bench_gpt_mfu: the model FLOPs utilisation (MFU) of one ParallelGPT training step on a device, one
// process (tp = 1): zero_grad, forward, backward, AdamW (ParallelGPT::train_step, one micro-batch),
// timed by the host around each step (the step returns its loss to the host, so the device's queue is
// drained inside it). Issue 12's goal: MFU ≥ 40 % at h = 4096, s = 2048, bf16 parameters, on an H200.
//
// FLOPs of a step (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
// Using Megatron-LM", §5.1, without activation recomputation; the causal attention counted whole, as
// there): per token, L layers of 2·(4h² + 2·h·ffn) matmul FLOPs forward plus 4·s·h in attention
// (Q·Kᵀ and P·V), the output layer's 2·h·V, all ×3 for forward + backward — 72·L·h²·(1 + s/(6h) +
// V/(12·h·L)) per token when ffn = 4h. MFU = FLOPs / step seconds / peak FLOP/s.
//
// The peak is --peak-tflops (default 989.4: H100/H200 SXM dense bf16 Tensor Core, NVIDIA's datasheets);
// what the engine computes in bf16 decides which peak is fair: its GEMMs run bf16 operands only when both
// are bf16 (engine/ops/dispatch.cpp), so with f32 activations they run in f32 and the bf16 peak is an
// upper bound the step cannot reach. The line prints the figure against the given peak and nothing else.
// Without a CUDA device (or a build without the GPU backend) it prints one line saying so and exits 0;
// --device cuda-emulated runs the same code on the CPU (a smoke test of this program, not a figure).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "engine/error.h"
#include "engine/model/gpt.h"
#include "engine/parallel_state.h"
#include "engine/runtime/device_runtime.h"

namespace {

using namespace tpsp;

/// FLOPs of one forward + backward of `c` on `tokens` tokens of sequences of length c.seq (see the top).
double step_flops(const GPTConfig& c, double tokens) {
  const double h = static_cast<double>(c.hidden), s = static_cast<double>(c.seq),
               f = static_cast<double>(c.ffn_hidden()), v = static_cast<double>(c.vocab),
               l = static_cast<double>(c.layers);
  const double per_token = 3.0 * (l * (2.0 * (4.0 * h * h + 2.0 * h * f) + 4.0 * s * h) + 2.0 * h * v);
  return per_token * tokens;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_gpt_mfu: MFU of one ParallelGPT training step on a device (tp=1)"};
  std::string device = "cuda", dtype = "bf16";
  GPTConfig c{.vocab = 32768, .seq = 2048, .hidden = 4096, .heads = 32, .layers = 4};
  int64_t batch = 1;
  int steps = 5, warmup = 2;
  double peak_tflops = 989.4;
  app.add_option("--device", device, "cuda, or cuda-emulated (a CPU smoke test)")
      ->check(CLI::IsMember({"cuda", "cuda-emulated"}));
  app.add_option("--dtype", dtype, "parameter storage: bf16 (f32 master copy) or f32")
      ->check(CLI::IsMember({"bf16", "f32"}));
  app.add_option("--hidden", c.hidden, "hidden size h")->check(CLI::PositiveNumber);
  app.add_option("--seq", c.seq, "sequence length s")->check(CLI::PositiveNumber);
  app.add_option("--heads", c.heads, "attention heads")->check(CLI::PositiveNumber);
  app.add_option("--layers", c.layers, "transformer layers")->check(CLI::PositiveNumber);
  app.add_option("--vocab", c.vocab, "vocabulary size V")->check(CLI::PositiveNumber);
  app.add_option("--batch", batch, "micro-batch size b")->check(CLI::PositiveNumber);
  app.add_option("--steps", steps, "timed steps")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--peak-tflops", peak_tflops,
                 "the device's peak, TFLOP/s (default: H100/H200 SXM dense bf16)")
      ->check(CLI::PositiveNumber);
  int tp = 1;
  app.add_option("--tp", tp, "tensor-parallel size (1 only: one process)")->check(CLI::Range(1, 1));
  CLI11_PARSE(app, argc, argv);

  const runtime::DeviceChoice choice = runtime::parse_device(device);
  Device dev = Device::cpu;
  try {
    dev = runtime::activate(choice);
  } catch (const ShapeError& e) {
    std::printf("bench_gpt_mfu: no CUDA device (%s); nothing measured\n", e.what());
    return 0;
  }
  try {
    ParallelState ps(runtime::init_world(choice, "gloo"), 1);
    model::ParallelGPT gpt(c, 1234, ps,
                           {.check_replicated_inputs = false,
                            .param_dtype = dtype == "bf16" ? DType::bf16 : DType::f32,
                            .device = dev});
    TokenBatch ids{batch, c.seq, {}}, targets{batch, c.seq, {}};
    for (int64_t i = 0; i < batch * c.seq; ++i) {
      ids.ids.push_back((i * 7919) % c.vocab);
      targets.ids.push_back((i * 7919 + 1) % c.vocab);
    }
    const std::vector<model::MicroBatch> mb{{ids, targets}};
    const ops::AdamWConfig adam;
    std::vector<double> secs;
    for (int k = 0; k < warmup + steps; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      const float loss = gpt.train_step(mb, k, adam);  // the loss comes to the host: the step is done
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      TPSP_CHECK(loss == loss, "bench_gpt_mfu: step ", k, " gave a NaN loss");
      if (k >= warmup) secs.push_back(s);
    }
    std::sort(secs.begin(), secs.end());
    const double med = secs[secs.size() / 2];
    const double tflops = step_flops(c, static_cast<double>(batch * c.seq)) / med / 1e12;
    std::printf(
        "gpt mfu device=%s dtype=%s L=%lld h=%lld s=%lld V=%lld b=%lld: step %.4f s (%.4f–%.4f, %zu steps), "
        "%.1f TFLOP/s, MFU %.3f of %.1f TFLOP/s (goal >= 0.40 at h=4096 s=2048 bf16)\n",
        device.c_str(), dtype.c_str(), static_cast<long long>(c.layers), static_cast<long long>(c.hidden),
        static_cast<long long>(c.seq), static_cast<long long>(c.vocab), static_cast<long long>(batch), med,
        secs.front(), secs.back(), secs.size(), tflops, tflops / peak_tflops, peak_tflops);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpt_mfu: error: %s\n", e.what());
    return 1;
  }
}
