// The parallel GPT on a device, on every machine: the emulated device (engine/emulated_device.h) keeps
// "cuda" tensors in host memory and runs the CPU's ops, so the model's device paths — parameters,
// main_grad buffers and AdamW state placed on the device, activations that never come to the host
// except the vocab-parallel cross entropy's logits (host code, lab02), coalesced gradient all-reduces
// through the device, the staged transport — run in CI without a GPU. A host read of a device tensor
// raises here as on a GPU, and the values are the CPU's: at tp ≥ 2 every loss, gradient and updated
// parameter is bit-for-bit the CPU model's. At tp = 1 the device uses its own cross entropy op
// (ops::cross_entropy_*, not the lab's vocab-parallel one), whose sums run in another order: there the
// bound is the f32 one of docs/tolerances.md. A binary of its own: the registration is process-wide.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/device_hooks.h"
#include "engine/emulated_device.h"
#include "engine/error.h"
#include "engine/ops/matmul.h"
#include "engine/ops/rmsnorm.h"
#include "engine/runtime/device_runtime.h"
#include "engine/trace/span.h"
#include "tests/support/all_to_all_cases.h"
#include "tests/tp/tp_util.h"

using namespace tpsp;
using namespace tpsp::testing;

namespace {

GPTConfig small() {
  // vocab: not divisible by 4: the padded vocabulary is on the device too
  return {.vocab = 50, .seq = 8, .hidden = 16, .heads = 4, .layers = 2, .ffn = 64, .dropout = 0.1f};
}

/// One train_step of 2 micro-batches at dp × tp (+SP) on the CPU and on the emulated device, from the
/// same seed; the device model's losses, main_grad buffers and parameters against the CPU model's.
void check_device_matches_cpu(int tp, int dp, bool sp, DType param_dtype) {
  auto fn = [&](int) {
    runtime::activate(runtime::DeviceChoice::cuda_emulated);
    auto world = runtime::init_world(runtime::DeviceChoice::cuda_emulated, "gloo");
    ParallelState ps(world, tp);
    const GPTConfig c = small();
    TokenBatch ids, targets;
    make_batch(2 * dp, c.seq, c.vocab, 5, ids, targets);
    const int64_t b = 2;
    const TokenBatch my_ids{
        b,
        ids.s,
        {ids.ids.begin() + ps.dp_rank() * b * ids.s, ids.ids.begin() + (ps.dp_rank() + 1) * b * ids.s}};
    const TokenBatch my_targets{b,
                                targets.s,
                                {targets.ids.begin() + ps.dp_rank() * b * targets.s,
                                 targets.ids.begin() + (ps.dp_rank() + 1) * b * targets.s}};
    auto row = [](const TokenBatch& t, int64_t i) {
      return TokenBatch{1, t.s, {t.ids.begin() + i * t.s, t.ids.begin() + (i + 1) * t.s}};
    };
    const std::vector<model::MicroBatch> mbs{{row(my_ids, 0), row(my_targets, 0)},
                                             {row(my_ids, 1), row(my_targets, 1)}};
    const ops::AdamWConfig adam{.lr = 1e-3f, .eps = 1e-6f};
    model::ParallelGPT cpu(c, 7, ps, {.sequence_parallel = sp, .param_dtype = param_dtype});
    model::ParallelGPT dev(c, 7, ps,
                           {.sequence_parallel = sp, .param_dtype = param_dtype, .device = Device::cuda});
    for (const auto& [name, p] : dev.params())
      expect(p.device() == Device::cuda && dev.grads().at(name).device() == Device::cuda,
             "parameter or main_grad " + name + " is not on the device");
    const float loss_cpu = cpu.train_step(mbs, 3, adam);
    const float loss_dev = dev.train_step(mbs, 3, adam);
    // tp = 1: the device's cross entropy op sums in another order; 1e-6 relative is a few f32 ulps of a
    // loss of ~4, and the gradients' bound is the f32 step's of tests/tp (rtol 1e-3, atol 2e-6 on values
    // ~1e-2: one step of ~1e-7-relative differences through 2 layers).
    const bool exact = tp > 1;
    expect(exact ? loss_dev == loss_cpu : std::fabs(loss_dev - loss_cpu) <= 1e-6f * std::fabs(loss_cpu),
           "loss: device " + std::to_string(loss_dev) + ", cpu " + std::to_string(loss_cpu));
    for (const auto& [name, g] : cpu.grads()) {
      const Tensor got = dev.grads().at(name).to(Device::cpu);
      expect_close(got, g, exact ? 0.0 : 1e-3, exact ? 0.0 : 2e-6, "main_grad " + name);
    }
    for (const auto& [name, p] : cpu.params()) {
      const Tensor got = dev.params().at(name).to(Device::cpu);
      expect(got.dtype() == param_dtype, "parameter " + name + " changed dtype on the device");
      expect_close(got.to(DType::f32), p.to(DType::f32), exact ? 0.0 : 1e-4, exact ? 0.0 : 2e-5,
                   "parameter " + name);
    }
    const Tensor logits = dev.logits_local();
    expect(logits.device() == Device::cpu, "logits_local() is not on the host");
    expect_close(logits, cpu.logits_local(), exact ? 0.0 : 1e-5, exact ? 0.0 : 1e-6, "logits_local");
  };
  const std::string f = failures(run_ranks(tp * dp, fn, 120));
  CHECK_MESSAGE(f.empty(), f);
}

}  // namespace

TEST_CASE("device: the GPT step at tp=2 + SP on the device equals the CPU's bit for bit") {
  check_device_matches_cpu(2, 1, true, DType::f32);
}
TEST_CASE("device: dp=2 x tp=2 without SP, bf16 parameters: bit for bit") {
  check_device_matches_cpu(2, 2, false, DType::bf16);
}
TEST_CASE("device: tp=1 (the device's cross entropy op) within the f32 bounds") {
  check_device_matches_cpu(1, 1, false, DType::f32);
}

TEST_CASE("device: a host read of a device tensor raises, naming the rule") {
  runtime::activate(runtime::DeviceChoice::cuda_emulated);
  Tensor t({2, 3}, DType::f32, Device::cuda);
  CHECK_THROWS_WITH_AS(t.data(), doctest::Contains("is on cuda; its elements cannot be read"), ShapeError);
  CHECK_THROWS_WITH_AS(runtime::parse_device("gpu"), "device 'gpu' is not one of cpu, cuda, cuda-emulated",
                       ShapeError);
  CHECK_THROWS_WITH_AS(runtime::init_world(runtime::DeviceChoice::cuda_emulated, "nccl"),
                       doctest::Contains("--backend nccl needs --device cuda"), ShapeError);
  CHECK_THROWS_WITH_AS(runtime::init_world(runtime::DeviceChoice::cpu, "mpi"),
                       "backend 'mpi' is not one of gloo, relay, nccl", ShapeError);
}

TEST_CASE("device: a device op's compute span is timed by the device's markers, on the recorder's clock") {
  runtime::activate(runtime::DeviceChoice::cuda_emulated);
  auto rec = std::make_shared<trace::Recorder>(0);
  trace::install(rec);
  const Tensor x = Tensor::full({32, 16}, 1.f).to(Device::cuda),
               w = Tensor::full({8, 16}, 0.5f).to(Device::cuda);
  const long markers = emulated::markers_recorded();
  const double before = rec->now();
  const Tensor y = ops::matmul_forward(x, w);
  const double after = rec->now();
  const Tensor y_cpu = ops::matmul_forward(x.to(Device::cpu), w.to(Device::cpu));  // a host span
  trace::install(nullptr);
  // The anchor (first device span of this recorder) and the span's start and end markers.
  CHECK(emulated::markers_recorded() - markers == 3);
  const std::vector<trace::ComputeRecord> spans = rec->compute_records();
  REQUIRE(spans.size() == 2);
  const trace::ComputeRecord& d = spans[0].t_start < spans[1].t_start ? spans[0] : spans[1];
  CHECK(d.name == "gemm");
  CHECK(d.label == "forward");
  CHECK(before <= d.t_start);
  CHECK(d.t_start <= d.t_end);
  CHECK(d.t_end <= after);
  CHECK(y.to(Device::cpu).at(0) == 8.f);  // 16 · 1 · 0.5
  CHECK(y_cpu.at(0) == 8.f);
}

namespace {
// A device clock whose reading of marker 5 (the second span's end) fails (a device error), counting every
// release.
int g_released[8] = {};
void* counting_record() {
  static intptr_t next = 0;
  return reinterpret_cast<void*>(++next);
}
double failing_elapsed(void*, void* b) {
  if (reinterpret_cast<intptr_t>(b) == 5) throw std::runtime_error("device error reading marker 5");
  return 0.0;
}
void counting_release(void* e) noexcept {
  ++g_released[reinterpret_cast<intptr_t>(e)];
}
}  // namespace

TEST_CASE("device: a device error while resolving spans releases every marker once (attack12)") {
  DeviceHooks h;
  h.event_record = counting_record;
  h.event_elapsed_s = failing_elapsed;
  h.event_release = counting_release;
  {
    trace::Recorder rec(0);
    rec.set_device_anchor(&h);                                                       // marker 1
    rec.append_device_compute("gemm", "a", h.event_record(), h.event_record(), &h);  // 2, 3
    rec.append_device_compute("gemm", "b", h.event_record(), h.event_record(), &h);  // 4, 5
    CHECK_THROWS_WITH(rec.compute_records(), "device error reading marker 5");
    CHECK_THROWS_WITH(rec.compute_records(), "device error reading marker 5");  // still pending, not lost
  }  // the destructor releases what is left
  for (int m = 1; m <= 5; ++m)
    CHECK_MESSAGE(g_released[m] == 1, "marker ", m, " released ", g_released[m], " times");
}

namespace {
/// A cpu tensor uniform in [lo, hi) from a fixed-seed mt19937.
Tensor uniform(const Shape& shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = dist(gen);
  return t;
}

/// Checks that `dev` is a device tensor with the same dtype, shape and bytes as the cpu tensor `cpu`.
void check_same_bits(const Tensor& dev, const Tensor& cpu, const char* what) {
  CHECK_MESSAGE(dev.device() == Device::cuda, what, " is not on the device");
  const Tensor got = dev.to(Device::cpu);
  REQUIRE_MESSAGE(got.dtype() == cpu.dtype(), what);
  REQUIRE_MESSAGE(got.shape() == cpu.shape(), what);
  CHECK_MESSAGE(std::memcmp(got.raw_data(), cpu.raw_data(), cpu.nbytes()) == 0, what,
                " differs from the CPU's");
}

/// The message of the ShapeError that f raises ("" when it raises none).
std::string shape_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("device: rmsnorm forward and backward equal the CPU's bit for bit, and so do its errors") {
  runtime::activate(runtime::DeviceChoice::cuda_emulated);
  const Device cuda = Device::cuda;
  const Tensor x = uniform({3, 5, 40}, 51, -2.f, 3.f), w = uniform({40}, 52, 0.5f, 1.5f),
               dy = uniform({3, 5, 40}, 53);
  const ops::RMSNormOut cpu = ops::rmsnorm_forward(x, w, 1e-5f);
  const ops::RMSNormOut dev = ops::rmsnorm_forward(x.to(cuda), w.to(cuda), 1e-5f);
  check_same_bits(dev.y, cpu.y, "y");
  check_same_bits(dev.rstd, cpu.rstd, "rstd");
  Tensor dw_cpu = uniform({40}, 54), dw_dev = dw_cpu.to(cuda);  // buffers holding a micro-batch's sum
  const Tensor dx_cpu = ops::rmsnorm_backward(dy, x, w, cpu.rstd, dw_cpu);
  const Tensor dx_dev = ops::rmsnorm_backward(dy.to(cuda), x.to(cuda), w.to(cuda), dev.rstd, dw_dev);
  check_same_bits(dx_dev, dx_cpu, "dx");
  check_same_bits(dw_dev, dw_cpu, "dweight (accumulated)");
  const Tensor xb = x.to(DType::bf16), wb = w.to(DType::bf16);
  check_same_bits(ops::rmsnorm_forward(xb.to(cuda), wb.to(cuda)).y, ops::rmsnorm_forward(xb, wb).y,
                  "y (bf16)");

  // Each rule's message, raised by the dispatch before any device work: the same text on both devices.
  const auto bad_calls = std::vector<std::function<void(Device)>>{
      [&](Device d) { ops::rmsnorm_forward(Tensor(Shape{}).to(d), w.to(d)); },
      [&](Device d) { ops::rmsnorm_forward(x.to(d), Tensor({3}).to(d)); },
      [&](Device d) { ops::rmsnorm_forward(x.to(d), w.to(d), -1.f); },
      [&](Device d) {
        Tensor g = Tensor({40}).to(d);
        ops::rmsnorm_backward(Tensor({3, 5, 41}).to(d), x.to(d), w.to(d), cpu.rstd.to(d), g);
      },
      [&](Device d) {
        Tensor g = Tensor({40}).to(d);
        ops::rmsnorm_backward(dy.to(d), x.to(d), Tensor({39}).to(d), cpu.rstd.to(d), g);
      },
      [&](Device d) {
        Tensor g = Tensor({40}).to(d);
        ops::rmsnorm_backward(dy.to(d), x.to(d), w.to(d), Tensor({14}).to(d), g);
      },
      [&](Device d) {
        Tensor g = Tensor({41}).to(d);
        ops::rmsnorm_backward(dy.to(d), x.to(d), w.to(d), cpu.rstd.to(d), g);
      },
      [&](Device d) {
        Tensor g({40}, DType::bf16, d);
        ops::rmsnorm_backward(dy.to(d), x.to(d), w.to(d), cpu.rstd.to(d), g);
      },
  };
  for (std::size_t i = 0; i < bad_calls.size(); ++i) {
    const std::string on_cpu = shape_error_of([&] { bad_calls[i](Device::cpu); });
    const std::string on_dev = shape_error_of([&] { bad_calls[i](cuda); });
    CAPTURE(i);
    CHECK_MESSAGE(on_cpu.rfind("rmsnorm_", 0) == 0, "the CPU raised no rmsnorm ShapeError: '", on_cpu, "'");
    CHECK(on_dev == on_cpu);
  }
}

TEST_CASE("device: all_to_all with split sizes on device tensors through the staged transport, world 1..3") {
  for (int n = 1; n <= 3; ++n) {
    CAPTURE(n);
    const auto res = run_ranks(n, [](int) {
      runtime::activate(runtime::DeviceChoice::cuda_emulated);
      auto world = runtime::init_world(runtime::DeviceChoice::cuda_emulated, "gloo");
      check_uneven_all_to_all(*world, Device::cuda);
    });
    REQUIRE_MESSAGE(all_ok(res), summary(res));
  }
}
