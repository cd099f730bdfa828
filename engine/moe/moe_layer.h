// The expert-parallel MoE layer (Megatron-LM megatron/core/transformer/moe/moe_layer.py MoELayer with
// the TopKRouter, the all-to-all token dispatcher and SequentialMLP experts): this rank's tokens are
// routed by the replicated router, dispatched to the EP ranks that hold their experts, run through
// SwiGLU experts split over ETP (gate and up by rows: column-parallel; fc2 by columns: row-parallel,
// whose partial sums the combine reduce-scatters), combined back and weighted by the router's probs.
// It must equal reference/moe_layer.h token for token. Host tensors (float32).
#pragma once

#include <string>
#include <vector>

#include "engine/moe/token_dispatcher.h"

namespace tpsp::moe {

/// One local expert's ETP shard: gate and up [f/ETP, h] (rows etp_rank·f/ETP …), fc2 [h, f/ETP].
struct ExpertShard {
  Tensor gate, up, fc2;
};

/// This rank's parameters: the whole router [E, h] and its local experts' shards, in expert order,
/// starting at global expert `first_expert` (ExpertParallelState::local_experts of this EP rank).
struct MoEWeights {
  Tensor router;
  std::vector<ExpertShard> experts;
  int64_t first_expert = 0;
};

/// num_moe_experts, moe_router_topk, moe_aux_loss_coeff, and the group over which this rank's tokens
/// are a sequence shard (the attention TP group under sequence parallelism; null: the tokens are whole,
/// tp = 1): the load-balancing loss counts the choices of the whole sequence (Megatron's
/// sequence_partition_group).
struct MoEOptions {
  int64_t num_experts = 0;
  int64_t topk = 1;
  float aux_loss_coeff = 0.f;
  comm::ProcessGroup* sequence_group = nullptr;
  std::string label = "moe";
};

/// ShapeError naming the rule unless `w` fits this rank of `eps` for hidden size h: the router [E, h],
/// the local experts of this EP rank (count and first index: shards cut for another rank are refused),
/// each shard gate, up [f/ETP, h] and fc2 [h, f/ETP]. moe_forward calls it; a layer calls it before its
/// first collective so that a bad rank fails before its peers wait for it.
void check_moe_weights(const MoEWeights& w, const MoEOptions& o, ExpertParallelState& eps, int64_t h);

/// What forward keeps for backward.
struct MoEState {
  Tensor x;  // [T, h]
  Routing routing;
  AuxLossTerms aux;
  float aux_loss = 0.f;  ///< this rank's share: Σ over the sequence group is the sequence's loss
  DispatchPlan plan;
  std::vector<Tensor> xin, gate_up, act;  // per local expert
  Tensor combined;                        // the choices' rows back on this rank [T·k, h]
};

/// Gradients, accumulated: the router [E, h] (this rank's tokens only: sum it over the ranks that share
/// the router, as the dense gradients are) and the local experts' shards (this rank's tp_ep block only:
/// sum them over the edp group).
struct MoEGrads {
  Tensor router;
  std::vector<ExpertShard> experts;
};

/// x [T, h] → y [T, h]. ShapeError naming the rule: weights that do not fit (check_moe_weights), x not
/// [T, h], topk outside 1..E, a non-finite router logit (topk_route), E not divisible by EP, more than
/// 2^24 choices on a rank (the counts travel as float32).
Tensor moe_forward(const Tensor& x, const MoEWeights& w, const MoEOptions& o, ExpertParallelState& eps,
                   MoEState& state);

/// dy [T, h] → dx [T, h] for Σ y·dy + daux·(this rank's aux loss); adds into `grads` (allocated here
/// with zeros when empty; ShapeError when allocated for other weights).
Tensor moe_backward(const Tensor& dy, const MoEWeights& w, const MoEOptions& o, ExpertParallelState& eps,
                    const MoEState& state, float daux, MoEGrads& grads);

}  // namespace tpsp::moe
