#include "bench/bench_common.h"

#include <fmt/core.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "engine/comm/env.h"
#include "engine/trace/span.h"

// OpenBLAS's own thread control (not in cblas.h); the symbols come from BLAS::BLAS (Debian's
// libblas.so.3 is OpenBLAS).
extern "C" void openblas_set_num_threads(int);
extern "C" int openblas_get_num_threads(void);

namespace tpsp::bench {

int single_thread_blas() {
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  ::setenv("OMP_NUM_THREADS", "1", 1);
  openblas_set_num_threads(1);
  return openblas_get_num_threads();
}

int run_ranks(int ranks, const std::function<int()>& rank_main) {
  auto guarded = [&rank_main](int r) {
    int rc = 1;
    try {
      single_thread_blas();
      rc = rank_main();
    } catch (const std::exception& e) {
      fmt::print(stderr, "rank {}: {}\n", r, e.what());
    }
    std::fflush(nullptr);
    return rc;
  };
  if (const char* r = std::getenv("RANK")) return guarded(std::atoi(r));

  char tmpl[] = "/tmp/tpsp-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    fmt::print(stderr, "mkdtemp failed\n");
    return 1;
  }
  std::fflush(nullptr);  // nothing buffered may be printed twice by the children
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(ranks).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(ranks).c_str(), 1);
      ::setenv("TPSP_STORE_DIR", tmpl, 1);
      ::_exit(guarded(r));
    }
    pids.push_back(pid);
  }
  int rc = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);  // each rank's calls are bounded by the comm timeout
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
  return rc;
}

std::shared_ptr<comm::ProcessGroup> make_world() {
  comm::GroupOptions o = comm::options_from_env();
  o.fingerprints = false;
  auto pg = comm::init_from_env(o);
  pg->recorder().set_enabled(false);
  return pg;
}

std::vector<double> max_over_ranks(comm::ProcessGroup& pg, const std::vector<double>& seconds) {
  Tensor t({static_cast<int64_t>(seconds.size())});
  for (std::size_t i = 0; i < seconds.size(); ++i) t.data()[i] = static_cast<float>(seconds[i]);
  if (pg.size() > 1) pg.all_reduce(t, comm::ReduceOp::max, {"bench.max_over_ranks"});
  return std::vector<double>(t.data(), t.data() + t.numel());
}

double timed(comm::ProcessGroup& pg, const std::function<void()>& fn) {
  pg.barrier();
  const double t0 = now_seconds();
  fn();
  return now_seconds() - t0;
}

Timings time_alternating(comm::ProcessGroup& pg, int warmup, int steps, const std::function<void()>& step,
                         const std::function<void()>& gemm) {
  Timings t;
  for (int i = 0; i < warmup + steps; ++i) {
    const double s = timed(pg, step);
    const double g = gemm ? timed(pg, gemm) : 0.0;
    if (i < warmup) continue;
    t.step.push_back(s);
    if (gemm) t.gemm.push_back(g);
  }
  t.step = max_over_ranks(pg, t.step);
  if (gemm) t.gemm = max_over_ranks(pg, t.gemm);
  return t;
}

void write_trace(comm::ProcessGroup& pg, const std::string& dir, const std::string& mode,
                 const std::function<void()>& fn) {
  trace::Recorder& rec = pg.recorder();
  pg.barrier();
  rec.clear();
  rec.set_enabled(true);
  trace::install(pg.recorder_ptr());
  fn();
  trace::install(nullptr);
  rec.set_enabled(false);
  std::filesystem::create_directories(dir + "/" + mode);
  rec.write_chrome_trace(fmt::format("{}/{}/rank{}.json", dir, mode, pg.rank()));
}

std::map<std::string, std::vector<double>> span_seconds(comm::ProcessGroup& pg, int steps,
                                                        const std::function<void()>& step,
                                                        const std::vector<std::string>& names) {
  std::map<std::string, std::vector<double>> out;
  for (const std::string& n : names) out[n] = {};
  out["step"] = {};
  if (steps <= 0) return out;
  pg.recorder().set_enabled(true);
  trace::install(pg.recorder_ptr());
  for (int i = 0; i < steps; ++i) {
    pg.recorder().clear();
    const double wall = timed(pg, step);
    for (const std::string& n : names) out[n].push_back(0.0);
    out["step"].push_back(wall);
    for (const trace::ComputeRecord& r : pg.recorder().compute_records())
      if (auto it = out.find(r.name); it != out.end()) it->second.back() += r.t_end - r.t_start;
    if (auto it = out.find("comm"); it != out.end())
      for (const trace::CommRecord& r : pg.recorder().records())
        if (r.op != comm::OpKind::barrier) it->second.back() += r.t_end - r.t_issue;  // not timed()'s own
  }
  trace::install(nullptr);
  pg.recorder().clear();
  pg.recorder().set_enabled(false);
  for (auto& [n, v] : out) {
    if (n != "comm") {
      v = max_over_ranks(pg, v);
      continue;
    }
    // The rank that waited least: its time is the transfer itself, not waiting for a slower rank.
    for (double& x : v) x = -x;
    v = max_over_ranks(pg, v);
    for (double& x : v) x = -x;
  }
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void ResultLine::add(const std::string& key, const std::string& value) {
  fields.emplace_back(key, value);
}
void ResultLine::add(const std::string& key, double value) {
  add(key, fmt::format("{:.6g}", value));
}
void ResultLine::add(const std::string& key, int64_t value) {
  add(key, fmt::format("{}", value));
}

void ResultLine::print() const {
  std::string line = "RESULT " + bench;
  for (const auto& [k, v] : fields) line += " " + k + "=" + v;
  fmt::print("{}\n", line);
  std::fflush(stdout);
}

}  // namespace tpsp::bench
