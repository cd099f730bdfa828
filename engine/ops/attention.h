// Causal multi-head self-attention on the sequence-first layout (Vaswani et al. 2017; GPT-2), with
// grouped-query attention (Ainslie et al. 2023, GQA; Llama-2-70B: 64 query heads, 8 key/value groups).
//
// qkv holds, for each of the G key/value groups, the Q = heads/G query heads of the group, then the
// group's key, then its value, each d wide:
//   qkv[si, bi, g·(Q+2)·d + j·d + e] = q of head g·Q + j,  [.. g·(Q+2)·d + Q·d + e] = k of group g,
//   [.. g·(Q+2)·d + (Q+1)·d + e] = v of group g,
// Megatron-LM's linear_qkv layout (attention.py get_query_key_value_tensors: [sq, b, ng, (np/ng+2)·hn]),
// so a column-parallel split of the QKV weight along its output dim gives each TP rank whole groups.
// With G = heads (multi-head attention, the default) a group is one head's [q | k | v].
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ops/dropout.h"
#include "engine/tensor.h"

namespace tpsp::ops {

/// Options: the number of heads in qkv, an optional key padding mask [b, s] (1 = real token,
/// 0 = padding; undefined = none), optional packed-sequence boundaries, attention-probability
/// dropout p with its key (global shape [b, heads_total, s, s], offset [0, first_head, 0, 0] on a
/// TP rank).
struct AttentionOptions {
  int64_t heads = 1;
  /// Key/value groups G in qkv (Megatron's num_query_groups); 0 = heads (multi-head attention). Query
  /// head h attends with the key and value of group h / (heads / G).
  int64_t query_groups = 0;
  Tensor key_padding_mask;
  /// Packed sequences (engine/packed_seq.h; TransformerEngine's cu_seqlens, qkv_format "thd"):
  /// empty = every batch row is one sequence; else [n + 1] boundaries of the s tokens, b must be 1,
  /// and query i sees key j only inside its own sequence (block-diagonal causal mask).
  std::vector<int64_t> cu_seqlens;
  float dropout_p = 0.f;
  DropoutKey dropout_key;
};

/// Forward result: out [s, b, heads·d] and the softmax probabilities [b, heads, s, s] (before
/// dropout) that backward needs.
struct AttentionOut {
  Tensor out;
  Tensor probs;
};

/// qkv: [s, b, G·(heads/G + 2)·d] (heads·3·d for multi-head attention). Scores q·kᵀ/√d, causal
/// (key j ≤ query i), padded keys masked, and with cu_seqlens keys of another sequence masked
/// (cu[k] ≤ j ≤ i < cu[k+1]); a query row with no visible key gives a zero output. Throws ShapeError
/// if heads is not divisible by query_groups, qkv's last dim is not a positive multiple of
/// G·(heads/G + 2), the padding mask is not [b, s], or cu_seqlens is given with b != 1 or is not
/// valid for s tokens (validate_cu_seqlens: starts at 0, strictly increasing, ends at s).
AttentionOut attention_forward(const Tensor& qkv, const AttentionOptions& opt);
/// dqkv shaped like qkv from dout [s, b, heads·d], the forward input and saved probabilities; a
/// group's dk and dv are the sums over its query heads.
Tensor attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                          const AttentionOptions& opt);

}  // namespace tpsp::ops
