// One tensor-parallel (+ sequence-parallel) Llama layer with explicit forward and backward, in
// Megatron-LM's layouts (megatron/core/transformer/attention.py get_query_key_value_tensors, mlp.py's
// gated linear unit, tensor_parallel/layers.py stride; Touvron et al. 2023):
//   attention: RMSNorm → linear_qkv ColumnParallelLinear of the FUSED weight laid out per key/value
//              group ([q of the group's heads… | k | v] per group), no bias → optional per-head RMSNorm of
//              q and k (qk_layernorm) → RoPE at the whole sequence's positions (after SP's all-gather)
//              → causal grouped-query attention on the local heads → linear_proj RowParallelLinear;
//   MLP:       RMSNorm → linear_fc1 ColumnParallelLinear of the FUSED [W_gate; W_up] split with stride 2
//              (rank r holds gate's r-th and up's r-th row blocks, so its output is [gate_r | up_r]) →
//              SwiGLU → linear_fc2 RowParallelLinear; or, with LlamaLayerConfig::moe(), RMSNorm → the MoE
//              layer (engine/moe/moe_layer.h: router, all-to-all dispatch over EP, experts split over ETP)
//              on this rank's tokens, which needs SP when tp > 1 (Megatron's rule) and the expert groups
//              in LayerContext::experts; its load-balancing loss enters with backward's aux_loss_scale.
// Groups over ranks: with groups % tp == 0 each rank holds whole groups; with tp % groups == 0 the fused
// weight is split evenly, the QKV activation all-gathered over TP along its last dim and each rank keeps
// its group r / (tp/groups) with its heads/tp query heads (backward: the reduce-scatter of that gather
// sums the shared k and v gradients). Norm weights are replicated; under SP input/pre_mlp_layernorm's
// gradients, and q/k_layernorm's always, are this rank's partial sums, to be all-reduced over TP
// (Megatron finalize_model_grads). The oracle is reference/llama_layer.h, with unfused weights.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/llama_config.h"
#include "engine/model/sharding.h"
#include "engine/model/transformer_layer.h"
#include "engine/moe/moe_layer.h"
#include "engine/ops/rmsnorm.h"

namespace tpsp::model {

/// The whole UNFUSED parameters of one layer (llama_layer_shapes' names under `prefix`) → the whole FUSED
/// ones: linear_qkv [groups·(heads/groups + 2)·d, h] (per group: its query heads' rows, k's, v's),
/// linear_fc1 [2·ffn, h] = [W_gate; W_up], the others as they are; an MoE layer's MLP weights are left
/// out (shard_moe_layer cuts them). Throws ShapeError for a missing one.
std::map<std::string, Tensor> fuse_llama_layer(const std::map<std::string, Tensor>& whole,
                                               const LlamaLayerConfig& cfg, const std::string& prefix);

/// One whole fused weight of a layer, "<prefix>self_attention.linear_qkv.weight" or
/// "<prefix>mlp.linear_fc1.weight", from its unfused parts got by part(name) (fuse_llama_layer's layouts),
/// so a caller can build one fused tensor at a time. Throws ShapeError for another name.
Tensor fuse_llama_weight(const std::string& name, const LlamaLayerConfig& cfg,
                         const std::function<Tensor(const std::string&)>& part);

/// A model's whole parameters (or gradients) under gpt_parameter_shapes' names → under the parallel model's
/// names: for the Llama block each layer fused (fuse_llama_layer; the unfused parts dropped), for the GPT-2
/// block unchanged. What a reference model's tensors are compared with once the shards are gathered.
std::map<std::string, Tensor> fused_model_parameters(const GPTConfig& cfg,
                                                     const std::map<std::string, Tensor>& whole);

/// The whole UNFUSED parameters of one layer (names of reference/llama_layer.h under `prefix`) → this
/// rank's local shards of the fused ones (fuse_llama_layer, then shard_of under llama_layer_shard_specs):
/// "<prefix>self_attention.linear_qkv.weight" [groups·(heads/groups + 2)·d / tp, h],
/// "<prefix>mlp.linear_fc1.weight" [2·ffn/tp, h] = [gate_r; up_r], linear_proj [h, heads·d/tp], linear_fc2
/// [h, ffn/tp], the norm weights whole. Throws ShapeError for a missing parameter or a bad config.
std::map<std::string, Tensor> shard_llama_layer(const std::map<std::string, Tensor>& whole,
                                                const LlamaLayerConfig& cfg, const std::string& prefix,
                                                int rank, int tp);

/// "<prefix>mlp.experts.local_experts.<expert>.": where an MoE layer's expert weights are named (by the
/// expert's global index, as reference/moe_layer.h names them).
std::string moe_expert_prefix(const std::string& prefix, int64_t expert);

/// An MoE layer's whole weights (reference/moe_layer.h's names under `prefix`) → this rank's: the router
/// [E, h] whole, and each local expert of EP rank ep_rank (experts ep_rank·E/EP …) cut over ETP: gate and
/// up rows [etp_rank·f/ETP, …) [f/ETP, h], fc2 the same columns [h, f/ETP]. ShapeError for a layer
/// without MoE, a missing weight, E not divisible by EP or f by ETP.
std::map<std::string, Tensor> shard_moe_layer(const std::map<std::string, Tensor>& whole,
                                              const LlamaLayerConfig& cfg, const std::string& prefix, int ep,
                                              int etp, int ep_rank, int etp_rank);

/// Activations one Llama layer keeps for backward on this rank.
struct LlamaLayerSaved {
  Tensor x_in, x_mid;        // residual stream [s, b, h] or [s/tp, b, h] (SP)
  ops::RMSNormOut ln1, ln2;  // on the same rows
  tensor_parallel::LinearSaved qkv_in, proj_in, fc1_in, fc2_in;
  Tensor q_raw, k_raw, v;          // this rank's groups, [s, b, n·d] each
  ops::RMSNormOut q_norm, k_norm;  // qk_layernorm only
  Tensor qkv;                      // rotated, per-group layout for the attention op
  ops::AttentionOut attn;          // out [s, b, heads/tp·d], probs [b, heads/tp, s, s]
  ops::AttentionOptions attn_opt;
  Tensor gate_up;                  // [s, b, 2·ffn/tp] = [gate_r | up_r]
  moe::MoEState moe;               // an MoE layer's (cfg.moe()): its routing, plan and expert activations
  float aux_loss = 0.f;            // an MoE layer's load-balancing loss on this rank's tokens
  std::vector<int64_t> positions;  // the whole sequence's
  /// Bytes of every distinct buffer above (qkv_in = ln1.y, proj_in = attn.out, fc1_in = ln2.y are
  /// handles of tensors already counted; fc2_in is SwiGLU's output).
  std::size_t bytes() const;
};

/// One Llama layer's handles to the model's parameter and gradient shards.
class LlamaLayer {
 public:
  /// prefix: "decoder.layers.i."; params/grads: maps holding this layer's local shards
  /// (shard_llama_layer's names; an MoE layer's router and local expert shards: shard_moe_layer's).
  /// Throws ShapeError on a bad config for tp (validate) or a missing parameter.
  LlamaLayer(const LlamaLayerConfig& cfg, std::string prefix, std::map<std::string, Tensor>& params,
             std::map<std::string, Tensor>& grads, int tp, bool sequence_parallel,
             bool tp_comm_overlap = false);
  /// x: [s, b, h] (or this rank's [s/tp, b, h] under SP) → same shape. positions: the whole
  /// sequence's s positions (empty: rotary_positions(x.size(0), ctx), restarting in each packed sequence
  /// of ctx.cu_seqlens; RoPE is relative, so a wrong restart cannot show in the outputs). Throws
  /// ShapeError, before any collective, for an input that disagrees with ctx or positions of another
  /// count.
  Tensor forward(const Tensor& x, LlamaLayerSaved& saved, const LayerContext& ctx,
                 const std::vector<int64_t>& positions = {}) const;
  /// dy shaped like the output → dx shaped like the input; accumulates this layer's gradients. An MoE
  /// layer's load-balancing loss enters the differentiated loss with weight aux_loss_scale (the scale of
  /// the main loss: 1/K with K micro-batches).
  Tensor backward(const Tensor& dy, const LlamaLayerSaved& saved, const LayerContext& ctx,
                  float aux_loss_scale = 1.f);
  /// An MoE layer's gradient handles (router and local expert shards; into the model's grads map), for
  /// finalize_moe_grads. Empty for a dense layer.
  moe::MoEGrads& moe_grads() { return moe_g_; }
  const LlamaLayerConfig& config() const { return cfg_; }

 private:
  LlamaLayerConfig cfg_;
  std::string prefix_;
  int tp_;
  Tensor ln1_w_, ln2_w_, qn_w_, kn_w_;
  Tensor dln1_w_, dln2_w_, dqn_w_, dkn_w_;
  tensor_parallel::ColumnParallelLinear qkv_;
  tensor_parallel::RowParallelLinear proj_;
  std::optional<tensor_parallel::ColumnParallelLinear> fc1_;  // the dense MLP (not cfg.moe())
  std::optional<tensor_parallel::RowParallelLinear> fc2_;
  moe::MoEWeights moe_w_;  // an MoE layer's router and local expert shards (handles into the maps)
  moe::MoEGrads moe_g_;
  moe::MoEOptions moe_options(const LayerContext& ctx) const;
};

}  // namespace tpsp::model
