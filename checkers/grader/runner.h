// Running and grading a lab's planned runs (check_main.cpp plans them): the runs that share a layout in
// one launch each (a batch), then every run that did not pass that way once more on its own, so that a
// verdict against a learner's code, and what it prints, always come from a run of that scenario alone.
#pragma once

#include <csignal>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "checkers/grader/grade.h"
#include "checkers/grader/launch.h"
#include "checkers/grader/report.h"
#include "checkers/scenario.h"

namespace tpsp::checkers {

/// Expected whole tensors, computed once per (scenario, tp, sp) and reused by every run and dump.
class ExpectedCache {
 public:
  explicit ExpectedCache(uint64_t seed) : seed_(seed) {}
  const ExpectedOutputs& get(const Scenario& sc, int tp, bool sp);
  uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
  std::map<std::tuple<std::string, int, bool>, ExpectedOutputs> cache_;
};

/// What the runner takes from the command line.
struct RunnerOptions {
  uint64_t seed = 0;
  double timeout = 0;     ///< > 0: every run alone with this budget (seconds), no batches
  bool verbose = false;   ///< write each run's expected tensors beside its dumps, print its trace paths
  bool drawable = false;  ///< --verbose can draw timelines (matplotlib found)
};

/// Runs labs' plans through one RunLauncher and files every verdict in one Report.
class LabRunner {
 public:
  /// `interrupted` is set by ./check's SIGINT / SIGTERM handler; the runner stops at the next run.
  LabRunner(RunLauncher& launcher, Report& report, const RunnerOptions& o,
            const volatile std::sig_atomic_t& interrupted)
      : launcher_(launcher), report_(report), o_(o), expected_(o.seed), interrupted_(interrupted) {}

  /// Runs and grades `plan` (one lab's runs; rank program `bin`; scratch under `work`): first the
  /// batches (unless o.timeout), then alone every run whose batch failed or that did not pass, each
  /// with its scenario's budget (or o.timeout); a run stopped by its budget says so. False when
  /// interrupted (the report is then incomplete).
  bool run_lab(const std::string& lab, const std::string& bin, const std::vector<PlannedRun>& plan,
               const std::string& work);

  /// --verbose: the runs whose ranks wrote traces (their timelines to draw at the end).
  const std::vector<std::string>& traced() const { return traced_; }

 private:
  /// Runs `plan` in batches of the runs that share a layout (RunLauncher::launch_runs, under
  /// WORK/batch-<lab>-dp<d>-tp<t>[-sp<s>]/) and returns, per run whose batch ended ok on every rank (its
  /// dumps are then there to grade), its record (with the witness's verdict when confined); nullopt else.
  /// A batch of one is left to be run on its own. SP on and off share a launch, except when launches are
  /// confined (./grade): the ranks of one launch share their uids, so a scenario's SP run could read the
  /// same scenario's non-SP dumps, whose shards are its answer (tests/grade/class/ATTACKS.md (e)).
  std::vector<std::optional<RunRecord>> run_batches(const std::string& lab, const std::string& bin,
                                                    const std::vector<PlannedRun>& plan,
                                                    const std::string& work);
  /// Launches run `r` alone and grades it; nullopt when ./check was interrupted meanwhile.
  std::optional<GradeResult> run_alone(const PlannedRun& r, const std::string& bin,
                                       const ExpectedOutputs& want);
  /// Files a verdict: --verbose extras, then the report's line.
  void file(GradeResult g, const PlannedRun& r, const ExpectedOutputs& want, double seconds);

  RunLauncher& launcher_;
  Report& report_;
  RunnerOptions o_;
  ExpectedCache expected_;
  const volatile std::sig_atomic_t& interrupted_;
  std::vector<std::string> traced_;
};

}  // namespace tpsp::checkers
