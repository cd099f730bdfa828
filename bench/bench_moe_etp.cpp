// ETP = 1 against ETP = 2 for one MoE layer at the same world size, the comparison the lesson's last
// section makes ("TP's decline in the MoE era"): with many small experts, expert tensor parallelism cuts
// GEMMs that are already narrow narrower and adds an all-gather before the experts and a reduce-scatter
// after them, on top of the dispatch and combine all-to-alls. Forks --ranks ranks (Gloo) and runs the
// engine's MoE layer (engine/moe/moe_layer.h) forward and backward once per layout: EP = ranks, ETP = 1
// and EP = ranks/2, ETP = 2. Prints, per collective, the bytes a rank sent (the recorder's, max over
// ranks) beside the uniform-routing closed form (engine/moe/comm_volume.h), the expert GEMMs [M, N, K] a
// rank runs, and their time on this machine (rank 0 alone, the layouts alternating, best of --repeats).
// Measured and printed, never asserted: the machine is shared.
//   build/bench/bench_moe_etp                    # h 4096, expert ffn 1408, 8 experts, top-2, 4 ranks
//   build/bench/bench_moe_etp --hidden 64 --ffn 32 --tokens 16 --repeats 1   # a smoke run
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>

#include "bench/bench_common.h"
#include "engine/comm/env.h"
#include "engine/moe/comm_volume.h"
#include "engine/moe/moe_layer.h"
#include "engine/ops/ops.h"
#include "engine/random/init.h"

namespace {

using namespace tpsp;

struct Config {
  int ranks = 4;
  int64_t experts = 8, topk = 2, hidden = 4096, ffn = 1408, tokens = 256;
  int repeats = 5;
};

/// N(0, scale²) from Philox, keyed by `seed` (engine/random/init.h).
Tensor randn(const Shape& shape, unsigned seed, float scale) {
  Tensor t(shape);
  random::init_normal(t, seed, "randn", scale);
  return t;
}

const char* const kLabels[] = {"moe.dispatch", "moe.combine", "moe.etp_all_gather", "moe.etp_reduce_scatter"};

/// One forward and backward of the layer at (ep, etp); returns the bytes this rank sent per forward label.
std::map<std::string, uint64_t> run_layout(const Config& c, const std::shared_ptr<comm::ProcessGroup>& world,
                                           int ep, int etp) {
  moe::ExpertParallelState eps(world, ep, etp);
  moe::MoEWeights w;
  w.router = randn({c.experts, c.hidden}, 1, 0.02f);  // small logits: a near-uniform routing
  const auto [first, local] = moe::ExpertParallelState::local_experts(c.experts, ep, eps.ep_rank());
  w.first_expert = first;
  const int64_t f = c.ffn / etp;
  for (int64_t e = first; e < first + local; ++e)
    w.experts.push_back({randn({f, c.hidden}, 10 + static_cast<unsigned>(e), 0.02f),
                         randn({f, c.hidden}, 20 + static_cast<unsigned>(e), 0.02f),
                         randn({c.hidden, f}, 30 + static_cast<unsigned>(e), 0.02f)});
  const moe::MoEOptions o{c.experts, c.topk, 0.01f, nullptr, "moe"};
  const Tensor x = randn({c.tokens, c.hidden}, 100 + static_cast<unsigned>(world->rank()), 1.f);
  world->recorder().clear();
  moe::MoEState st;
  moe::MoEGrads g;
  moe::moe_backward(moe::moe_forward(x, w, o, eps, st), w, o, eps, st, 1.f, g);
  std::map<std::string, uint64_t> sent;
  for (const auto& rec : world->recorder().records()) sent[rec.label] += rec.bytes;
  for (const char* label : kLabels) {  // max over ranks, in quarter KiB (rows are multiples of 256 bytes)
    Tensor t = Tensor::full({1}, static_cast<float>(sent[label] / 256));
    world->all_reduce(t, comm::ReduceOp::max, {"bench.max"});
    sent[label] = static_cast<uint64_t>(t.data()[0]) * 256;
  }
  return sent;
}

/// Seconds of one rank's forward expert GEMMs (fc1 as gate and up, fc2) at the shapes of `v`.
double gemm_seconds(const moe::MoEVolume& v) {
  std::vector<std::pair<Tensor, Tensor>> work;  // (input, weight) per GEMM
  for (const moe::GemmShape& s : v.gemms)
    work.push_back({randn({s.m, s.k}, 3, 1.f), randn({s.n, s.k}, 4, 0.02f)});

  const double t0 = bench::now_seconds();
  for (const auto& [in, weight] : work) (void)ops::matmul_forward(in, weight);
  return bench::now_seconds() - t0;
}

std::string kib(uint64_t bytes) {
  return fmt::format("{:.0f} KiB", static_cast<double>(bytes) / 1024.0);
}

int run_rank(const Config& c) {
  auto world = comm::init_from_env();
  const int n = world->size();
  const std::pair<int, int> layouts[] = {{n, 1}, {n / 2, 2}};
  std::map<std::string, uint64_t> measured[2];
  moe::MoEVolume uniform[2];
  for (int i = 0; i < 2; ++i) {
    measured[i] = run_layout(c, world, layouts[i].first, layouts[i].second);
    uniform[i] = moe::moe_volume_uniform(
        {layouts[i].first, layouts[i].second, c.experts, c.topk, c.hidden, c.ffn, 4}, c.tokens);
  }
  world->barrier();
  if (world->rank() != 0) {
    world->barrier();  // idle while rank 0 times the GEMMs alone
    return 0;
  }
  fmt::print("MoE layer: {} ranks, {} experts, top-{}, h={}, expert ffn={}, {} tokens per rank (float32)\n",
             n, c.experts, c.topk, c.hidden, c.ffn, c.tokens);
  fmt::print(
      "bytes a rank sends, forward (backward sends as much again): measured (max over ranks; this "
      "routing) / uniform routing's closed form\n");
  fmt::print("{:<22}{:>32}{:>32}\n", "", fmt::format("ETP=1, EP={}", layouts[0].first),
             fmt::format("ETP=2, EP={}", layouts[1].first));
  const auto forms = [](const moe::MoEVolume& v) {
    return std::vector<uint64_t>{v.dispatch, v.combine, v.etp_all_gather, v.etp_reduce_scatter};
  };
  uint64_t total[2][2] = {};
  for (int k = 0; k < 4; ++k) {
    std::string row = fmt::format("{:<22}", kLabels[k] + 4);
    for (int i = 0; i < 2; ++i) {
      const uint64_t m = measured[i][kLabels[k]], u = forms(uniform[i])[static_cast<std::size_t>(k)];
      total[i][0] += m;
      total[i][1] += u;
      row += fmt::format("{:>32}", kib(m) + " / " + kib(u));
    }
    fmt::print("{}\n", row);
  }
  fmt::print("{:<22}{:>32}{:>32}\n", "total", kib(total[0][0]) + " / " + kib(total[0][1]),
             kib(total[1][0]) + " / " + kib(total[1][1]));
  for (int i = 0; i < 2; ++i) {
    const moe::GemmShape& fc1 = uniform[i].gemms[0];
    const moe::GemmShape& fc2 = uniform[i].gemms[1];
    fmt::print(
        "expert GEMMs per rank, ETP={}: {} experts x fc1 [{}, {}, {}] + fc2 [{}, {}, {}] ([M, N, K], "
        "uniform)\n",
        layouts[i].second, uniform[i].gemms.size() / 2, fc1.m, fc1.n, fc1.k, fc2.m, fc2.n, fc2.k);
  }
  double best[2] = {1e30, 1e30};
  for (int r = 0; r < c.repeats; ++r)
    for (int i = 0; i < 2; ++i) best[i] = std::min(best[i], gemm_seconds(uniform[i]));
  fmt::print(
      "expert GEMM time per rank, forward (best of {}, alternating): ETP=1 {:.2f} ms, ETP=2 {:.2f} ms, "
      "ratio {:.2f}\n",
      c.repeats, best[0] * 1e3, best[1] * 1e3, best[1] / best[0]);
  fmt::print("RESULT moe_etp ranks={} bytes_etp1={} bytes_etp2={} gemm_ms_etp1={:.3f} gemm_ms_etp2={:.3f}\n",
             n, total[0][0], total[1][0], best[0] * 1e3, best[1] * 1e3);
  std::fflush(stdout);
  world->barrier();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tpsp::bench::single_thread_blas();
  Config c;
  CLI::App app{"ETP=1 against ETP=2 for one MoE layer: bytes per collective and expert GEMM time"};
  app.add_option("-n,--ranks", c.ranks, "ranks to fork (even, at least 2)")->check(CLI::Range(2, 64));
  app.add_option("--experts", c.experts, "num_moe_experts (divisible by the ranks)");
  app.add_option("--topk", c.topk, "moe_router_topk");
  app.add_option("--hidden", c.hidden, "hidden size h");
  app.add_option("--ffn", c.ffn, "each expert's ffn (even)");
  app.add_option("--tokens", c.tokens, "tokens per rank");
  app.add_option("--repeats", c.repeats, "GEMM timing repeats")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  if (c.ranks % 2 != 0 || c.experts % c.ranks != 0 || c.ffn % 2 != 0) {
    fmt::print(stderr,
               "bench_moe_etp: --ranks={} must be even, --experts={} divisible by it, --ffn={} even\n",
               c.ranks, c.experts, c.ffn);
    return 2;
  }
  return tpsp::bench::run_ranks(c.ranks, [&c] { return run_rank(c); });
}
