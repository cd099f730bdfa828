#include "checkers/grader/runner.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "engine/io/npy.h"

namespace fs = std::filesystem;

namespace tpsp::checkers {

namespace {

/// Writes the expected whole tensors of a run as .npy beside the ranks' dumps (--verbose).
void write_expected(const ExpectedOutputs& want, const std::string& dir) {
  fs::create_directories(dir);
  for (const auto& [name, e] : want) io::save_npy(dir + "/" + name + ".npy", e.whole);
}

/// --verbose: where a run's Chrome traces (one per rank) and its timeline picture are; false when the
/// ranks wrote no trace (a run that stopped before its scenario ended).
bool print_trace_paths(const std::string& dir, bool drawable) {
  if (!fs::exists(dir + "/rank0/trace.json")) return false;
  std::printf("    traces: %s/rank<r>/trace.json (ui.perfetto.dev or chrome://tracing)\n", dir.c_str());
  if (drawable) std::printf("    timeline: %s/timeline.png\n", dir.c_str());
  std::fflush(stdout);
  return true;
}

}  // namespace

const ExpectedOutputs& ExpectedCache::get(const Scenario& sc, int tp, bool sp) {
  const auto key = std::tuple{sc.id(), tp, sp};
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, sc.expected(seed_, tp, sp)).first;
  return it->second;
}

bool LabRunner::run_lab(const std::string& lab, const std::string& bin, const std::vector<PlannedRun>& plan,
                        const std::string& work) {
  for (const PlannedRun& r : plan) fs::create_directories(r.dir);
  // First the runs that share a layout (SP on or off; confined: each SP setting apart), in one launch each
  // (an exec and the libraries' start per run saved; each scenario runs in a fresh forked child). Only a
  // batch whose every rank ended ok counts, and only for its runs that then pass: every other run is run
  // again on its own below. --timeout sets one run's budget, so with it every run is on its own.
  const std::vector<std::optional<RunRecord>> batched =
      o_.timeout > 0 ? std::vector<std::optional<RunRecord>>(plan.size()) : run_batches(lab, bin, plan, work);
  for (std::size_t i = 0; i < plan.size(); ++i) {
    if (interrupted_) return false;  // Ctrl-C while the previous run was launched or graded
    const PlannedRun& r = plan[i];
    const ExpectedOutputs& want = expected_.get(*r.sc, r.layout.tp, r.sp);
    if (batched[i]) {
      RunRecord record = *batched[i];
      record.seed = expected_.seed();
      GradeResult g = grade(*r.sc, r.layout, r.sp, want, record);
      if (g.verdict == Verdict::passed) {
        file(std::move(g), r, want, run_seconds(r.dir));
        continue;
      }
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::optional<GradeResult> g = run_alone(r, bin, want);
    if (!g) return false;  // Ctrl-C: stop checking, do not grade a stopped run
    file(std::move(*g), r, want,
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return !interrupted_;
}

std::vector<std::optional<RunRecord>> LabRunner::run_batches(const std::string& lab, const std::string& bin,
                                                             const std::vector<PlannedRun>& plan,
                                                             const std::string& work) {
  const bool confined = launcher_.settings().confine.has_value();
  std::map<std::tuple<int, int, int>, std::vector<std::size_t>> batches;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const int sp_key = confined ? (plan[i].sp ? 1 : 0) : -1;  // -1: one batch for both
    batches[{plan[i].layout.dp, plan[i].layout.tp, sp_key}].push_back(i);
  }
  std::vector<std::optional<RunRecord>> ok(plan.size());
  for (const auto& [key, members] : batches) {
    if (members.size() < 2 || interrupted_) continue;
    std::vector<const PlannedRun*> runs;
    for (std::size_t i : members) runs.push_back(&plan[i]);
    const auto& [dp, tp, sp_key] = key;
    const std::string scratch = fmt::format("{}/batch-{}-dp{}-tp{}{}", work, lab, dp, tp,
                                            sp_key < 0 ? "" : fmt::format("-sp{}", sp_key));
    fs::create_directories(scratch);
    const LaunchOutcome out = launcher_.launch_runs(bin, runs, o_.seed, batch_budget(runs), scratch);
    if (out.code != 0) continue;
    for (std::size_t k = 0; k < members.size(); ++k) {
      ok[members[k]] = RunRecord{plan[members[k]].dir, 0, ""};
      if (confined) ok[members[k]]->witness = out.witness.at(k);
    }
  }
  return ok;
}

std::optional<GradeResult> LabRunner::run_alone(const PlannedRun& r, const std::string& bin,
                                                const ExpectedOutputs& want) {
  fs::remove_all(r.dir);
  fs::create_directories(r.dir);
  const double budget = o_.timeout > 0 ? o_.timeout : r.sc->budget_s;
  const LaunchOutcome out = launcher_.launch_runs(bin, {&r}, o_.seed, budget, r.dir);
  if (interrupted_) return std::nullopt;
  RunRecord record{r.dir, out.code, read_file(r.dir + "/launcher.log")};
  if (launcher_.settings().confine)  // a launch refused before it ran has no verdict: say so
    record.witness = out.witness.empty() ? std::vector<std::string>{"the grader has no witness record of this "
                                                                    "run's communication (the launch did not run)"}
                                         : out.witness.front();
  record.seed = expected_.seed();
  GradeResult g = grade(*r.sc, r.layout, r.sp, want, record);
  if (out.code == 124)
    g.problems.push_back(
        fmt::format("the run was stopped after its budget of {} s (the engine's solution needs about 0.1 s): "
                    "an endless loop, "
                    "or ranks waiting for a call their peers never make; the launcher's lines above show "
                    "where each rank was",
                    budget));
  return g;
}

void LabRunner::file(GradeResult g, const PlannedRun& r, const ExpectedOutputs& want, double seconds) {
  if (o_.verbose) write_expected(want, r.dir + "/expected");
  g.seconds = seconds;
  report_.add(g, r.dir);
  if (o_.verbose && print_trace_paths(r.dir, o_.drawable)) traced_.push_back(r.dir);
}

}  // namespace tpsp::checkers
