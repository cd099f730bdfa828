// Grading one scenario run from the ranks' dumps, in a process that links no learner code and no
// lab-owned engine code: every output element by element against its slice of the expected whole
// tensor (placements from the scenario, never from a rank), the communication pattern per phase,
// and diagnoses of known wrong-answer signatures.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checkers/scenario.h"

namespace tpsp::checkers {

/// Tolerance of every comparison: |got − want| ≤ atol_rel·max|want| + rtol·|want| (float32 sums
/// in a different order; docs/tolerances.md justifies the values). Exact-input scenarios still pass
/// at 0 error.
struct Tolerance {
  double rtol = 1e-4;
  double atol_rel = 1e-5;
};

/// Where one run executes: dp replicas of a TP group of size tp (world = dp·tp; TP ranks contiguous:
/// world rank w is TP rank w % tp of replica w / tp).
struct Layout {
  int tp = 1;
  int dp = 1;
  int world() const { return tp * dp; }
  /// "tp=2" or "dp=2×tp=2".
  std::string str() const;
};

/// One run of a check: scenario `sc` in `layout` with SP on or off; its ranks dump under `dir`
/// (rank<w>/ each, see checkers/rank/ranks_main.cpp).
struct PlannedRun {
  const Scenario* sc = nullptr;
  Layout layout;
  bool sp = false;
  std::string dir;
};

/// What became of a run.
enum class Verdict {
  passed,
  failed,
  todo,        ///< a TODO of the checked lab is not implemented yet
  needs_other  ///< the run reached a TODO of ANOTHER lab (a learner copy where that lab is not done)
};

/// One graded run (scenario × layout × sp).
struct GradeResult {
  std::string id;  ///< "lab01/column_linear"
  Layout layout;
  bool sp = false;
  Verdict verdict = Verdict::failed;
  std::vector<std::string> problems;  ///< one paragraph each: what differs, where, and a hint
  double seconds = 0;
  bool host_code = false;  ///< the ranks ran the learner's code on the host (Scenario::host_code)
};

/// What the launcher left of a run: the dump directory (rank<w>/ for each world rank), the
/// launcher's exit code and its combined output (to explain a crash, hang or desync).
struct RunRecord {
  std::string dir;
  int launcher_code = 0;
  std::string launcher_log;
  /// Under ./grade's confinement, the witness's verdict on the run's record of its calls (witness_judge.h:
  /// one line per difference, empty when it matched); nullopt for an unconfined run.
  std::optional<std::vector<std::string>> witness = std::nullopt;
  /// The check's seed (Scenario::seeded_pattern's sizes follow it).
  uint64_t seed = 0;
};

/// Grades the run of `sc` at (layout, sp) against `want` (sc.expected at the run's tp and sp).
GradeResult grade(const Scenario& sc, const Layout& layout, bool sp, const ExpectedOutputs& want,
                  const RunRecord& run, const Tolerance& tol = {});

/// Compares one rank's tensor with its expected slice; returns "" or a description with the count
/// of differing elements, the worst element's global index, got/want and a signature hint.
/// `all_got` holds every rank's local tensor of one TP group (for signatures that need the other
/// ranks: partial sums, shard order).
std::string compare_output(const std::string& name, const Expected& spec, const std::vector<Tensor>& all_got,
                           int rank, const Tolerance& tol);

}  // namespace tpsp::checkers
