// bench_gpt_step: one whole training step of the engine's ParallelGPT (engine/model/gpt.h), fp32 (with
// --model llama the Llama block, against bench/peers/llama_step.py; the rest of this note is the GPT's):
// zero_grad, forward (vocab-parallel embedding + positions, pre-LN layers with tanh-GELU MLPs, final LN,
// tied output layer, vocab-parallel cross entropy), backward, finalize_grads (the SP gradient sum) and
// one AdamW step — ParallelGPT::train_step with one micro-batch, as tools/train drives it. Dropout 0,
// the replicated-input check off (ParallelOptions says benchmarks turn it off).
//
// Timed in the same run, alternating with the steps: every GEMM of the step alone, with the step's
// shapes, through engine/ops/matmul.h — per layer the forward, dgrad and wgrad of linear_qkv,
// linear_proj, linear_fc1, linear_fc2, the six attention products per (batch row, local head)
// (S = Q·Kᵀ, O = P·V; dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q, on contiguous [s, d] blocks), and the
// output layer's three — so gemm_frac = GEMM time / step time. Then a few steps with compute spans on
// (engine/trace/span.h): span_gemm_s (the linear GEMMs inside the step) and span_attention_s (attention,
// forward and backward, GEMMs and softmax together) and span_comm_s (time in collectives).
//
// Ranks are forked (one per TP rank, one OpenBLAS thread each); fingerprints and the recorder are off
// while timing. Output: one `RESULT gpt impl=engine ...` line (bench/bench_common.h); the PyTorch peer
// bench/peers/gpt_step.py prints the same. Times: seconds, per step the slowest rank, median over steps.
// With --trace DIR, one more step is recorded as Chrome traces DIR/step/rank<r>.json (communication and
// compute spans, layer.forward/layer.backward included; tools/plot_timeline.py draws them).
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <functional>

#include "bench/bench_common.h"
#include "engine/error.h"
#include "engine/model/gpt.h"
#include "engine/ops/matmul.h"
#include "engine/parallel_state.h"
#include "engine/random/init.h"

namespace {

using tpsp::Tensor;
using tpsp::bench::median;

struct Config {
  int tp = 1;
  bool sp = false;
  bool overlap = false;  // --tp-comm-overlap: every linear layer's collectives behind its GEMMs (lab04)
  tpsp::GPTConfig gpt{.vocab = 8192, .seq = 512, .hidden = 512, .heads = 8, .layers = 2};
  std::string model = "gpt";  // --model llama: the Llama block (RMSNorm, SwiGLU, RoPE, GQA, untied)
  int64_t query_groups = 4;   // --query-groups (llama)
  int64_t batch = 1;
  int steps = 10, warmup = 2, span_steps = 3;
  bool gemm = true;  // time the GEMMs alone too
  uint64_t seed = 1234;
  std::string trace_dir;  // --trace: one more step as Chrome traces
};

/// A tensor of `shape` drawn from N(0, 1) keyed by (seed, name) (engine/random/init.h).
Tensor randn(const tpsp::Shape& shape, const std::string& name) {
  Tensor t(shape);
  tpsp::random::init_normal(t, 77, name, 1.f);
  return t;
}

/// The three GEMMs of one linear layer Y = X·Wᵀ on one rank: X [n, in], W [out, in], dY [n, out];
/// forward, dgrad (dX = dY·W) and wgrad (dW += dYᵀ·X into an f32 buffer).
struct LinearGemms {
  Tensor x, w, dy, dw;
  LinearGemms(int64_t n, int64_t in, int64_t out, const std::string& name)
      : x(randn({n, in}, name + ".x")),
        w(randn({out, in}, name + ".w")),
        dy(randn({n, out}, name + ".dy")),
        dw(Tensor::zeros({out, in})) {}
  void run() {
    const Tensor y = tpsp::ops::matmul_forward(x, w);
    const Tensor dx = tpsp::ops::matmul_dgrad(dy, w);
    tpsp::ops::matmul_wgrad(dy, x, dw);
  }
};

/// The six GEMMs of causal attention for one (batch row, head), blocks [s, d] and [s, s]:
/// S = Q·Kᵀ, O = P·V, dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q (engine/ops/cpu/attention.cpp
/// does the same products as strided sgemms).
struct AttentionGemms {
  Tensor q, k, v, p, dout, ds, dv, dk;
  AttentionGemms(int64_t s, int64_t d)
      : q(randn({s, d}, "q")),
        k(randn({s, d}, "k")),
        v(randn({s, d}, "v")),
        p(randn({s, s}, "p")),
        dout(randn({s, d}, "dout")),
        ds(randn({s, s}, "ds")),
        dv(Tensor::zeros({s, d})),
        dk(Tensor::zeros({s, d})) {}
  void run() {
    const Tensor scores = tpsp::ops::matmul_forward(q, k);  // Q·Kᵀ
    const Tensor o = tpsp::ops::matmul_dgrad(p, v);         // P·V
    tpsp::ops::matmul_wgrad(p, dout, dv);                   // dV += Pᵀ·dO
    const Tensor dp = tpsp::ops::matmul_forward(dout, v);   // dO·Vᵀ
    const Tensor dq = tpsp::ops::matmul_dgrad(ds, k);       // dS·K
    tpsp::ops::matmul_wgrad(ds, q, dk);                     // dK += dSᵀ·Q
  }
};

/// Every GEMM of one training step on one TP rank with the step's shapes (n = s·b tokens: under SP
/// the linear layers compute on the gathered sequence too).
struct StepGemms {
  std::vector<LinearGemms> linears;
  AttentionGemms attention;
  int64_t attention_blocks;  // layers · b · heads/tp

  StepGemms(const Config& c, int64_t padded_vocab)
      : attention(c.gpt.seq, c.gpt.head_dim()),
        attention_blocks(c.gpt.layers * c.batch * (c.gpt.heads / c.tp)) {
    const int64_t n = c.gpt.seq * c.batch, h = c.gpt.hidden, t = c.tp, f = c.gpt.ffn_hidden();
    // The Llama block: the fused per-group QKV rows groups·(heads/groups + 2)·d and [gate | up] 2·ffn.
    const bool llama = c.gpt.llama();
    const int64_t g = c.gpt.query_groups(), d = c.gpt.head_dim();
    const int64_t qkv = llama ? g * (c.gpt.heads / g + 2) * d : 3 * h, fc1 = llama ? 2 * f : f;
    for (int64_t i = 0; i < c.gpt.layers; ++i) {
      const std::string p = "layer" + std::to_string(i);
      linears.emplace_back(n, h, qkv / t, p + ".qkv");
      linears.emplace_back(n, h / t, h, p + ".proj");
      linears.emplace_back(n, h, fc1 / t, p + ".fc1");
      linears.emplace_back(n, f / t, h, p + ".fc2");
    }
    linears.emplace_back(n, h, padded_vocab / t, "output_layer");
  }
  void run() {
    for (LinearGemms& l : linears) l.run();
    for (int64_t i = 0; i < attention_blocks; ++i) attention.run();
  }
};

/// Token ids in [0, vocab) from a fixed LCG, the same on every rank: [b, s] batch-first.
tpsp::TokenBatch random_tokens(int64_t b, int64_t s, int64_t vocab, uint64_t seed) {
  tpsp::TokenBatch t{b, s, {}};
  uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0; i < b * s; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t.ids.push_back(static_cast<int64_t>((x >> 33) % static_cast<uint64_t>(vocab)));
  }
  return t;
}

int run_rank(const Config& c) {
  const int blas_threads = tpsp::bench::single_thread_blas();
  auto world = tpsp::bench::make_world();
  TPSP_CHECK(world->size() == c.tp, "bench_gpt_step: world size ", world->size(), " != --tp ", c.tp);
  tpsp::ParallelState ps(world, c.tp);
  tpsp::comm::ProcessGroup& tp = ps.tp();
  tpsp::model::ParallelGPT gpt(
      c.gpt, c.seed, ps,
      {.sequence_parallel = c.sp, .check_replicated_inputs = false, .tp_comm_overlap = c.overlap});
  const std::vector<tpsp::model::MicroBatch> batch{
      {random_tokens(c.batch, c.gpt.seq, c.gpt.vocab, c.seed),
       random_tokens(c.batch, c.gpt.seq, c.gpt.vocab, c.seed + 1)}};
  const tpsp::ops::AdamWConfig adamw;  // lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01
  StepGemms gemms(c, gpt.padded_vocab());

  int64_t iteration = 0;
  float loss0 = 0;
  auto step = [&] {
    const float loss = gpt.train_step(batch, iteration, adamw);
    if (iteration++ == 0) loss0 = loss;
  };
  const tpsp::bench::Timings t = tpsp::bench::time_alternating(
      tp, c.warmup, c.steps, step, c.gemm ? std::function<void()>([&] { gemms.run(); }) : nullptr);
  // GEMM and attention time inside the step, from the compute spans (engine/trace/span.h).
  const auto spans = tpsp::bench::span_seconds(tp, c.span_steps, step, {"gemm", "attention", "comm"});
  if (!c.trace_dir.empty()) tpsp::bench::write_trace(tp, c.trace_dir, "step", step);

  if (tp.rank() == 0) {
    const double step_s = median(t.step), gemm_s = median(t.gemm);
    tpsp::bench::ResultLine line{c.gpt.llama() ? "llama" : "gpt", {}};
    line.add("impl", "engine");
    line.add("tp", c.tp);
    line.add("sp", c.sp ? 1 : 0);
    line.add("layers", c.gpt.layers);
    line.add("h", c.gpt.hidden);
    line.add("heads", c.gpt.heads);
    if (c.gpt.llama()) line.add("groups", c.gpt.query_groups());
    line.add("s", c.gpt.seq);
    line.add("b", c.batch);
    line.add("V", c.gpt.vocab);
    line.add("steps", c.steps);
    line.add("blas_threads", blas_threads);
    line.add("loss0", static_cast<double>(loss0));
    line.add("step_s", step_s);
    line.add("step_min_s", *std::min_element(t.step.begin(), t.step.end()));
    line.add("step_max_s", *std::max_element(t.step.begin(), t.step.end()));
    if (c.gemm) {
      line.add("gemm_s", gemm_s);
      line.add("gemm_frac", gemm_s / step_s);
    }
    if (c.span_steps > 0) {
      line.add("span_step_s", median(spans.at("step")));
      line.add("span_gemm_s", median(spans.at("gemm")));
      line.add("span_attention_s", median(spans.at("attention")));
      line.add("span_comm_s", median(spans.at("comm")));
    }
    line.print();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tpsp::bench::single_thread_blas();
  Config c;
  CLI::App app{
      "One ParallelGPT training step (fwd, bwd, finalize_grads, AdamW), fp32, TP(+SP); prints the "
      "step time and the step's GEMMs timed alone"};
  app.add_option("--tp", c.tp, "tensor-parallel size (ranks to fork)")->check(CLI::Range(1, 64));
  app.add_flag("--sp", c.sp, "sequence parallelism");
  app.add_flag("--tp-comm-overlap", c.overlap,
               "overlap each linear layer's collectives with its GEMMs (Megatron's tp_comm_overlap, lab04)");
  app.add_option("--layers", c.gpt.layers, "transformer layers")->check(CLI::PositiveNumber);
  app.add_option("--hidden", c.gpt.hidden, "hidden size h")->check(CLI::PositiveNumber);
  app.add_option("--heads", c.gpt.heads, "attention heads")->check(CLI::PositiveNumber);
  app.add_option("--seq", c.gpt.seq, "sequence length s (= the position table)")->check(CLI::PositiveNumber);
  app.add_option("--batch", c.batch, "micro-batch size b")->check(CLI::PositiveNumber);
  app.add_option("--vocab", c.gpt.vocab, "vocabulary V")->check(CLI::PositiveNumber);
  app.add_option("--steps", c.steps, "timed steps (median reported)")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", c.warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--span-steps", c.span_steps, "extra steps with compute spans on")
      ->check(CLI::Range(0, 1000));
  app.add_flag("--gemm,!--no-gemm", c.gemm, "time the step's GEMMs alone too (default on)");
  app.add_option("--seed", c.seed, "seed of parameters and tokens");
  app.add_option("--trace", c.trace_dir,
                 "write one more step as Chrome traces DIR/step/rank<r>.json (make timeline's layer figure)");
  app.add_option("--model", c.model, "gpt (the GPT-2 block) or llama (RMSNorm, SwiGLU, RoPE, GQA, untied)")
      ->check(CLI::IsMember({"gpt", "llama"}));
  app.add_option("--query-groups", c.query_groups, "llama: key/value groups")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (c.model == "llama") {
    const tpsp::GPTConfig g = c.gpt;
    c.gpt = tpsp::llama_config(g.vocab, g.seq, g.hidden, g.heads, c.query_groups, g.layers, g.ffn);
  }
  return tpsp::bench::run_ranks(c.tp, [&c] { return run_rank(c); });
}
