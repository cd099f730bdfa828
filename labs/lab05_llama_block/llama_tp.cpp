// The Llama block's tensor-parallel pieces (see llama_tp.h). lab05 replaces this file.
#include "engine/model/llama_tp.h"

#include "engine/error.h"
#include "engine/lab_todo.h"
#include "engine/packed_seq.h"

namespace tpsp::model {

LocalHeads local_heads(const LlamaLayerConfig& cfg, int rank, int tp) {
  cfg.validate(tp);
  TPSP_CHECK(rank >= 0 && rank < tp, "local_heads: rank=", rank, " is outside [0, tp=", tp, ")");
  // TODO(lab05 local_heads): G = cfg.groups() key/value groups, Q = cfg.heads / G query heads each. G % tp
  // == 0: rank r holds G/tp whole groups, each with its Q query heads ({.groups = G/tp, .per = Q}). tp % G
  // == 0: tp/G consecutive ranks share group g = r / (tp/G), the QKV activation is gathered, and each
  // rank computes heads/tp of the group's query heads in rank order ({.groups = 1, .per = heads/tp,
  // .gathered = true, .group = g, .first_head = its first}).
  TPSP_LAB_TODO("lab05 local_heads");
}

Tensor shard_linear_fc1(const Tensor& whole, int rank, int tp) {
  TPSP_CHECK(rank >= 0 && rank < tp, "shard_linear_fc1: rank=", rank, " is outside [0, tp=", tp, ")");
  TPSP_CHECK(whole.dim() == 2 && whole.size(0) % 2 == 0,
             "shard_linear_fc1: the fused [W_gate; W_up] must be ", "[2·ffn, h], got ",
             shape_str(whole.shape()));
  // TODO(lab05 shard_linear_fc1): whole [2·ffn, h] = [W_gate; W_up] -> rank r's [2·ffn/tp, h] = [gate rows
  // r·ffn/tp … (r+1)·ffn/tp; the same rows of up], so that its fc1 output splits into [gate_r | up_r].
  // ffn not divisible by tp: ShapeError whose message names them as ffn=<ffn> and tp=<tp>.
  TPSP_LAB_TODO("lab05 shard_linear_fc1");
}

QKV qkv_to_local_heads(const Tensor& qkv, const LlamaLayerConfig& cfg, const LocalHeads& L,
                       comm::ProcessGroup& tp, const std::string& label) {
  const int64_t d = cfg.head_dim();
  if (!L.gathered) return split_groups(qkv, L.groups, L.per, 0, L.per, d);
  // TODO(lab05 qkv_to_local_heads): qkv [s, b, rows/tp], this rank's columns of the per-group layout
  // (group g: [Q query heads | k | v], (Q+2)·d columns). Gathered: one all-gather over tp along dim 2
  // labelled label, then split_groups of group L.group's columns keeping query heads [L.first_head,
  // L.first_head + L.per) -> q [s, b, L.per·d], k and v [s, b, d].
  TPSP_LAB_TODO("lab05 qkv_to_local_heads");
}

Tensor local_heads_to_qkv_grad(const QKV& grad, const LlamaLayerConfig& cfg, const LocalHeads& L,
                               comm::ProcessGroup& tp, const std::string& label) {
  const int64_t d = cfg.head_dim();
  if (!L.gathered) return join_groups(grad, L.groups, L.per, d);
  // TODO(lab05 local_heads_to_qkv_grad): grad.q [s, b, L.per·d], grad.k and grad.v [s, b, d] -> this rank's
  // [s, b, rows/tp]. Build the gradient of the whole gathered activation [s, b, G·(Q+2)·d]: zero except
  // this rank's query heads and its group's k and v (zero_columns), then one reduce-scatter (sum) over tp
  // along dim 2 labelled label: it sums the k and v gradients of the ranks sharing a group and gives
  // each rank its own columns.
  TPSP_LAB_TODO("lab05 local_heads_to_qkv_grad");
}

std::vector<int64_t> rotary_positions(int64_t input_rows, const LayerContext& ctx) {
  if (!ctx.cu_seqlens.empty()) validate_cu_seqlens(ctx.cu_seqlens, ctx.seq, "rotary_positions");
  // TODO(lab05 rotary_positions): one position per token of the whole sequence (ctx.seq of them, whatever
  // input_rows is: q and k are rotated after the QKV projection gathered the sequence), restarting at 0 at
  // each ctx.cu_seqlens boundary (empty: 0 … s−1). input_rows must be s/tp under SP (ctx.sequence_parallel)
  // and s otherwise (tp = ctx.tp->size()): ShapeError whose message names s=<s> and tp=<tp>.
  TPSP_LAB_TODO("lab05 rotary_positions");
}

bool norm_grad_partial_over_tp(const std::string& name, bool sequence_parallel) {
  // TODO(lab05 norm_grad_partial_over_tp): name ends with input_layernorm.weight, pre_mlp_layernorm.weight or
  // final_layernorm.weight (the residual stream's RMSNorms: partial exactly under sequence parallelism) or
  // q_layernorm.weight / k_layernorm.weight (per-head norms: partial always), whatever prefix the name has
  // ("decoder.layers.3."). Another name, with SP or without: ShapeError whose message holds the name.
  TPSP_LAB_TODO("lab05 norm_grad_partial_over_tp");
}

}  // namespace tpsp::model
