// What the step benchmarks (bench_mlp_step, bench_gpt_step) share: one BLAS thread per rank, ranks
// forked from one executable with a Gloo world between them, per-step timings reduced over ranks, and
// the one result line that bench/run_bench.py parses (the PyTorch peers in bench/peers/ print the same).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/process_group.h"

namespace tpsp::bench {

/// Pins this process to one BLAS thread and one OpenMP thread: sets OPENBLAS_NUM_THREADS=1 and
/// OMP_NUM_THREADS=1 (for anything started later) and calls openblas_set_num_threads(1) (OpenBLAS
/// reads the variable when it is loaded, before main, so the call is what counts here). Call it first
/// in main and again in each forked rank. Returns openblas_get_num_threads() afterwards (1 expected).
int single_thread_blas();

/// Forks `ranks` processes; each gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and a fresh
/// TPSP_STORE_DIR (the variables of tpsp-run), calls single_thread_blas() and then `rank_main`, whose
/// return value is its exit status (an exception is printed and exits 1). Waits for all of them and
/// returns 0 when every rank exited 0, else 1. When RANK is already set (a launcher made the world),
/// runs `rank_main` in this process instead.
int run_ranks(int ranks, const std::function<int()>& rank_main);

/// The world group from the environment with fingerprints off and the recorder disabled, as in a
/// training run's timed steps (the recorder is switched on again only to read compute spans).
std::shared_ptr<comm::ProcessGroup> make_world();

/// Per step, the slowest rank's seconds: element-wise max over the group of `seconds` (one value
/// per step, the same count on every rank), in one all-reduce.
std::vector<double> max_over_ranks(comm::ProcessGroup& pg, const std::vector<double>& seconds);

/// Seconds of `fn` on this rank, started right after a barrier so that the ranks start together.
double timed(comm::ProcessGroup& pg, const std::function<void()>& fn);

/// Per-step seconds of the step and of the GEMMs-alone pass, each the slowest rank's (max over ranks).
struct Timings {
  std::vector<double> step;
  std::vector<double> gemm;  ///< empty when there was no GEMM pass
};

/// `warmup` untimed rounds, then `steps` timed rounds; a round is `step` then, unless `gemm` is empty,
/// `gemm` (alternating, so that load on the machine hits both alike), each timed by timed().
Timings time_alternating(comm::ProcessGroup& pg, int warmup, int steps, const std::function<void()>& step,
                         const std::function<void()>& gemm);

/// Runs `step` `steps` times with compute spans on (engine/trace/span.h: the group's recorder enabled and
/// installed, then off again) and returns, per span name in `names` ("gemm", "attention"), the seconds
/// of that name's spans summed within each step, max over ranks. The name "comm" sums the collectives'
/// recorded time from issue to completion (t_end − t_issue: for the blocking calls of a step, the time
/// the caller waited for communication; barriers excluded), MIN over ranks: the rank that waited least,
/// so that waiting for a slower rank's compute is left out as far as possible. "step" is added: each
/// span step's seconds (max over ranks).
std::map<std::string, std::vector<double>> span_seconds(comm::ProcessGroup& pg, int steps,
                                                        const std::function<void()>& step,
                                                        const std::vector<std::string>& names);

/// Runs `fn` once with communication records and compute spans on (after a barrier, so the ranks start
/// together) and writes them as a Chrome trace (Recorder::write_chrome_trace; Perfetto, and
/// tools/plot_timeline.py) to DIR/<mode>/rank<r>.json; recording is off again after. Throws
/// std::runtime_error naming the path if it cannot be written.
void write_trace(comm::ProcessGroup& pg, const std::string& dir, const std::string& mode,
                 const std::function<void()>& fn);

/// Median of `v` (the mean of the two middle values for an even count); 0 for an empty vector.
double median(std::vector<double> v);

/// Seconds on the steady clock since an arbitrary origin (for step timing).
double now_seconds();

/// One machine-readable result line: `RESULT <bench> key=value key=value ...` (values printed with
/// 6 significant digits for doubles), printed by rank 0 only and flushed. Keys keep their order.
struct ResultLine {
  std::string bench;  ///< "mlp" or "gpt"
  std::vector<std::pair<std::string, std::string>> fields;
  void add(const std::string& key, const std::string& value);
  void add(const std::string& key, double value);
  void add(const std::string& key, int64_t value);
  void add(const std::string& key, int value) { add(key, static_cast<int64_t>(value)); }
  void add(const std::string& key, const char* value) { add(key, std::string(value)); }
  /// Prints the line on stdout.
  void print() const;
};

}  // namespace tpsp::bench
