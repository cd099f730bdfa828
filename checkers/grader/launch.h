// Starting a check's runs: the ranks of one scenario run (or of a batch of runs that share a layout)
// as processes, through the launch library (launch/: tpsp-run's launcher and the relay), confined under
// ./grade (checkers/sandbox/confine.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkers/grader/grade.h"
#include "checkers/scenario.h"
#include "launch/launcher.h"

namespace tpsp::checkers {

/// How a check's launches run, built once from the command line (check_main.cpp).
struct LaunchSettings {
  std::string device = "cpu";  ///< the ranks' TPSP_DEVICE: cpu, cuda, cuda-emulated
  std::string backend =
      "gloo";  ///< the ranks' TPSP_BACKEND without a relay: gloo or nccl (through a relay: relay)
  /// Unconfined launches connect their ranks through a relay in the checker (launch/relay_server.h, with
  /// fingerprints on; no log is judged) instead of Gloo over loopback TCP: a relay's rendezvous is one
  /// message per rank where Gloo's is a file store and a full mesh of TCP connections per run, most of a
  /// small run's cost. Confined launches always use the relay, as the witness.
  bool relay = true;
  /// Confined runs (./grade; tpsp-check --confine-uid; root only): each launch runs each of its ranks as
  /// a uid of its own (confine->uid + 16 · the launch counter + the rank, sandbox/confine.h: they cannot
  /// signal, trace or inspect each other), under its rlimits, in fresh mount, network and IPC namespaces
  /// of the launcher (a private /tmp and /dev/shm, no network); each rank writes only its own
  /// DIR/rank<w>/ (0700; DIR stays root's), and the ranks are connected only through a witness relay
  /// whose log judges their records (checkers/sandbox/witness_judge.h). nullopt: nothing is confined.
  std::optional<run::Confinement> confine;
};

/// What one launch left: the launcher's exit code (run_ranks'), and for a confined launch the witness's
/// verdict on each of its runs (in the order given; empty for an unconfined launch).
struct LaunchOutcome {
  int code = 1;
  std::vector<std::vector<std::string>> witness;
};

/// Starts a check's launches under one LaunchSettings; confined launches count themselves (each gets
/// its own block of uids).
class RunLauncher {
 public:
  explicit RunLauncher(LaunchSettings settings) : s_(std::move(settings)) {}
  const LaunchSettings& settings() const { return s_; }

  /// Runs `runs` (one or more, all in the same layout; each with its own SP setting) in ONE launch of
  /// the rank program `bin`: each rank runs the scenarios in turn, each in a child forked before any
  /// learner code ran (a fresh process's state), each dumping under its run's dir (`--scenario ID --out
  /// DIR` repeated), and stops at the first one that is not ok. The launcher's budget is `budget`
  /// seconds; the rendezvous directory and the launcher's log (launcher.log) go under `scratch`. Ranks
  /// run with the checks' settings: collective timeout budget + 10 s (a stuck run is stopped by the
  /// launcher first, whose SIGTERM makes every rank print where it was), send buffers checked,
  /// Tensor::empty poisoned with NaN. The launch itself is what `tpsp-run -n <world> --timeout <budget>
  /// --tail 12 -- argv` does, with the launch library's code in a forked child instead of an executed
  /// one (an exec and a dynamic link saved per run): the launcher is its own process, forwards a Ctrl-C
  /// to the ranks and ends with the job, while ./check sees the Ctrl-C itself. Each rank gets RANK,
  /// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, TPSP_STORE_DIR (a fresh directory, removed after the
  /// run), OPENBLAS_NUM_THREADS (unless set), TPSP_DEVICE and TPSP_BACKEND; reads /dev/null; runs in its
  /// own process group; past the budget it gets SIGTERM (it prints where it was), then SIGKILL. Through
  /// a relay each rank gets its socket as fd 3 (TPSP_RELAY_FD=3); a confined launch also turns
  /// fingerprints off (its log must hold only the code's own calls; the relay compares the ranks' calls
  /// itself) and leaves the network down, then kills what its uids left running, takes the folders back
  /// and judges the witness. Returns the launcher's exit code (0, a failed rank's code or 128+signal, 124
  /// past the budget, 1 when a rank could not be started) and the witness's verdicts.
  LaunchOutcome launch_runs(const std::string& bin, const std::vector<const PlannedRun*>& runs, uint64_t seed,
                            double budget, const std::string& scratch);

 private:
  LaunchSettings s_;
  long confined_launches_ = 0;
};

/// The budget of a batch of `runs` (seconds): the largest scenario budget, plus 2 s per run (the
/// engine's solution needs about 0.1 s per run). A batch past it is not a verdict: its runs are run
/// again one by one, each with its own budget.
double batch_budget(const std::vector<const PlannedRun*>& runs);

/// Runs the program argv[0] (a path) with `argv`, its output and errors to `log_path`, stdin from
/// /dev/null, and waits for it; returns its exit code (128+signal when killed, 127 when it could not be
/// started). For helpers such as tools/plot_timeline.py, never for learner code.
int run_logged(const std::vector<std::string>& argv, const std::string& log_path);

/// The whole text of `path` ("" when it cannot be read).
std::string read_file(const std::string& path);

/// The seconds rank 0 spent in the scenario of a batched run (its result.json's "seconds"), or -1.
double run_seconds(const std::string& dir);

}  // namespace tpsp::checkers
