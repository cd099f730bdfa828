// One Llama decoder layer in one process, with whole and UNFUSED parameters and no communication: the
// oracle for the engine's tensor-parallel Llama block (fused QKV laid out per key/value group, fused
// gate/up fc1 split with stride 2), which must equal it once its shards are put back together. Unfused,
// the fused layouts stay the engine's business and this oracle cannot share their bugs. Grouped-query
// attention is computed here as multi-head attention on keys and values copied to each query head (the
// repeat_interleave of Llama's reference code), not with the op's grouped layout. Names under the prefix
// "decoder.layers.<i>." (Megatron-LM's, with the fused matrices split into their parts):
//   a     = RMSNorm(x; input_layernorm)                                  [s, b, h]
//   q     = a·W_qᵀ, k = a·W_kᵀ, v = a·W_vᵀ  (linear_q / linear_k / linear_v) [s, b, heads·d], [s, b, G·d]
//   q, k  = RMSNorm over each head's d (q_layernorm, k_layernorm; qk_layernorm only)
//   q, k  = RoPE(q, k; positions, rotary_base)                          (rotate-half pairs i, i + d/2)
//   o     = causal attention, head n on group n / (heads/G)              [s, b, heads·d]
//   x'    = x + o·W_projᵀ                                                (linear_proj)
//   m     = RMSNorm(x'; pre_mlp_layernorm)
//   y     = x' + (silu(m·W_gateᵀ) ⊙ m·W_upᵀ)·W_fc2ᵀ                      (linear_gate, linear_up, linear_fc2)
// No biases and no dropout (Llama's). Sources: Touvron et al. 2023 (Llama 2); Megatron-LM
// megatron/core/transformer/attention.py (get_query_key_value_tensors, q_layernorm), mlp.py (gated
// linear unit), models/common/embeddings/rotary_pos_embedding.py.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/config.h"
#include "engine/ops/ops.h"
#include "engine/ops/rmsnorm.h"
#include "reference/moe_layer.h"
#include "reference/transformer_layer.h"

namespace tpsp::reference {

/// The Llama layer's shape: hidden h, query heads, key/value groups G (0 = heads), ffn (the width of
/// gate and of up), RMSNorm eps, RoPE base, qk_layernorm, and the tokens' positions and packed
/// sequences (empty positions: 0 … s−1; cu_seqlens as in ops::AttentionOptions, positions then restart
/// in each sequence as the caller gives them).
struct LlamaLayerSpec {
  int64_t hidden = 0;
  int64_t heads = 1;
  int64_t query_groups = 0;
  int64_t ffn = 0;
  float norm_eps = 1e-5f;
  float rotary_base = 10000.f;
  bool qk_layernorm = false;
  std::vector<int64_t> positions;
  std::vector<int64_t> cu_seqlens;
  /// With moe.num_experts > 0 the MLP is the MoE layer of reference/moe_layer.h (moe.hidden is taken
  /// from hidden); ffn is then unused.
  MoELayerSpec moe{};
  bool has_moe() const { return moe.num_experts > 0; }
  int64_t groups() const { return query_groups > 0 ? query_groups : heads; }
  int64_t head_dim() const { return hidden / heads; }
  /// Throws ShapeError naming the rule: positive sizes, hidden % heads, heads % groups, an even head
  /// dim (RoPE rotates pairs), positions of the right count.
  void validate(int64_t s) const;
};

/// Activations one layer keeps for backward.
struct LlamaLayerActs {
  Tensor x_in;                     // [s, b, h]
  ops::RMSNormOut ln1;             // input_layernorm
  Tensor q_raw, k_raw, v;          // projections [s, b, heads·d], [s, b, G·d], [s, b, G·d]
  ops::RMSNormOut q_norm, k_norm;  // per-head norms (qk_layernorm only), y as [s, b, ·, d]
  Tensor mha_qkv;                  // [s, b, heads·3·d]: rotated q, and each head's group's rotated k and v
  ops::AttentionOut attn;          // out [s, b, heads·d], probs [b, heads, s, s]
  ops::AttentionOptions attn_opt;
  Tensor x_mid;         // residual after attention [s, b, h]
  ops::RMSNormOut ln2;  // pre_mlp_layernorm
  Tensor gate_up;       // [s, b, 2·ffn] = [gate | up]
  Tensor act;           // silu(gate) ⊙ up [s, b, ffn]
  MoELayerActs moe;     // the MoE layer's (spec.has_moe()); moe.aux_loss: its load-balancing loss
  std::vector<int64_t> positions;
  /// Bytes of the tensors above, the MoE layer's experts' activations included (moe.bytes()).
  std::size_t bytes() const;
};

/// Parameter names (under `prefix`) and whole shapes of one layer, in the order of the formula above.
std::vector<std::pair<std::string, Shape>> llama_layer_parameter_shapes(const LlamaLayerSpec& spec,
                                                                        const std::string& prefix);

/// x [s, b, h] → y [s, b, h] with the parameters "<prefix>…" of `params`; fills `acts`. Throws
/// ShapeError for a bad spec (validate), a missing parameter (names it) or bad shapes.
Tensor llama_layer_forward(const Tensor& x, const ParamMap& params, const std::string& prefix,
                           const LlamaLayerSpec& spec, LlamaLayerActs& acts);

/// dy [s, b, h] → dx [s, b, h]; ADDS every parameter gradient into grads["<prefix>…"] (which must exist
/// with the parameters' shapes). An MoE layer's load-balancing loss enters with weight 1. A group's k and v
/// gradients are the sums over its query heads; the q/k_layernorm weights' gradients the sums over every
/// head.
Tensor llama_layer_backward(const Tensor& dy, const ParamMap& params, const std::string& prefix,
                            const LlamaLayerSpec& spec, const LlamaLayerActs& acts, ParamMap& grads);

}  // namespace tpsp::reference
