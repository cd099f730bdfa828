// The Llama block's tensor-parallel pieces, where real TP code goes silently wrong (lab05 writes the
// functions marked "lab05"; engine/model/llama_heads.cpp holds the layout helpers):
//   - the shard of the fused fc1 [W_gate; W_up]: rank r must hold gate's r-th AND up's r-th row block
//     (Megatron-LM tensor_parallel/layers.py `stride`), or SwiGLU pairs gate rows with gate rows;
//   - which key/value group and query heads rank r attends with under grouped-query attention, and the
//     gather of the QKV activation when groups < tp (Megatron-LM attention.py
//     get_query_key_value_tensors: each rank keeps its group, the backward sums the shared k and v);
//   - the positions RoPE rotates with: the whole sequence's (q and k are rotated after the QKV
//     projection gathered the sequence, Megatron-LM get_rotary_seq_len multiplies by tp under SP),
//     restarting at 0 in each packed sequence;
//   - which RMSNorm weight gradients are partial over TP (Megatron-LM finalize_model_grads.py: the
//     sequence-parallel norms, and the per-head q/k_layernorm weights even without SP).
// The fused QKV layout is per key/value group: [q of the group's heads | k | v] for each group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/model/llama_config.h"
#include "engine/model/transformer_layer.h"
#include "engine/tensor.h"

namespace tpsp::model {

/// Which query heads and key/value groups rank r of tp attends with (LlamaLayerConfig: heads query
/// heads, G = groups() key/value groups, Q = heads / G query heads per group, validate(tp) passed).
struct LocalHeads {
  int64_t groups = 0;  ///< key/value groups on this rank: G / tp, or 1 when tp > G
  int64_t per = 0;     ///< query heads of each local group this rank computes: Q, or heads / tp when tp > G
  bool gathered = false;   ///< tp > G: the QKV activation is all-gathered over TP and one group kept
  int64_t group = 0;       ///< (gathered) the global group kept
  int64_t first_head = 0;  ///< (gathered) the first of the group's Q query heads this rank computes
};

/// lab05. LocalHeads of rank r: with G % tp == 0, rank r holds groups [r·G/tp, (r+1)·G/tp) whole (each with
/// its Q query heads), not gathered; with tp % G == 0, the tp/G consecutive ranks r of group g = r / (tp/G)
/// share it, each computing heads/tp of its Q query heads, in rank order. Source: Megatron-LM attention.py
/// (num_query_groups_per_partition) and the engine's fused layout. Throws ShapeError for a config that
/// fails validate(tp) or r outside [0, tp).
LocalHeads local_heads(const LlamaLayerConfig& cfg, int rank, int tp);

/// lab05. The fused fc1 weight whole [2·ffn, h] = [W_gate; W_up] → rank r's shard [2·ffn/tp, h] =
/// [gate rows r·ffn/tp … (r+1)·ffn/tp; the same rows of up] (Placement::Shard(0, 2), Megatron-LM
/// layers.py stride=2 for the gated linear unit), so that the local output splits into [gate_r | up_r].
/// Throws ShapeError naming the rule when whole is not 2-D, has an odd number of rows, or ffn is not
/// divisible by tp (the message names ffn=<ffn> and tp=<tp>), or r is outside [0, tp).
Tensor shard_linear_fc1(const Tensor& whole, int rank, int tp);

/// q [s, b, groups·per·d], k and v [s, b, groups·d]: the local heads a rank attends with.
struct QKV {
  Tensor q, k, v;
};

/// lab05. The column-parallel QKV output [s, b, rows/tp] of rank r (its rows of the fused per-group
/// layout) → the q, k, v of its LocalHeads L. Not gathered: split_groups of the local columns. Gathered
/// (tp > G): all-gather the activation over tp along dim 2 (one call, labelled label), keep group
/// L.group's columns and split out query heads [L.first_head, L.first_head + L.per). Source: Megatron-LM
/// attention.py get_query_key_value_tensors. Communication: none, or that one all-gather of
/// s·b·G·(Q+2)·d·4 bytes.
QKV qkv_to_local_heads(const Tensor& qkv, const LlamaLayerConfig& cfg, const LocalHeads& L,
                       comm::ProcessGroup& tp, const std::string& label);

/// lab05. The backward of qkv_to_local_heads: gradients of q, k, v (shaped as its outputs) → the gradient
/// of this rank's QKV output [s, b, rows/tp]. Gathered: the gradient of the whole gathered activation is
/// zero outside this rank's query heads and its group's k and v; the reduce-scatter over tp along dim 2
/// (one call, labelled label) sums what the ranks sharing a group computed for its k and v and hands each
/// rank its own columns. Communication: none, or that one reduce-scatter (sum).
Tensor local_heads_to_qkv_grad(const QKV& grad, const LlamaLayerConfig& cfg, const LocalHeads& L,
                               comm::ProcessGroup& tp, const std::string& label);

/// lab05. The positions RoPE rotates q and k with, one per token of the WHOLE sequence (ctx.seq of them:
/// q and k are rotated after the QKV projection gathered the sequence), restarting at 0 at each packed
/// sequence's start (ctx.cu_seqlens; empty: one sequence, 0 … s−1). input_rows: the rows of the layer's
/// input on this rank (s/tp under SP, s otherwise). Source: Megatron-LM rotary_pos_embedding.py
/// get_rotary_seq_len (× tp under SP) and packed sequences' position_ids. Throws ShapeError when
/// input_rows disagrees with ctx (the message names s=<s> and tp=<tp>, tp = ctx.tp->size()).
std::vector<int64_t> rotary_positions(int64_t input_rows, const LayerContext& ctx);

/// lab05. Whether each TP rank's gradient of the replicated RMSNorm weight `name`
/// ("…input_layernorm.weight", "…pre_mlp_layernorm.weight", "…self_attention.q_layernorm.weight",
/// "…self_attention.k_layernorm.weight", "decoder.final_layernorm.weight") is only its share, to be summed
/// over TP before the optimizer: the norms of the residual stream under sequence parallelism (each rank saw
/// s/tp tokens), the per-head q/k norms always (each rank normalised heads/tp heads). Source: Megatron-LM
/// finalize_model_grads.py. Throws ShapeError, naming it, for a name that is none of these (SP or not).
bool norm_grad_partial_over_tp(const std::string& name, bool sequence_parallel);

// ---- Layout helpers (engine/model/llama_heads.cpp) --------------------------------------------------

/// q [s, b, groups·per·d], k and v [s, b, groups·d] of the query heads [first, first + per) of each of the
/// `groups` groups of t [s, b, groups·(per_in + 2)·d] (per group: per_in query heads, k, v).
QKV split_groups(const Tensor& t, int64_t groups, int64_t per_in, int64_t first, int64_t per, int64_t d);

/// The per-group layout [q of the group's per heads | k | v] of x with `groups` groups: split_groups'
/// inverse for first = 0, per = per_in.
Tensor join_groups(const QKV& x, int64_t groups, int64_t per, int64_t d);

/// [t.size(0), t.size(1), width] zeros on t's device (f32).
Tensor zero_columns(const Tensor& t, int64_t width);

}  // namespace tpsp::model
