// Packed sequences (the "thd" layout of TransformerEngine and Megatron-LM): n sequences of
// different lengths concatenated along the token dim into one row, b = 1, with the cumulative
// boundaries cu_seqlens = [0, T_0, T_0 + T_1, …, T] ([n + 1] ints) telling attention where each
// sequence starts, so that no token attends across a boundary (Megatron-LM
// megatron/core/packed_seq_params.py PackedSeqParams, qkv_format = "thd"; TransformerEngine's
// varlen attention).
//
// Under sequence parallelism the token dim is the one split over TP, so the packed total T must be
// divisible by tp. Like Megatron's data pipeline under SP (its cu_seqlens_q_padded), pack_sequences
// pads EACH sequence of length l to the next multiple m·⌈l/m⌉ of m = tp (Megatron pads to a
// multiple of tp·2·cp with context parallelism; there is none here): then T = Σ padded lengths is a
// multiple of tp, and every sequence starts at a multiple of m. Padding tokens sit after their
// sequence's real tokens, inside its boundaries: causal attention never lets a real token see them,
// their targets are ignore_index −100, so they add nothing to the loss or to any gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tokens.h"

namespace tpsp {

/// The boundaries of the packed sequences in the token dim, padding included (Megatron's
/// cu_seqlens_q_padded = cu_seqlens_kv_padded: self-attention, one layout for q and kv).
struct PackedSeqParams {
  std::vector<int64_t> cu_seqlens;  ///< [n + 1]: 0 = cu[0] < cu[1] < … < cu[n] = T
  /// Number of sequences n.
  int64_t count() const { return cu_seqlens.empty() ? 0 : static_cast<int64_t>(cu_seqlens.size()) - 1; }
  /// Length of sequence k (padding included): cu[k+1] − cu[k].
  int64_t length(int64_t k) const { return cu_seqlens[k + 1] - cu_seqlens[k]; }
};

/// Throws ShapeError unless cu holds at least one sequence, starts at 0, is strictly increasing and
/// ends at `total` tokens; the message names the rule, the index and the values, prefixed by `what`
/// (e.g. "attention_forward: cu_seqlens[2] = 5 is not greater than cu_seqlens[1] = 5: every packed
/// sequence needs at least one token").
void validate_cu_seqlens(const std::vector<int64_t>& cu, int64_t total, const char* what);

/// For each token t of [0, T) the index k of the sequence holding it (cu[k] <= t < cu[k+1]).
/// cu must be valid (validate_cu_seqlens).
std::vector<int64_t> packed_sequence_index(const std::vector<int64_t>& cu);

/// A contiguous run of rows of one sequence inside a rank's rows: `rows` rows starting at local row
/// `row`, whose positions within their sequence start at `position`.
struct PositionRun {
  int64_t row, position, rows;
};
/// The runs covering the global token rows [row_begin, row_end) (a rank's SP shard, or all T):
/// positions restart at 0 at every boundary of cu (learned position embeddings per sequence, as
/// Megatron's position_ids of a packed batch). cu must be valid and row_end <= cu.back().
std::vector<PositionRun> packed_position_runs(const std::vector<int64_t>& cu, int64_t row_begin,
                                              int64_t row_end);

/// A packed micro-batch: ids and targets [1, T] batch-first, the boundaries, and each sequence's
/// real (unpadded) length.
struct PackedBatch {
  TokenBatch ids, targets;
  PackedSeqParams params;
  std::vector<int64_t> seqlens;  ///< [n] lengths before padding
};

/// Concatenates the sequences ids[k] (with their targets[k], same length, ≥ 1 token each), padding
/// each one with id `pad_id` and target −100 up to the next multiple of `pad_multiple` (tp under
/// SP, 1 for none). Throws ShapeError for no sequence, an empty sequence, ids and targets of
/// different counts or lengths, or pad_multiple < 1. Ids and targets are not range-checked here
/// (the model does that).
PackedBatch pack_sequences(const std::vector<std::vector<int64_t>>& ids,
                           const std::vector<std::vector<int64_t>>& targets, int64_t pad_multiple,
                           int64_t pad_id = 0);

}  // namespace tpsp
