// The Llama layer's sizes and their rules for a TP size (engine/model/llama_layer.h builds the layer):
// kept apart from the layer so that code without the linear layers (tpsp-capacity) can check a config.
#pragma once

#include <cstdint>

#include "engine/model/config.h"

namespace tpsp::model {

/// The Llama layer's sizes (Megatron's names): hidden, query heads, num_query_groups (0 = heads), ffn
/// (the width of gate and of up), RMSNorm eps, RoPE base, qk_layernorm; with num_moe_experts > 0 an MoE
/// layer (engine/moe/moe_layer.h) replaces the MLP: moe_router_topk experts per token, each a SwiGLU
/// MLP of width moe_ffn_hidden_size, Switch load-balancing loss coefficient moe_aux_loss_coeff.
struct LlamaLayerConfig {
  int64_t hidden = 0;
  int64_t heads = 1;
  int64_t num_query_groups = 0;
  int64_t ffn = 0;
  float norm_eps = 1e-5f;
  float rotary_base = 10000.f;
  bool qk_layernorm = false;
  int64_t num_moe_experts = 0;
  int64_t moe_router_topk = 2;
  int64_t moe_ffn_hidden_size = 0;
  float moe_aux_loss_coeff = 0.f;
  bool moe() const { return num_moe_experts > 0; }
  int64_t groups() const { return num_query_groups > 0 ? num_query_groups : heads; }
  int64_t head_dim() const { return hidden / heads; }
  /// Throws ShapeError naming the rule and the values, before any communication: positive sizes,
  /// hidden % heads, heads % groups, an even head dim (RoPE), heads % tp, ffn % tp, groups dividing tp
  /// or divisible by it ("num_query_groups=3 and tp=2: one must divide the other"), and for tp > groups
  /// the fused QKV rows divisible by tp; with MoE a positive moe_ffn_hidden_size and 1 <= moe_router_topk
  /// <= num_moe_experts (ffn is then not used).
  void validate(int tp) const;
};

/// The layer config of a GPTConfig's Llama block: of layer `layer` (its MoE fields set when
/// cfg.moe_layer(layer)), or with layer = -1 the dense layer (attention and the dense MLP; no MoE).
LlamaLayerConfig llama_layer_config(const GPTConfig& cfg, int64_t layer = -1);

}  // namespace tpsp::model
