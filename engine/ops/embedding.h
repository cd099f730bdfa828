// Token and learned position embeddings (GPT-2), with the vocab-parallel masking of
// Megatron-LM VocabParallelEmbedding (layers.py): ids outside this rank's vocabulary slice give
// zero rows, so the sum over TP ranks (g, or a reduce-scatter under SP) is the dense lookup.
#pragma once

#include "engine/tensor.h"
#include "engine/tokens.h"

namespace tpsp::ops {

/// out[si, bi, :] = wte[ids[bi, si] − vocab_start, :] when the id lies in
/// [vocab_start, vocab_start + V_local), else 0. ids: [b, s] batch-first; wte: [V_local, h];
/// returns [s, b, h] — the batch-first → sequence-first flip happens here. Ids are not range
/// checked here (validate_tokens does that once per batch).
Tensor embedding_forward(const TokenBatch& ids, const Tensor& wte, int64_t vocab_start = 0);
/// dwte [V_local, h] = scatter-add of dout [s, b, h] rows onto the ids that fall in this slice.
Tensor embedding_backward(const Tensor& dout, const TokenBatch& ids, int64_t vocab_local,
                          int64_t vocab_start = 0);

/// In place x[si, bi, :] += wpe[seq_start + si, :] for x: [s_local, b, h], wpe: [max_seq, h].
/// seq_start is this rank's first position under sequence parallelism (0 otherwise).
/// Throws ShapeError if seq_start + s_local > max_seq.
void position_embedding_add(Tensor& x, const Tensor& wpe, int64_t seq_start = 0);
/// dwpe [max_seq, h]: rows seq_start .. seq_start+s_local get Σ_b dx[si, b, :]; the rest are 0.
Tensor position_embedding_backward(const Tensor& dx, int64_t max_seq, int64_t seq_start = 0);

}  // namespace tpsp::ops
