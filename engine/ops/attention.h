// Causal multi-head self-attention on the sequence-first layout (Vaswani et al. 2017; GPT-2).
//
// qkv holds, for every head, its query, key and value blocks side by side:
//   qkv[si, bi, head·3d + 0·d + j] = q, [.. + 1·d + j] = k, [.. + 2·d + j] = v,
// the per-head grouping of Megatron-LM's linear_qkv, so that a column-parallel split of the QKV
// weight along its output dim gives each TP rank whole heads.
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

/// qkv: [s, b, heads·3·d]. Scores q·kᵀ/√d, causal (key j ≤ query i), padded keys masked, and with
/// cu_seqlens keys of another sequence masked (cu[k] ≤ j ≤ i < cu[k+1]); a query row with no
/// visible key gives a zero output. Throws ShapeError if qkv's last dim is not divisible by
/// 3·heads, the padding mask is not [b, s], or cu_seqlens is given with b != 1 or is not valid for
/// s tokens (validate_cu_seqlens: starts at 0, strictly increasing, ends at s).
AttentionOut attention_forward(const Tensor& qkv, const AttentionOptions& opt);
/// dqkv [s, b, heads·3·d] from dout [s, b, heads·d], the forward input and saved probabilities.
Tensor attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& probs,
                          const AttentionOptions& opt);

}  // namespace tpsp::ops
