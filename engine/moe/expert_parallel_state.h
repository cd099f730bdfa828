// The expert layers' own split of the world (Megatron-LM's "MoE parallel folding": Liu et al. 2025,
// megatron/core/parallel_state.py's expert RankGenerator): the same ranks that run attention as DP x TP
// run the experts as EDP x EP x ETP, expert tensor parallelism innermost, then expert parallelism,
// then expert data parallelism:
//   W = EDP * EP * ETP
//   etp group of rank r = the ETP consecutive ranks holding r            (etp_rank = r % ETP)
//   ep group of rank r  = ranks with r's etp_rank in r's block of EP*ETP (ep_rank = r / ETP % EP)
//   edp group of rank r = ranks with r's position in every block          (edp_rank = r / (EP*ETP))
//   tp_ep group         = the EP*ETP consecutive ranks holding r: where a token's k experts live
// e.g. W = 4, EP = 2, ETP = 1: ep groups {0,1} {2,3}, edp {0,2} {1,3}; W = 4, EP = 2, ETP = 2: etp {0,1}
// {2,3}, ep {0,2} {1,3}, one tp_ep group {0,1,2,3}, edp groups of one rank. Expert e lives on EP rank
// e / (E/EP), split over its ETP group (gate and up by rows, fc2 by columns). Expert gradients are summed
// over the edp group: ranks of one edp group hold the same experts.
#pragma once

#include <memory>
#include <vector>

#include "engine/comm/process_group.h"

namespace tpsp::moe {

/// The expert groups of one EDP x EP x ETP layout. Construction is collective over `world` (new_group
/// for every etp, ep, tp_ep and edp group, in that order, on every rank).
class ExpertParallelState {
 public:
  /// Throws ShapeError naming the rule: ep or etp below 1, "world_size=6 is not divisible by
  /// expert_model_parallel_size (2) × expert_tensor_parallel_size (2) = 4".
  ExpertParallelState(std::shared_ptr<comm::ProcessGroup> world, int ep, int etp);

  /// Groups named "etp", "ep", "tp_ep", "edp".
  comm::ProcessGroup& etp() { return *etp_; }
  comm::ProcessGroup& ep() { return *ep_; }
  comm::ProcessGroup& tp_ep() { return *tp_ep_; }
  comm::ProcessGroup& edp() { return *edp_; }
  int ep_size() const { return ep_size_; }
  int etp_size() const { return etp_size_; }
  int ep_rank() const { return world_rank_ / etp_size_ % ep_size_; }
  int etp_rank() const { return world_rank_ % etp_size_; }
  int edp_size() const { return world_size_ / (ep_size_ * etp_size_); }
  /// The world these groups fold over.
  int world_size() const { return world_size_; }

  /// The experts EP rank `ep_rank` holds of `num_experts`: [first, first + count). ShapeError
  /// "num_moe_experts=6 is not divisible by expert_model_parallel_size=4".
  static std::pair<int64_t, int64_t> local_experts(int64_t num_experts, int ep, int ep_rank);
  /// World ranks of each group holding `rank` (layout above). ShapeError on bad arguments.
  static std::vector<int> etp_group_ranks(int rank, int world_size, int ep, int etp);
  static std::vector<int> ep_group_ranks(int rank, int world_size, int ep, int etp);
  static std::vector<int> tp_ep_group_ranks(int rank, int world_size, int ep, int etp);
  static std::vector<int> edp_group_ranks(int rank, int world_size, int ep, int etp);
  /// Throws ShapeError unless ep >= 1, etp >= 1 and world_size % (ep·etp) == 0.
  static void check_layout(int world_size, int ep, int etp);

 private:
  std::shared_ptr<comm::ProcessGroup> etp_, ep_, tp_ep_, edp_;
  int world_size_, world_rank_, ep_size_, etp_size_;
};

}  // namespace tpsp::moe
