// Starting a check's runs: the ranks of one scenario run (or of a batch of runs that share a layout)
// as processes, through tpsp-run's launcher compiled into the grader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkers/grader/grade.h"
#include "checkers/scenario.h"
#include "launch/launcher.h"

namespace tpsp::checkers {

/// Confined runs (./grade; tpsp-check --confine-uid): every later launch runs each of its ranks as a
/// uid of its own (`limits.uid` + 16 · the launch counter + the rank, so that no two ranks share one:
/// they cannot signal, trace or inspect each other), under `limits`' rlimits, in fresh mount, network
/// and IPC namespaces of the launcher (a private /tmp and /dev/shm, no network interface up); each rank
/// writes only its own DIR/rank<w>/ (0700; DIR stays root's), and the ranks are connected only through
/// a witness relay whose log judges their records (launch/relay_server.h, witness_judge.h). The grader must run
/// as root. Without a call nothing is confined.
void confine_launches(const run::Confinement& limits);

/// Whether later unconfined launches connect their ranks through a relay in the checker (launch/relay_server.h,
/// with fingerprints on; no log is judged) instead of Gloo over loopback TCP. A relay's rendezvous is one
/// message per rank where Gloo's is a file store and a full mesh of TCP connections per run, which is most
/// of a small run's cost. Confined launches always use the relay, as the witness.
void use_relay(bool on);

/// Where the next launches' ranks compute and how they talk when not through the relay: --device
/// (cpu, cuda, cuda-emulated) and --backend gloo or nccl, passed to the ranks as TPSP_DEVICE and
/// TPSP_BACKEND (engine/runtime/device_runtime.h). Defaults: cpu, gloo.
void set_device(const std::string& device, const std::string& backend);

/// One run of a check: scenario `sc` in `layout` with SP on or off; its ranks dump under `dir`
/// (rank<w>/ each, see checkers/rank/ranks_main.cpp).
struct PlannedRun {
  const Scenario* sc = nullptr;
  Layout layout;
  bool sp = false;
  std::string dir;
};

/// Runs the `world` ranks of `argv` as processes and returns the launcher's exit code (0, a failed
/// rank's code or 128+signal, 124 past `budget` seconds, 1 when a rank could not be started, 128+signal
/// when the launcher was interrupted): what `tpsp-run -n <world> --timeout <budget> --tail 12 -- argv`
/// does, with tpsp-run's own code (launch/: run_job, the environment, the summary) in a forked
/// child instead of an executed one, which saves an exec and a dynamic link per run and keeps
/// everything else: the launcher is its own process, forwards a Ctrl-C to the ranks and ends with the
/// job, while ./check sees the Ctrl-C itself (a rank that exits 130 is just a failed run). Each rank
/// gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, TPSP_STORE_DIR=`store` (a fresh directory,
/// removed after the run), OPENBLAS_NUM_THREADS (unless set) and `env` ("NAME=value" each); reads
/// /dev/null; runs in its own process group; past the budget it gets SIGTERM (it prints where it
/// was), then SIGKILL. Its output lines and the launcher's summary go to `log_path`.
/// With `confine` (a confined launch), the ranks run under it, `store` is given to its uid and the
/// launcher first enters its own namespaces (confine_launches).
/// With a `relay_log`, the ranks' only transport is a relay (launch/relay_server.h) writing that file; each
/// rank gets its socket as fd 3 (TPSP_RELAY_FD=3). A confined launch also turns fingerprints off (its log
/// must hold only the code's own calls; the relay compares the ranks' calls itself) and leaves the
/// network down. Each rank of a confined launch also gets namespaces of its own (launcher.h
/// RankSpec::isolate): a private /tmp and /dev/shm, no network, and of `run_dirs` only its rank<r>/.
int run_ranks(const std::vector<std::string>& argv, int world, double budget,
              const std::vector<std::string>& env, const std::string& store, const std::string& log_path,
              const run::Confinement* confine = nullptr, const std::string& relay_log = "",
              const std::vector<std::string>& run_dirs = {});

/// Runs `runs` (one or more, all in the same layout; each with its own SP setting) in ONE launch of the
/// rank program `bin`: each rank runs the scenarios in turn, each in a child forked before any learner
/// code ran (a fresh process's state), each dumping under its run's dir (`--scenario ID --out DIR` repeated),
/// and stops at the first one that is not ok. The launcher's budget is `budget` seconds; the rendezvous
/// directory and the launcher's log (launcher.log) go under `scratch`. Ranks run with the checks' settings:
/// collective timeout budget + 10 s (a stuck run is stopped by the launcher first, whose SIGTERM makes every
/// rank print where it was), send buffers checked, Tensor::empty poisoned with NaN. Returns run_ranks' code.
int launch_runs(const std::string& bin, const std::vector<const PlannedRun*>& runs, uint64_t seed,
                double budget, const std::string& scratch);

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
