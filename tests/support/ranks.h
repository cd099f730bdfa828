// The short form of tests/support/fork_ranks.h used by the model and case tests:
// run_ranks(world_size, fn, timeout_s) and failures(results).
#pragma once

#include <string>
#include <vector>

#include "tests/support/fork_ranks.h"

namespace tpsp::testing {

/// Forks `world_size` ranks running fn(rank) with a deadline of timeout_s seconds (see fork_ranks.h).
inline std::vector<RankResult> run_ranks(int world_size, const std::function<void(int rank)>& fn,
                                         double timeout_s) {
  LaunchOptions opts;
  opts.deadline_s = timeout_s;
  return run_ranks(world_size, fn, opts);
}

/// "" when every rank exited 0; otherwise one line per rank (summary()).
inline std::string failures(const std::vector<RankResult>& results) {
  return all_ok(results) ? std::string() : summary(results);
}

}  // namespace tpsp::testing
