// bench_collectives: bus bandwidth of each ProcessGroup collective per message size, in nccl-tests'
// columns (size, count, type, time, algbw, busbw, #wrong; nccl-tests PERFORMANCE.md for busbw),
// beside two baselines measured in the same run: raw memcpy of the same size, and a raw Gloo ring
// all-reduce (gloo::allreduce on the group's context, bypassing queue, fingerprints and recorder).
//
//   size   S = bytes of the full buffer: all_reduce/all_to_all/broadcast input, all_gather output,
//          reduce_scatter input (each rank holds S/n of the gathered / scattered side)
//   algbw  S / time          busbw  algbw * factor (2(n-1)/n all_reduce, (n-1)/n AG/RS/A2A, 1 bcast)
//   time   the slowest rank's mean per call (microseconds)
//
// It forks its own ranks (--ranks, default 2: keep ranks <= cores) unless RANK is already set
// (then it runs as one rank of a launcher-made world). Fingerprints are off, as in a training run.
#include <fmt/core.h>
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include "bench/bench_common.h"
#include "engine/comm/cost_model.h"
#include "engine/comm/env.h"
#include "engine/comm/gloo/gloo_backend.h"

using tpsp::Shape;
using tpsp::Tensor;
using tpsp::comm::OpKind;
using clock_type = std::chrono::steady_clock;

namespace {

struct Config {
  int ranks = 2;
  int64_t min_bytes = 4096;
  int64_t max_bytes = 64ll << 20;
  int factor = 4;
  double seconds_per_size = 0.3;  // target timed duration per (op, size), all rounds together
  int rounds = 5;                 // alternating rounds of ours / raw Gloo / memcpy
  std::vector<std::string> ops{"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"};
};

/// Mean seconds per call of `fn` over `iters` calls, the max over ranks (after one warm-up call).
double time_calls(tpsp::comm::ProcessGroup& pg, int iters, const std::function<void()>& fn) {
  fn();
  pg.barrier();
  const auto t0 = clock_type::now();
  for (int i = 0; i < iters; ++i) fn();
  double t = std::chrono::duration<double>(clock_type::now() - t0).count() / iters;
  Tensor tt = Tensor::full({1}, static_cast<float>(t));
  pg.all_reduce(tt, tpsp::comm::ReduceOp::max);
  return tt.data()[0];
}

/// Iterations so that one (op, size) takes about cfg.seconds_per_size at `guess_Bps`.
int iterations(const Config& cfg, int64_t bytes, double guess_Bps) {
  const double est = 3e-4 + static_cast<double>(bytes) / guess_Bps;
  return static_cast<int>(std::clamp(cfg.seconds_per_size / est, 3.0, 500.0));
}

/// Count of elements of `t` that differ from f(i) (nccl-tests' #wrong), summed over ranks.
template <typename F>
int64_t wrong(tpsp::comm::ProcessGroup& pg, const Tensor& t, F f) {
  int64_t w = 0;
  for (int64_t i = 0; i < t.numel(); ++i) w += t.data()[i] != static_cast<float>(f(i));
  Tensor c = Tensor::full({1}, static_cast<float>(w));
  pg.all_reduce(c);
  return static_cast<int64_t>(c.data()[0]);
}

/// One (op, size): the call to time, and a check on exact inputs (small integers) returning #wrong.
struct OpCase {
  std::function<void()> call;
  std::function<int64_t()> check;
};

/// Builds the buffers of `op` for a full buffer of `bytes` (S of the header) on this rank.
OpCase make_case(tpsp::comm::ProcessGroup& pg, const std::string& op, int64_t bytes) {
  const int n = pg.size(), r = pg.rank();
  const int64_t count = bytes / 4;  // elements of S
  const int64_t k = count / n;      // elements per rank of the scattered side
  auto val = [](int64_t i) { return static_cast<float>(i % 251); };
  auto* p = &pg;
  if (op == "all_reduce") {
    auto t = std::make_shared<Tensor>(Shape{count});
    return {[p, t] { p->all_reduce(*t); },
            [p, t, n, r, count, val] {
              for (int64_t i = 0; i < count; ++i) t->data()[i] = val(i + r);
              p->all_reduce(*t);
              return wrong(*p, *t, [&](int64_t i) {
                float s = 0;
                for (int q = 0; q < n; ++q) s += val(i + q);
                return s;
              });
            }};
  }
  if (op == "all_gather") {
    auto in = std::make_shared<Tensor>(Shape{k}), out = std::make_shared<Tensor>(Shape{k * n});
    return {[p, in, out] { p->all_gather_async(*in, *out)->wait(); },
            [p, in, out, r, k, val] {
              for (int64_t i = 0; i < k; ++i) in->data()[i] = val(i + r * k);
              p->all_gather_async(*in, *out)->wait();
              return wrong(*p, *out, val);
            }};
  }
  if (op == "reduce_scatter") {
    auto in = std::make_shared<Tensor>(Shape{k * n}), out = std::make_shared<Tensor>(Shape{k});
    return {[p, in, out] { p->reduce_scatter_async(*in, *out)->wait(); },
            [p, in, out, n, r, k, val] {
              for (int64_t i = 0; i < k * n; ++i) in->data()[i] = val(i) * static_cast<float>(r + 1);
              p->reduce_scatter_async(*in, *out)->wait();
              return wrong(*p, *out,
                           [&](int64_t i) { return val(r * k + i) * static_cast<float>(n * (n + 1) / 2); });
            }};
  }
  if (op == "all_to_all") {
    auto in = std::make_shared<Tensor>(Shape{k * n}), out = std::make_shared<Tensor>(Shape{k * n});
    return {[p, in, out] { p->all_to_all_async(*in, *out)->wait(); },
            [p, in, out, r, k] {
              for (int64_t i = 0; i < in->numel(); ++i)
                in->data()[i] = static_cast<float>(r * 1000 + (i % 251));
              p->all_to_all_async(*in, *out)->wait();
              // out chunk j comes from rank j's chunk r: element i of it is j*1000 + ((r*k + i%k) % 251)
              return wrong(*p, *out, [&](int64_t i) { return (i / k) * 1000 + ((r * k + i % k) % 251); });
            }};
  }
  auto t = std::make_shared<Tensor>(Shape{count});  // broadcast from rank 0
  return {[p, t] { p->broadcast(*t, 0); },
          [p, t, r, count, val] {
            for (int64_t i = 0; i < count; ++i) t->data()[i] = r == 0 ? val(i) : -1.0f;
            p->broadcast(*t, 0);
            return wrong(*p, *t, val);
          }};
}

/// Raw Gloo ring all-reduce of `bytes` on the group's own context, bypassing the group's queue,
/// fingerprints and recorder: the floor for all_reduce.
std::function<void()> make_raw_gloo_allreduce(tpsp::comm::ProcessGroup& pg, int64_t bytes) {
  auto& gloo = dynamic_cast<tpsp::comm::GlooBackend&>(pg.backend());
  auto buf = std::make_shared<std::vector<float>>(static_cast<std::size_t>(bytes / 4), 1.0f);
  auto ctx = gloo.context();
  return [ctx, buf] {
    gloo::AllreduceOptions o(ctx);
    o.setOutput(buf->data(), buf->size());
    o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    o.setTag(0x7ffff);
    gloo::allreduce(o);
  };
}

/// Seconds per memcpy of `bytes`, mean over `iters` copies (one rank's memory bandwidth).
double memcpy_seconds(std::vector<char>& a, std::vector<char>& b, int iters) {
  const auto t0 = clock_type::now();
  for (int i = 0; i < iters; ++i) {
    std::memcpy(b.data(), a.data(), a.size());
    asm volatile("" : : "r"(b.data()) : "memory");
  }
  return std::chrono::duration<double>(clock_type::now() - t0).count() / iters;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

OpKind kind_of(const std::string& op) {
  static const std::map<std::string, OpKind> m{{"all_reduce", OpKind::all_reduce},
                                               {"all_gather", OpKind::all_gather},
                                               {"reduce_scatter", OpKind::reduce_scatter},
                                               {"all_to_all", OpKind::all_to_all},
                                               {"broadcast", OpKind::broadcast}};
  return m.at(op);
}

int run_rank(const Config& cfg) {
  tpsp::comm::GroupOptions o = tpsp::comm::options_from_env();
  o.fingerprints = false;
  auto pg = tpsp::comm::init_from_env(o);
  const int n = pg->size();
  const bool lead = pg->rank() == 0;
  if (lead) {
    fmt::print("# bench_collectives: {} ranks (Gloo tcp, loopback), fingerprints off, link {}\n", n,
               o.link.name);
    fmt::print(
        "# busbw = algbw * factor (nccl-tests); 'gloo' = busbw / raw gloo ring all_reduce busbw at the "
        "same size; 'memcpy' = busbw / memcpy GB/s\n");
  }
  int64_t total_wrong = 0;
  for (const auto& op : cfg.ops) {
    if (lead) {
      fmt::print("\n# {}\n", op);
      fmt::print("{:>12} {:>12} {:>5} {:>11} {:>8} {:>8} {:>7} {:>7} {:>7}\n", "size(B)", "count", "type",
                 "time(us)", "algbw", "busbw", "#wrong", "gloo", "memcpy");
    }
    for (int64_t bytes = cfg.min_bytes; bytes <= cfg.max_bytes; bytes *= cfg.factor) {
      if (bytes / 4 % n != 0) continue;
      // Rounds alternate ours / raw Gloo / memcpy, so load on the machine hits all three alike;
      // each column is the median over rounds.
      OpCase c = make_case(*pg, op, bytes);
      auto raw = make_raw_gloo_allreduce(*pg, bytes);
      std::vector<char> a(static_cast<std::size_t>(bytes), 1), b(static_cast<std::size_t>(bytes));
      const int iters = std::max(1, iterations(cfg, bytes, 5e8) / cfg.rounds);
      std::vector<double> t_op, t_raw, t_mc;
      for (int round = 0; round < cfg.rounds; ++round) {
        t_op.push_back(time_calls(*pg, iters, c.call));
        t_raw.push_back(time_calls(*pg, iters, raw));
        t_mc.push_back(memcpy_seconds(a, b, 4 * iters));
      }
      const int64_t nwrong = c.check();
      pg->recorder().clear();
      total_wrong += nwrong;
      const double S = static_cast<double>(bytes);
      const double time_s = median(t_op);
      const double algbw = S / time_s / 1e9;
      const double busbw = algbw * tpsp::comm::busbw_factor(kind_of(op), n);
      const double raw_busbw = S / median(t_raw) / 1e9 * tpsp::comm::busbw_factor(OpKind::all_reduce, n);
      const double memcpy_gbs = S / median(t_mc) / 1e9;
      if (lead)
        fmt::print("{:>12} {:>12} {:>5} {:>11.1f} {:>8.3f} {:>8.3f} {:>7} {:>7.2f} {:>7.3f}\n", bytes,
                   bytes / 4, "float", time_s * 1e6, algbw, busbw, nwrong, busbw / raw_busbw,
                   busbw / memcpy_gbs);
      if (lead && op == cfg.ops.back() && bytes * cfg.factor > cfg.max_bytes)
        fmt::print("\n# raw baselines at {} B: gloo ring all_reduce busbw {:.3f} GB/s, memcpy {:.3f} GB/s\n",
                   bytes, raw_busbw, memcpy_gbs);
    }
  }
  if (lead) fmt::print("# total #wrong: {}\n", total_wrong);
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  CLI::App app{
      "Bus bandwidth of every collective (nccl-tests columns) with raw memcpy and raw Gloo baselines"};
  app.add_option("-n,--ranks", cfg.ranks, "ranks to fork (ignored when RANK is set)")
      ->check(CLI::Range(1, 64));
  app.add_option("-b,--min-bytes", cfg.min_bytes, "smallest message (bytes)")->check(CLI::PositiveNumber);
  app.add_option("-e,--max-bytes", cfg.max_bytes, "largest message (bytes)")->check(CLI::PositiveNumber);
  app.add_option("-f,--factor", cfg.factor, "size multiplier between rows")->check(CLI::Range(2, 1024));
  app.add_option("-t,--seconds", cfg.seconds_per_size, "target timed seconds per row")
      ->check(CLI::PositiveNumber);
  app.add_option("-r,--rounds", cfg.rounds, "alternating measurement rounds per row (median)")
      ->check(CLI::Range(1, 100));
  app.add_option("--ops", cfg.ops, "collectives to run")
      ->check(CLI::IsMember({"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"}));
  CLI11_PARSE(app, argc, argv);

  // Forks cfg.ranks ranks (or runs as one rank of a launcher-made world when RANK is set).
  return tpsp::bench::run_ranks(cfg.ranks, [&cfg] { return run_rank(cfg); });
}
