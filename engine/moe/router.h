// The MoE router's arithmetic (Megatron-LM's TopKRouter with its defaults: score_function "softmax",
// use_pre_softmax False, no capacity factor, so dropless), on the host: choose each token's top-k
// experts by their logits, weight them by a softmax over the k chosen logits, and the Switch
// Transformer load-balancing loss with its gradient. Sources: Megatron-LM megatron/core/transformer/moe/
// router.py (TopKRouter) and moe_utils.py (topk_softmax_with_capacity, switch_load_balancing_loss_func);
// Fedus et al. 2021 (Switch Transformer), eq. 4. moe_aux_loss_coeff is used as given (not divided by
// the TP size).
//
// Ties: torch.topk leaves the order of equal values unspecified, so two ranks (or two runs) could pick
// different experts for one token. Here equal logits are ordered by expert index, lower first, on every
// rank: the choice is a function of the logits alone.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace tpsp::moe {

/// The router's choice for T tokens among E experts.
struct Routing {
  int64_t num_experts = 0;
  int64_t topk = 0;
  /// [T·k]: token t's experts at [t·k, t·k + k), best first; equal logits: the lower expert first.
  std::vector<int64_t> indices;
  /// [T, k] f32: softmax over the token's k chosen logits, in the order of `indices`.
  Tensor probs;
  /// [T, E] f32: softmax over all E logits (the probabilities the load-balancing loss sums).
  Tensor scores;
  /// [E]: how many of this call's T·k choices went to each expert.
  std::vector<int64_t> tokens_per_expert;
  int64_t num_tokens() const { return topk > 0 ? static_cast<int64_t>(indices.size()) / topk : 0; }
};

/// One token's choice: writes to chosen[0..topk) the experts of the `topk` largest of logits[0..experts),
/// largest first; equal logits in expert order, the lower expert first (a function of the logits alone,
/// the same on every rank). The logits are finite and 1 <= topk <= experts (topk_route checked them).
/// lab06's piece of the router (engine/moe/topk_experts.cpp).
void topk_experts(const float* logits, int64_t experts, int64_t topk, int64_t* chosen);
/// The signature of topk_experts: the reference passes its own, so that it links no lab's code.
using TopkChoice = void (*)(const float* logits, int64_t experts, int64_t topk, int64_t* chosen);

/// Routes logits [T, E] (f32 or bf16, host; T may be 0) to each token's top `topk` experts.
/// Throws ShapeError naming the rule: logits not 2-D, on a device ("the router runs on the host"),
/// topk outside 1..E ("moe_router_topk=3 is larger than num_moe_experts=2"), a logit that is NaN or
/// infinite (naming the token and the expert: its softmax would be NaN), a choice out of range or
/// repeated (naming the token).
Routing topk_route(const Tensor& logits, int64_t topk, TopkChoice choose = topk_experts);

/// What the load-balancing loss counts: the choices per expert and the number of tokens they were made
/// for, over every token the loss balances (under sequence parallelism, all TP ranks' tokens: the caller
/// all-reduces tokens_per_expert), the router's topk and moe_aux_loss_coeff.
struct AuxLossTerms {
  std::vector<int64_t> tokens_per_expert;
  int64_t total_tokens = 0;
  int64_t topk = 1;
  float coeff = 0.f;
};

/// Switch load-balancing loss of this call's scores [T, E]:
///   E·coeff / (k·total_tokens²) · Σ_e (Σ_t scores[t, e]) · tokens_per_expert[e]
/// (Megatron's switch_load_balancing_loss_func). With every token counted in one call (T = total_tokens)
/// and a uniform routing it is coeff. Throws ShapeError when tokens_per_expert does not have E entries
/// or total_tokens is not positive.
float switch_aux_loss(const Tensor& scores, const AuxLossTerms& terms);

/// dlogits [T, E] of Σ_{t,j} dprobs[t, j]·probs[t, j] + daux·switch_aux_loss(scores, terms), given the
/// forward's routing (the counts are constants, as the loss's tokens_per_expert is in Megatron: no
/// gradient through the choice). dprobs: [T, k] f32. ShapeError on a dprobs of another shape, or terms
/// as switch_aux_loss refuses them.
Tensor topk_route_backward(const Routing& routing, const Tensor& dprobs, const AuxLossTerms& terms,
                           float daux);

}  // namespace tpsp::moe
