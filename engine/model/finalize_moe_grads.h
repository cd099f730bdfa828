// The MoE layer's gradient reductions after backward (Megatron-LM megatron/core/distributed/
// distributed_data_parallel.py: expert parameters live in buffers of their own, reduced over the expert
// data-parallel group and scaled by 1/dp like the dense ones; finalize_model_grads.py: the router's
// weight, replicated over TP and fed only this rank's sequence shard under SP, is summed over TP).
#pragma once

#include "engine/comm/process_group.h"
#include "engine/moe/moe_layer.h"

namespace tpsp::model {

/// In place, on every rank:
///  - the router's gradient [E, h]: under sequence parallelism each TP rank's is the share of its own
///    tokens, so it is summed over `sequence_group` (null or size 1: nothing), labelled
///    "grads.moe_router.sequence_parallel"; its data-parallel average is the dense gradients' (the
///    caller's allreduce_data_parallel_grads);
///  - every expert shard's gradients: summed over the edp group (the ranks that hold the same experts and
///    saw other tokens) in one coalesced all-reduce labelled "grads.expert_data_parallel", then scaled by
///    1/dp_size, the DENSE data-parallel size: the experts' tokens of one tp_ep block may already come
///    from several DP replicas (EP spanning replicas), so averaging over edp, or reducing over the dense
///    dp group, would weigh the global batch wrongly.
/// ShapeError unless dp_size >= 1 and the gradients were allocated (moe_backward ran).
void finalize_moe_grads(moe::MoEGrads& grads, moe::ExpertParallelState& eps,
                        comm::ProcessGroup* sequence_group, int dp_size);

}  // namespace tpsp::model
