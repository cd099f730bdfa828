// ExpertParallelState's layout rules (expert_parallel_state.h) that the engine's other code uses without
// the groups: the sizes' check and which experts an EP rank holds. Not lab06's file (the group ranks and
// the constructor are, in expert_parallel_state.cpp).
#include "engine/error.h"
#include "engine/moe/expert_parallel_state.h"

namespace tpsp::moe {

void ExpertParallelState::check_layout(int world_size, int ep, int etp) {
  TPSP_CHECK(ep >= 1, "expert_model_parallel_size=", ep, " must be at least 1");
  TPSP_CHECK(etp >= 1, "expert_tensor_parallel_size=", etp, " must be at least 1");
  TPSP_CHECK(world_size % (ep * etp) == 0, "world_size=", world_size,
             " is not divisible by expert_model_parallel_size (", ep, ") × expert_tensor_parallel_size (",
             etp, ") = ", ep * etp);
}

std::pair<int64_t, int64_t> ExpertParallelState::local_experts(int64_t num_experts, int ep, int ep_rank) {
  TPSP_CHECK(ep >= 1 && num_experts % ep == 0, "num_moe_experts=", num_experts,
             " is not divisible by expert_model_parallel_size=", ep);
  TPSP_CHECK(ep_rank >= 0 && ep_rank < ep, "ep_rank=", ep_rank, " is not in [0, ", ep, ")");
  const int64_t n = num_experts / ep;
  return {ep_rank * n, n};
}

}  // namespace tpsp::moe
