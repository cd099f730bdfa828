// bench_mlp_step: one Megatron tensor-parallel MLP training step on the engine's own layers, fp32:
//   forward   X [s, b, h] (or this rank's [s/tp, b, h] under SP)
//             → ColumnParallelLinear h → ffn/tp (f, or the SP all-gather of X)
//             → GELU (tanh) → RowParallelLinear ffn/tp → h (g all-reduce, or the SP reduce-scatter)
//   backward  the mirror (layers.cpp, under SP layers_sp.cpp): fc2 dgrad/wgrad (dY all-gathered under
//             SP), GELU backward, fc1 wgrad (X gathered again under SP) / dgrad (all-reduce, or
//             reduce-scatter under SP); weight gradients accumulate into f32 buffers (β = 1).
// Timed in the same run, alternating with the steps: the GEMMs alone — the six matmul calls of the
// step (forward, dgrad and wgrad of both linears) with the same shapes through engine/ops/matmul.h —
// so "gemm_frac" = GEMM time / step time says how much of the step is anything but GEMMs.
// Then a few more steps with compute spans on (engine/trace/span.h): span_gemm_s is the GEMM time measured
// inside the step, to compare with gemm_s measured alone; span_comm_s the time spent in collectives.
//
// Ranks are forked (one per TP rank, one OpenBLAS thread each); fingerprints and the recorder are
// off during timing, as in training. Output: one line
//   RESULT mlp impl=engine tp=2 sp=1 s=512 b=1 h=1024 ffn=4096 ... step_s=... gemm_s=... gemm_frac=...
// (bench/bench_common.h; bench/peers/tp_mlp_step.py prints the same for PyTorch), parsed by
// bench/run_bench.py. Times: seconds, per step the slowest rank, median over steps.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <functional>

#include "bench/bench_common.h"
#include "engine/error.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/matmul.h"
#include "engine/random/init.h"
#include "engine/tensor_parallel/layers.h"

namespace {

using tpsp::Tensor;
using tpsp::bench::median;
using tpsp::tensor_parallel::ColumnParallelLinear;
using tpsp::tensor_parallel::LinearOptions;
using tpsp::tensor_parallel::LinearSaved;
using tpsp::tensor_parallel::RowParallelLinear;

struct Config {
  int tp = 1;
  bool sp = false;
  bool overlap = false;  // --tp-comm-overlap: both layers' collectives behind their GEMMs (lab04)
  int64_t seq = 512, batch = 1, hidden = 1024, ffn = 0;  // ffn 0: 4·hidden
  int steps = 10, warmup = 2, span_steps = 3;
  bool gemm = true;  // time the GEMMs alone too
  uint64_t seed = 1234;
};

/// A whole tensor of `shape` drawn from N(0, std²) keyed by (seed, name) (engine/random/init.h).
Tensor randn(const tpsp::Shape& shape, uint64_t seed, const std::string& name, float std) {
  Tensor t(shape);
  tpsp::random::init_normal(t, seed, name, std);
  return t;
}

/// This rank's shards of the MLP's whole parameters (Megatron's mlp.linear_fc1 / linear_fc2,
/// megatron/core/transformer/mlp.py): W1 rows [r·f/tp, (r+1)·f/tp) of [f, h], b1 the same rows of [f],
/// W2 the same columns of [h, f], b2 [h] whole; f32 gradient buffers of the same shapes, zero.
struct Shards {
  Tensor w1, b1, w2, b2, dw1, db1, dw2, db2;

  static Shards make(const Config& c, int64_t f, int rank) {
    const int64_t fl = f / c.tp;
    Shards s;
    s.w1 = randn({f, c.hidden}, c.seed, "mlp.linear_fc1.weight", 0.02f).slice0(rank * fl, (rank + 1) * fl);
    s.b1 = randn({f}, c.seed, "mlp.linear_fc1.bias", 0.02f).slice0(rank * fl, (rank + 1) * fl);
    s.w2 = randn({c.hidden, f}, c.seed, "mlp.linear_fc2.weight", 0.02f).narrow_copy(1, rank * fl, fl);
    s.b2 = randn({c.hidden}, c.seed, "mlp.linear_fc2.bias", 0.02f);
    s.dw1 = Tensor::zeros(s.w1.shape());
    s.db1 = Tensor::zeros(s.b1.shape());
    s.dw2 = Tensor::zeros(s.w2.shape());
    s.db2 = Tensor::zeros(s.b2.shape());
    return s;
  }
};

/// The MLP of one TP rank: fc1 = ColumnParallelLinear(h → f), fc2 = RowParallelLinear(f → h), built
/// as engine/model/transformer_layer.cpp builds them (no gather_output, input_is_parallel).
struct RankMLP {
  Shards p;
  ColumnParallelLinear fc1;
  RowParallelLinear fc2;

  RankMLP(const Config& c, int64_t f, int rank)
      : p(Shards::make(c, f, rank)),
        fc1(p.w1, p.b1, p.dw1, p.db1,
            {.gather_output = false, .sequence_parallel = c.sp, .tp_comm_overlap = c.overlap},
            "mlp.linear_fc1"),
        fc2(p.w2, p.b2, p.dw2, p.db2,
            {.input_is_parallel = true, .sequence_parallel = c.sp, .tp_comm_overlap = c.overlap},
            "mlp.linear_fc2") {}

  /// Forward and backward of one step. x: [s, b, h] or [s/tp, b, h] (SP); dy shaped like the output
  /// (the same). Returns dx shaped like x; gradients accumulate into dw1, db1, dw2, db2.
  Tensor step(const Tensor& x, const Tensor& dy, tpsp::comm::ProcessGroup& tp) {
    LinearSaved s1, s2;
    const Tensor y1 = fc1.forward(x, s1, tp);
    const Tensor y2 = fc2.forward(tpsp::ops::gelu_forward(y1), s2, tp);
    (void)y2;
    const Tensor da = fc2.backward(dy, s2, tp);
    const Tensor dy1 = tpsp::ops::gelu_backward(da, y1);
    return fc1.backward(dy1, s1, tp);
  }
};

/// The six GEMMs of one step on one rank with the step's shapes, nothing else: X [s, b, h] (whole,
/// as gathered under SP), A [s, b, f/tp]; fc1: Y1 = X·W1ᵀ, dX = dY1·W1, dW1 += dY1ᵀ·X; fc2: Y2 = A·W2ᵀ,
/// dA = dY2·W2, dW2 += dY2ᵀ·A (engine/ops/matmul.h).
struct GemmOnly {
  Tensor x, a, dy1, dy2;

  void run(RankMLP& m) {
    const Tensor y1 = tpsp::ops::matmul_forward(x, m.p.w1);
    const Tensor y2 = tpsp::ops::matmul_forward(a, m.p.w2);
    const Tensor da = tpsp::ops::matmul_dgrad(dy2, m.p.w2);
    tpsp::ops::matmul_wgrad(dy2, a, m.p.dw2);
    const Tensor dx = tpsp::ops::matmul_dgrad(dy1, m.p.w1);
    tpsp::ops::matmul_wgrad(dy1, x, m.p.dw1);
  }
};

int run_rank(const Config& c) {
  const int blas_threads = tpsp::bench::single_thread_blas();
  auto world = tpsp::bench::make_world();
  tpsp::comm::ProcessGroup& tp = *world;
  TPSP_CHECK(tp.size() == c.tp, "bench_mlp_step: world size ", tp.size(), " != --tp ", c.tp);
  const int64_t f = c.ffn > 0 ? c.ffn : 4 * c.hidden;
  TPSP_CHECK(f % c.tp == 0, "ffn=", f, " is not divisible by tp=", c.tp);
  TPSP_CHECK(!c.sp || c.seq % c.tp == 0, "s=", c.seq, " is not divisible by tp=", c.tp, " (SP)");
  const int r = tp.rank();
  RankMLP mlp(c, f, r);

  const Tensor x_whole = randn({c.seq, c.batch, c.hidden}, c.seed, "input", 1.f);
  const Tensor dy_whole = randn({c.seq, c.batch, c.hidden}, c.seed, "output_grad", 1.f);
  const int64_t rows = c.sp ? c.seq / c.tp : c.seq;
  const Tensor x = c.sp ? x_whole.slice0(r * rows, (r + 1) * rows) : x_whole;
  const Tensor dy = c.sp ? dy_whole.slice0(r * rows, (r + 1) * rows) : dy_whole;
  GemmOnly g{x_whole, randn({c.seq, c.batch, f / c.tp}, c.seed, "act", 1.f),
             randn({c.seq, c.batch, f / c.tp}, c.seed, "fc1_grad", 1.f), dy_whole};

  const auto step = [&] { mlp.step(x, dy, tp); };
  const tpsp::bench::Timings t = tpsp::bench::time_alternating(
      tp, c.warmup, c.steps, step, c.gemm ? std::function<void()>([&] { g.run(mlp); }) : nullptr);
  // GEMM time inside the step, from the compute spans the ops record (engine/trace/span.h).
  const auto spans = tpsp::bench::span_seconds(tp, c.span_steps, step, {"gemm", "comm"});

  if (r == 0) {
    const double step_s = median(t.step), gemm_s = median(t.gemm);
    const double flops = 6.0 * 2.0 * static_cast<double>(c.seq * c.batch * c.hidden * (f / c.tp));
    tpsp::bench::ResultLine line{"mlp", {}};
    line.add("impl", "engine");
    line.add("tp", c.tp);
    line.add("sp", c.sp ? 1 : 0);
    line.add("s", c.seq);
    line.add("b", c.batch);
    line.add("h", c.hidden);
    line.add("ffn", f);
    line.add("steps", c.steps);
    line.add("blas_threads", blas_threads);
    line.add("step_s", step_s);
    line.add("step_min_s", *std::min_element(t.step.begin(), t.step.end()));
    line.add("step_max_s", *std::max_element(t.step.begin(), t.step.end()));
    if (c.gemm) {
      line.add("gemm_s", gemm_s);
      line.add("gemm_frac", gemm_s / step_s);
      line.add("gemm_gflops", flops / gemm_s / 1e9);
    }
    if (c.span_steps > 0) {
      line.add("span_step_s", median(spans.at("step")));
      line.add("span_gemm_s", median(spans.at("gemm")));
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
      "One Megatron TP(+SP) MLP step (ColumnParallelLinear, GELU, RowParallelLinear), fwd+bwd, "
      "fp32, on the engine's layers; prints step time and the same GEMMs timed alone"};
  app.add_option("--tp", c.tp, "tensor-parallel size (ranks to fork)")->check(CLI::Range(1, 64));
  app.add_flag("--sp", c.sp, "sequence parallelism");
  app.add_flag("--tp-comm-overlap", c.overlap,
               "overlap each linear layer's collectives with its GEMMs (Megatron's tp_comm_overlap, lab04)");
  app.add_option("--seq", c.seq, "sequence length s")->check(CLI::PositiveNumber);
  app.add_option("--batch", c.batch, "micro-batch size b")->check(CLI::PositiveNumber);
  app.add_option("--hidden", c.hidden, "hidden size h")->check(CLI::PositiveNumber);
  app.add_option("--ffn", c.ffn, "MLP width (0: 4h)")->check(CLI::NonNegativeNumber);
  app.add_option("--steps", c.steps, "timed steps (median reported)")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", c.warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--span-steps", c.span_steps, "extra steps with compute spans on")
      ->check(CLI::Range(0, 1000));
  app.add_flag("--gemm,!--no-gemm", c.gemm, "time the step's GEMMs alone too (default on)");
  app.add_option("--seed", c.seed, "seed of parameters and inputs");
  CLI11_PARSE(app, argc, argv);
  return tpsp::bench::run_ranks(c.tp, [&c] { return run_rank(c); });
}
