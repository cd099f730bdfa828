// parallel_state: the world split into data-parallel (DP) x tensor-parallel (TP) groups, Megatron-LM
// style (megatron/core/parallel_state.py). TP ranks are contiguous (innermost):
//   world ranks 0..W-1, W = DP * TP
//   tp group of rank r = [r/TP*TP, r/TP*TP + 1, ..., r/TP*TP + TP - 1]   (tp_rank = r % TP)
//   dp group of rank r = [r%TP, r%TP + TP, r%TP + 2*TP, ...]              (dp_rank = r / TP)
// e.g. W=4, TP=2: tp groups {0,1} {2,3}, dp groups {0,2} {1,3}. With SP the sequence is split over
// the tp group too; there is no separate SP group.
#pragma once

#include <memory>
#include <vector>

#include "engine/comm/process_group.h"

namespace tpsp {

/// The groups of one DP x TP layout. Construction is collective over `world` (it calls new_group
/// for every tp group and every dp group, in the same order on every rank).
class ParallelState {
 public:
  /// Splits `world` into DP x TP. Throws ShapeError "world_size=6 is not divisible by tp=4" (or tp < 1).
  ParallelState(std::shared_ptr<comm::ProcessGroup> world, int tp);

  comm::ProcessGroup& world() { return *world_; }
  /// This rank's tensor-parallel group (name "tp").
  comm::ProcessGroup& tp() { return *tp_; }
  /// This rank's data-parallel group (name "dp").
  comm::ProcessGroup& dp() { return *dp_; }
  std::shared_ptr<comm::ProcessGroup> world_ptr() const { return world_; }
  std::shared_ptr<comm::ProcessGroup> tp_ptr() const { return tp_; }
  std::shared_ptr<comm::ProcessGroup> dp_ptr() const { return dp_; }

  int world_size() const { return world_size_; }
  int world_rank() const { return world_rank_; }
  int tp_size() const { return tp_size_; }
  int tp_rank() const { return world_rank_ % tp_size_; }
  int dp_size() const { return world_size_ / tp_size_; }
  int dp_rank() const { return world_rank_ / tp_size_; }

  /// World ranks of the tp group holding `rank` (layout above). ShapeError on bad arguments.
  static std::vector<int> tp_group_ranks(int rank, int world_size, int tp);
  /// World ranks of the dp group holding `rank` (layout above). ShapeError on bad arguments.
  static std::vector<int> dp_group_ranks(int rank, int world_size, int tp);
  /// Throws ShapeError unless tp >= 1 and world_size % tp == 0.
  static void check_layout(int world_size, int tp);

 private:
  std::shared_ptr<comm::ProcessGroup> world_;
  std::shared_ptr<comm::ProcessGroup> tp_;
  std::shared_ptr<comm::ProcessGroup> dp_;
  int world_size_;
  int world_rank_;
  int tp_size_;
};

}  // namespace tpsp
