// Configuration of the GPT shared by the reference and the tensor-parallel engine.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace tpsp {

/// A GPT-2-style pre-LayerNorm decoder (Radford et al. 2019) in Megatron-LM's naming.
/// vocab: real vocabulary size V; seq: max positions (the learned position table); hidden: h;
/// heads: attention heads (h % heads == 0); layers; ffn: MLP width (0 means 4h); dropout: p for
/// embedding, attention-probability and hidden dropout; tied: output layer shares the word
/// embedding; ln_eps; label_smoothing α (PyTorch's definition); init_std: N(0, σ²) for weights
/// (output projections use σ/√(2·layers), Megatron's scaled init).
struct GPTConfig {
  int64_t vocab = 256;
  int64_t seq = 64;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t layers = 2;
  int64_t ffn = 0;
  float dropout = 0.f;
  bool tied = true;
  float ln_eps = 1e-5f;
  float label_smoothing = 0.f;
  float init_std = 0.02f;
  // The block (Megatron-LM's TransformerConfig names). The defaults are the GPT-2 block; the Llama block
  // is normalization "RMSNorm", activation "swiglu" (fc1 fused [gate; up], 2·ffn wide),
  // position_embedding_type "rope", add_bias_linear false (llama_config() sets them); no other mix is
  // supported (validate).
  std::string normalization = "LayerNorm";                   ///< "LayerNorm" | "RMSNorm"
  std::string activation = "gelu";                           ///< "gelu" | "swiglu"
  std::string position_embedding_type = "learned_absolute";  ///< "learned_absolute" | "rope"
  float rotary_base = 10000.f;                               ///< RoPE's θ base
  int64_t num_query_groups = 0;                              ///< key/value groups (GQA); 0 = heads
  bool qk_layernorm = false;                                 ///< RMSNorm of each head's q and k (Llama block)
  bool add_bias_linear = true;                               ///< biases in every linear layer
  // Mixture of experts (the Llama block only; Megatron-LM's names): with num_moe_experts > 0 the MLP of
  // every moe_layer_freq-th layer (0, freq, 2·freq, …) is an MoE layer (engine/moe/moe_layer.h): a router
  // choosing moe_router_topk experts per token, each expert a SwiGLU MLP of width moe_ffn_hidden_size (0:
  // ffn_hidden()), and the Switch load-balancing loss with coefficient moe_aux_loss_coeff added to the
  // objective. How the experts are split over ranks (EP, ETP) is the parallel model's, not the config's.
  int64_t num_moe_experts = 0;
  int64_t moe_router_topk = 2;
  int64_t moe_ffn_hidden_size = 0;
  float moe_aux_loss_coeff = 0.f;
  int64_t moe_layer_freq = 1;

  /// True for the Llama block (normalization "RMSNorm").
  bool llama() const { return normalization == "RMSNorm"; }
  /// num_query_groups, or heads when 0.
  int64_t query_groups() const { return num_query_groups > 0 ? num_query_groups : heads; }

  /// ffn, or 4·hidden when ffn == 0.
  int64_t ffn_hidden() const { return ffn > 0 ? ffn : 4 * hidden; }
  /// moe_ffn_hidden_size, or ffn_hidden() when 0.
  int64_t moe_ffn() const { return moe_ffn_hidden_size > 0 ? moe_ffn_hidden_size : ffn_hidden(); }
  /// True when layer i's MLP is an MoE layer: num_moe_experts > 0 and i % moe_layer_freq == 0.
  bool moe_layer(int64_t i) const {
    return num_moe_experts > 0 && moe_layer_freq > 0 && i % moe_layer_freq == 0;
  }
  int64_t head_dim() const { return hidden / heads; }
  /// Throws ShapeError naming the rule: positive sizes, hidden % heads == 0, 0 <= dropout < 1,
  /// 0 <= label_smoothing <= 1, a known block (the GPT-2 or the Llama combination of the fields above;
  /// the Llama block without dropout, with heads % num_query_groups == 0 and an even head_dim); MoE
  /// fields only on the Llama block, with 1 <= moe_router_topk <= num_moe_experts, moe_layer_freq >= 1,
  /// moe_ffn_hidden_size >= 0 and a finite moe_aux_loss_coeff >= 0.
  void validate() const;
  /// "V=37 s=13 h=24 heads=3 layers=2 ffn=96 ..." for reports.
  std::string str() const;
};

/// The Llama block at these sizes: RMSNorm, SwiGLU, RoPE, no biases, untied output layer, no dropout,
/// num_query_groups groups (0 = heads: multi-head attention).
GPTConfig llama_config(int64_t vocab, int64_t seq, int64_t hidden, int64_t heads, int64_t num_query_groups,
                       int64_t layers, int64_t ffn);

/// Parameter names (Megatron-LM's) and whole shapes of a config, in model order; see reference/gpt.h
/// for the architecture. The vocabulary is the real V (the parallel model pads it to a multiple of tp).
/// The Llama block's layers are listed UNFUSED (reference/llama_layer.h: linear_q, linear_k, linear_v,
/// linear_gate, linear_up); the parallel model fuses them (engine/model/llama_layer.h). An MoE layer
/// (GPTConfig::moe_layer) lists moe_layer_shapes in place of the MLP's three weights.
std::vector<std::pair<std::string, Shape>> gpt_parameter_shapes(const GPTConfig& cfg);

/// One Llama layer's UNFUSED parameter names (under `prefix`) and whole shapes: input_layernorm [h],
/// linear_q [heads·d, h], linear_k and linear_v [groups·d, h], q/k_layernorm [d] (qk_layernorm only),
/// linear_proj [h, heads·d], pre_mlp_layernorm [h], linear_gate and linear_up [ffn, h], linear_fc2 [h, ffn].
std::vector<std::pair<std::string, Shape>> llama_layer_shapes(int64_t hidden, int64_t heads, int64_t groups,
                                                              int64_t ffn, bool qk_layernorm,
                                                              const std::string& prefix);

/// One MoE layer's parameter names (under `prefix`) and whole shapes: mlp.router.weight [E, h], then per
/// expert e mlp.experts.local_experts.<e>.linear_gate.weight and linear_up.weight [f, h], linear_fc2.weight
/// [h, f] (Megatron-LM's TopKRouter and SequentialMLP names).
std::vector<std::pair<std::string, Shape>> moe_layer_shapes(int64_t hidden, int64_t ffn, int64_t num_experts,
                                                            const std::string& prefix);

}  // namespace tpsp
