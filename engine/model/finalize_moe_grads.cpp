#include "engine/model/finalize_moe_grads.h"

#include "engine/error.h"
#include "engine/lab_todo.h"
#include "engine/model/finalize_grads.h"
#include "engine/ops/ops.h"

namespace tpsp::model {

void finalize_moe_grads(moe::MoEGrads& g, moe::ExpertParallelState& eps, comm::ProcessGroup* sequence_group,
                        int dp_size) {
  TPSP_CHECK(dp_size >= 1, "finalize_moe_grads: dp_size=", dp_size, " must be at least 1");
  TPSP_CHECK(g.router.defined(), "finalize_moe_grads: no gradients (moe_backward has not run)");
  if (sequence_group != nullptr && sequence_group->size() > 1) {
    std::vector<Tensor*> router{&g.router};
    coalesced_all_reduce(router, *sequence_group, "grads.moe_router.sequence_parallel");
  }
  std::vector<Tensor*> experts;
  for (moe::ExpertShard& s : g.experts)
    for (Tensor* t : {&s.gate, &s.up, &s.fc2}) experts.push_back(t);
  if (experts.empty()) return;
  // TODO(lab06 finalize_expert_grads): each expert shard's gradient covers the tokens of this rank's tp_ep
  // group only; the ranks of the edp group (eps.edp()) hold the same shards for the other tokens. Sum
  // `experts` over the edp group (one coalesced_all_reduce labelled "grads.expert_data_parallel"; none
  // when edp_size() is 1), then scale by 1/dp_size (the batch mean of Megatron's DDP, which scales
  // expert gradients by 1/dp, not 1/edp).
  // BEGIN SOLUTION
  if (eps.edp_size() > 1) coalesced_all_reduce(experts, eps.edp(), "grads.expert_data_parallel");
  if (dp_size > 1)
    for (Tensor* t : experts) ops::scale_(*t, 1.f / static_cast<float>(dp_size));
  // END SOLUTION
}

}  // namespace tpsp::model
