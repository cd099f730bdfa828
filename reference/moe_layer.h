// One MoE layer in one process, every expert local and no communication: the oracle for the engine's
// expert-parallel MoE layer (token dispatch and combine over all-to-all, experts split over EP and ETP
// ranks), which must equal it token for token. Names under the prefix "decoder.layers.<i>." (Megatron-
// LM's, each expert's fused fc1 split into its gate and up parts, as the Llama oracle does):
//   x      [s, b, h] → tokens [T, h], T = s·b in [s, b] order
//   logits = x·W_routerᵀ                                   (mlp.router.weight [E, h])
//   route  = top-k experts per token, probs = softmax over the k chosen logits   (engine/moe/router.h)
//   y_t    = Σ_j probs[t, j] · expert_{e_tj}(x_t),   expert_e(x) = (silu(x·W_gateᵀ) ⊙ x·W_upᵀ)·W_fc2ᵀ
//            (mlp.experts.local_experts.<e>.linear_gate / linear_up [f, h], linear_fc2 [h, f])
//   aux    = Switch load-balancing loss over these T tokens, coefficient moe_aux_loss_coeff
// No residual, no norm, no biases: the layer is what replaces the MLP inside a transformer layer.
// Dropless: every token reaches all its k experts. Sources: Megatron-LM megatron/core/transformer/moe/
// moe_layer.py (MoELayer), experts.py (SequentialMLP), router.py (TopKRouter); Fedus et al. 2021.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/moe/router.h"
#include "reference/param_map.h"

namespace tpsp::reference {

/// The MoE layer's shape: hidden h, each expert's ffn f (the width of gate and of up), num_moe_experts
/// E, moe_router_topk k, moe_aux_loss_coeff.
struct MoELayerSpec {
  int64_t hidden = 0;
  int64_t ffn = 0;
  int64_t num_experts = 0;
  int64_t topk = 1;
  float aux_loss_coeff = 0.f;
  /// Throws ShapeError naming the rule: positive sizes, 1 <= topk <= num_experts, a coefficient >= 0.
  void validate() const;
};

/// What one layer keeps for backward.
struct MoELayerActs {
  Shape x_shape;          // [s, b, h]
  Tensor x;               // [T, h]
  moe::Routing routing;   // the router's choice
  moe::AuxLossTerms aux;  // the loss's counts over these T tokens
  float aux_loss = 0.f;
  /// Per expert: the choices routed to it as t·k + j, in token order; its input rows [n_e, h],
  /// [gate | up] [n_e, 2f], silu(gate) ⊙ up [n_e, f] and output [n_e, h] (before the router's weight).
  std::vector<std::vector<int64_t>> choices;
  std::vector<Tensor> xin, gate_up, act, out;
  /// Bytes of the experts' activations (xin, gate_up, act, out; x is the layer's input, counted there).
  std::size_t bytes() const;
};

/// Parameter names (under `prefix`) and whole shapes: the router, then each expert's gate, up, fc2.
std::vector<std::pair<std::string, Shape>> moe_layer_parameter_shapes(const MoELayerSpec& spec,
                                                                      const std::string& prefix);

/// x [s, b, h] → y [s, b, h]; fills `acts` (acts.aux_loss: the load-balancing loss). Throws ShapeError for
/// a bad spec, a missing parameter (names it), x not [s, b, h].
Tensor moe_layer_forward(const Tensor& x, const ParamMap& params, const std::string& prefix,
                         const MoELayerSpec& spec, MoELayerActs& acts);

/// dy [s, b, h] → dx [s, b, h] for the loss Σ y·dy + daux·aux; ADDS every parameter gradient into
/// grads["<prefix>…"] (which must exist with the parameters' shapes). The router's gradient has both
/// parts: through the probs that weight each expert's output, and through the load-balancing loss.
Tensor moe_layer_backward(const Tensor& dy, const ParamMap& params, const std::string& prefix,
                          const MoELayerSpec& spec, const MoELayerActs& acts, float daux, ParamMap& grads);

}  // namespace tpsp::reference
