// Proving overlap from the ranks' timelines (lab04): which GEMM a call was in flight across, and how
// much of the communication time a computation covered (the recorder's overlap_fraction). Grader
// side: reads only what the ranks dumped (checkers/scenario.h RankTimeline).
#pragma once

#include <string>
#include <vector>

#include "checkers/scenario.h"
#include "engine/comm/op.h"

namespace tpsp::checkers {

/// A call that must hide a GEMM: every call of `op` in `phase` whose label ends with `label_suffix`
/// is issued before some GEMM span labelled `gemm` ("forward", "dgrad", "wgrad"; "" = any GEMM)
/// starts and waited after it ends. `what` names the pair in reports.
struct HideRule {
  std::string phase;
  comm::OpKind op;
  std::string label_suffix, gemm, what;
};

/// One paragraph per rank and rule that fails (first offending call only), saying why: issued after
/// the GEMM, waited before it ended, or no such GEMM in between. Calls never waited are left to the
/// grader's own check.
std::vector<std::string> check_hidden(const std::vector<RankTimeline>& ranks,
                                      const std::vector<HideRule>& rules);

/// Communication time of `phase` covered by computation ÷ communication time (trace::overlap_fraction
/// over the phase's calls and compute spans of one rank); 0 without communication.
double phase_overlap(const RankTimeline& rank, const std::string& phase);

/// "" when the best phase_overlap over the ranks and `phases` (repeats of one step) is ≥ threshold.
/// The best, because on a loaded machine a rank whose peer runs late waits for it — imbalance, not
/// missing overlap — and any single repeat can stall; code that waits before it computes scores ≈ 0
/// everywhere. Else the figure with the exposed time and a reason: transfers that ran while nothing
/// computed, or, when the median transfer outlasts the median GEMM, chunks too small for the link.
std::string check_overlap(const std::vector<RankTimeline>& ranks, const std::vector<std::string>& phases,
                          double threshold, const std::string& link);

}  // namespace tpsp::checkers
