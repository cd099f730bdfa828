// bench_overlap: one TP+SP linear pair (fc1 = ColumnParallelLinear h → ffn/tp, fc2 = RowParallelLinear
// ffn/tp → h, no activation) forward + backward under an emulated link, serial (the layers of lab01
// and lab03) against tp_comm_overlap (lab04: the async backward, the all-gather/reduce-scatter GEMM
// rings), alternating steps in one run. Prints the median step times, their ratio, and the cost
// model's prediction from the serial step's own spans (lesson 04): every overlappable transfer hides
// behind a GEMM, so T_overlap ≈ T_serial − min(T_comm, T_gemm) (for each tp=2 ring:
// t_g + max(t_c, t_g) against t_c + 2·t_g).
// With --trace DIR, each rank writes one step of each mode as a Chrome trace (Perfetto; tools/
// plot_timeline.py draws them): DIR/serial/rank<r>.json and DIR/overlap/rank<r>.json.
// Output: `RESULT overlap tp=2 sp=1 ... serial_s=... overlap_s=... ratio=... predicted=...`.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <filesystem>

#include "bench/bench_common.h"
#include "engine/comm/link_model.h"
#include "engine/error.h"
#include "engine/random/init.h"
#include "engine/tensor_parallel/layers.h"
#include "engine/trace/span.h"

namespace {

using tpsp::Tensor;
using tpsp::bench::median;
using tpsp::tensor_parallel::ColumnParallelLinear;
using tpsp::tensor_parallel::LinearSaved;
using tpsp::tensor_parallel::RowParallelLinear;

struct Config {
  int tp = 2;
  int64_t seq = 512, batch = 1, hidden = 1024, ffn = 256;
  std::string link = "2GB/s";
  int steps = 10, warmup = 2, span_steps = 3;
  uint64_t seed = 1234;
  std::string trace_dir;
};

Tensor randn(const tpsp::Shape& shape, uint64_t seed, const std::string& name, float std) {
  Tensor t(shape);
  tpsp::random::init_normal(t, seed, name, std);
  return t;
}

/// fc1 → fc2 of one rank with SP, serial or overlapped; weight gradients accumulate in f32 buffers.
struct Pair {
  Tensor w1, w2, dw1, dw2;
  ColumnParallelLinear fc1;
  RowParallelLinear fc2;
  Pair(const Config& c, int r, bool overlap)
      : w1(randn({c.ffn, c.hidden}, c.seed, "fc1", 0.02f).slice0(r * c.ffn / c.tp, (r + 1) * c.ffn / c.tp)),
        w2(randn({c.hidden, c.ffn}, c.seed, "fc2", 0.02f).narrow_copy(1, r * c.ffn / c.tp, c.ffn / c.tp)),
        dw1(Tensor::zeros(w1.shape())),
        dw2(Tensor::zeros(w2.shape())),
        fc1(w1, Tensor(), dw1, Tensor(), {.sequence_parallel = true, .tp_comm_overlap = overlap}, "fc1"),
        fc2(w2, Tensor(), dw2, Tensor(), {.sequence_parallel = true, .tp_comm_overlap = overlap}, "fc2") {}
  void step(const Tensor& x, const Tensor& dy, tpsp::comm::ProcessGroup& tp) {
    LinearSaved s1, s2;
    fc2.forward(fc1.forward(x, s1, tp), s2, tp);
    fc1.backward(fc2.backward(dy, s2, tp), s1, tp);
  }
};

int run_rank(const Config& c) {
  const int blas_threads = tpsp::bench::single_thread_blas();
  auto world = tpsp::bench::make_world();
  tpsp::comm::ProcessGroup& tp = *world;
  TPSP_CHECK(tp.size() == c.tp, "bench_overlap: world size ", tp.size(), " != --tp ", c.tp);
  TPSP_CHECK(c.ffn % c.tp == 0, "ffn=", c.ffn, " is not divisible by tp=", c.tp);
  TPSP_CHECK(c.seq % c.tp == 0, "s=", c.seq, " is not divisible by tp=", c.tp, " (SP)");
  tp.set_link(tpsp::comm::LinkModel::parse(c.link));
  const int r = tp.rank();
  Pair serial(c, r, false), overlap(c, r, true);
  const int64_t rows = c.seq / c.tp;
  const Tensor x = randn({c.seq, c.batch, c.hidden}, c.seed, "x", 1.f).slice0(r * rows, (r + 1) * rows);
  const Tensor dy = randn({c.seq, c.batch, c.hidden}, c.seed, "dy", 1.f).slice0(r * rows, (r + 1) * rows);
  const auto serial_step = [&] { serial.step(x, dy, tp); };
  const auto overlap_step = [&] { overlap.step(x, dy, tp); };
  // Alternating serial and overlapped steps, so that load on the machine hits both alike.
  const tpsp::bench::Timings t =
      tpsp::bench::time_alternating(tp, c.warmup, c.steps, serial_step, overlap_step);
  const auto spans = tpsp::bench::span_seconds(tp, c.span_steps, serial_step, {"gemm", "comm"});
  if (!c.trace_dir.empty()) {
    tpsp::bench::write_trace(tp, c.trace_dir, "serial", serial_step);
    tpsp::bench::write_trace(tp, c.trace_dir, "overlap", overlap_step);
  }
  if (r == 0) {
    const double serial_s = median(t.step), overlap_s = median(t.gemm);
    const double span_step = median(spans.at("step")), gemm = median(spans.at("gemm")),
                 comm = median(spans.at("comm"));
    const double predicted = (span_step - std::min(comm, gemm)) / span_step;
    tpsp::bench::ResultLine line{"overlap", {}};
    line.add("tp", c.tp);
    line.add("sp", 1);
    line.add("link", c.link);
    line.add("s", c.seq);
    line.add("b", c.batch);
    line.add("h", c.hidden);
    line.add("ffn", c.ffn);
    line.add("steps", c.steps);
    line.add("blas_threads", blas_threads);
    line.add("serial_s", serial_s);
    line.add("overlap_s", overlap_s);
    line.add("ratio", overlap_s / serial_s);
    line.add("span_gemm_s", gemm);
    line.add("span_comm_s", comm);
    line.add("predicted", predicted);
    line.print();
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tpsp::bench::single_thread_blas();
  Config c;
  CLI::App app{
      "A TP+SP linear pair (ColumnParallelLinear → RowParallelLinear), fwd+bwd, under an emulated link: "
      "serial against tp_comm_overlap, with the cost model's prediction"};
  app.add_option("--tp", c.tp, "tensor-parallel size (ranks to fork)")->check(CLI::Range(2, 64));
  app.add_option("--seq", c.seq, "sequence length s")->check(CLI::PositiveNumber);
  app.add_option("--batch", c.batch, "micro-batch size b")->check(CLI::PositiveNumber);
  app.add_option("--hidden", c.hidden, "hidden size h")->check(CLI::PositiveNumber);
  app.add_option("--ffn", c.ffn, "width of the pair")->check(CLI::PositiveNumber);
  app.add_option("--link", c.link, "emulated link (engine/comm/link_model.h)");
  app.add_option("--steps", c.steps, "timed steps of each mode (median reported)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--warmup", c.warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--span-steps", c.span_steps, "serial steps with spans on (the prediction)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--trace", c.trace_dir, "write one step of each mode as Chrome traces under this directory");
  app.add_option("--seed", c.seed, "seed of parameters and inputs");
  CLI11_PARSE(app, argc, argv);
  return tpsp::bench::run_ranks(c.tp, [&c] { return run_rank(c); });
}
