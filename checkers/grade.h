// Grading one scenario run from the ranks' dumps, in a process that links no learner code:
// element-wise comparison with the expected whole tensors (shards mapped to their global index
// ranges), the communication pattern, and diagnoses of known wrong-answer signatures.
#pragma once

#include <string>
#include <vector>

#include "checkers/scenario.h"

namespace tpsp::checkers {

/// Tolerance of every comparison: |got − want| ≤ atol_rel·max|want| + rtol·|want| (float32 sums
/// in a different order; docs/grading.md justifies the values). Exact-input scenarios still pass
/// at 0 error.
struct Tolerance {
  double rtol = 1e-4;
  double atol_rel = 1e-5;
};

/// One graded run (scenario × tp × sp).
struct GradeResult {
  std::string id;  ///< "lab01/column_linear"
  int tp = 1;
  bool sp = false;
  bool passed = false;
  bool todo = false;                  ///< a TODO is not implemented yet
  std::vector<std::string> problems;  ///< one paragraph each: what differs, where, and a hint
  double seconds = 0;
};

/// Grades the dumps under `dir` (rank0/ … rank<tp−1>/) of `sc` at (tp, sp, seed). `launcher_log`
/// (the launcher's combined output) and `launcher_code` explain a crash, hang or desync.
GradeResult grade(const Scenario& sc, int tp, bool sp, uint64_t seed, const std::string& dir,
                  int launcher_code, const std::string& launcher_log, const Tolerance& tol = {});

/// Compares one rank's tensor with its expected slice; returns "" or a description with the count
/// of differing elements, the worst element's global index, got/want and a signature hint.
/// `whole` is the expected whole tensor; `all_got` every rank's local tensor (for signatures that
/// need the other ranks: partial sums, shard order).
std::string compare_output(const std::string& name, const Output& spec_and_unused, const Tensor& whole,
                           const std::vector<Tensor>& all_got, int rank, const Tolerance& tol);

}  // namespace tpsp::checkers
