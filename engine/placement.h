// Placement: how one rank's local tensor relates to the whole (logical) tensor, in the vocabulary of
// PyTorch DTensor (torch.distributed.tensor Replicate / Shard(dim) / Partial):
//   Replicate            every rank holds the whole tensor;
//   Shard(d)             rank r of n holds chunk r of dim d (equal chunks, rank order): [.., k, ..] of
//                        [.., n·k, ..];
//   Shard(d, stride)     dim d holds `stride` equal blocks and rank r holds chunk r of each, in block
//                        order (Megatron-LM tensor_parallel/layers.py `stride`; DTensor _StridedShard):
//                        the fused [W_gate; W_up] of SwiGLU, stride 2, gives rank r [gate_r; up_r];
//   ShardOverGroups(d, g) the tp ranks form g groups of tp/g consecutive ranks; group j holds chunk j of
//                        g, the same on every rank of the group (a 2-D mesh's (Shard(d), Replicate()) in
//                        DTensor): grouped-query attention's k and v when groups < tp (Megatron-LM
//                        attention.py, the QKV activation gathered over TP and each rank keeping its
//                        group);
//   Partial              every rank holds a tensor of the whole shape, and the whole is their sum.
// Used by the engine to cut a rank's shard of a whole weight, by the checkers to map a rank's dump onto
// the expected whole tensor, and by tpsp-shards to draw it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace tpsp {

struct Placement {
  enum class Kind { replicate, shard, partial };
  Kind kind = Kind::replicate;
  int dim = 0;     ///< the split dimension of a Shard (0 otherwise)
  int stride = 1;  ///< Shard: the dim's number of equal blocks, a rank holding its chunk of each
  int groups = 0;  ///< Shard: 0 = one chunk per rank; g = one chunk per group of tp/g consecutive ranks

  static Placement Replicate() { return {Kind::replicate}; }
  /// Chunk r of dim d on rank r; with stride k, chunk r of each of the dim's k blocks.
  static Placement Shard(int d, int stride = 1) { return {Kind::shard, d, stride}; }
  /// Chunk j of `groups` on every rank of group j = r / (tp / groups).
  static Placement ShardOverGroups(int d, int groups) { return {Kind::shard, d, 1, groups}; }
  static Placement Partial() { return {Kind::partial}; }
  bool is_replicate() const { return kind == Kind::replicate; }
  bool is_shard() const { return kind == Kind::shard; }
  bool is_partial() const { return kind == Kind::partial; }

  /// How many different shards tp ranks hold: tp, or `groups`.
  int shards(int tp) const { return groups > 0 ? groups : tp; }
  /// Which of them rank `rank` holds: the rank, or its group rank / (tp / groups).
  int shard_index(int rank, int tp) const { return groups > 0 && groups <= tp ? rank / (tp / groups) : rank; }
  /// "replicated", "partial sum", "sharded on dim 2", "sharded on dim 0 with stride 2",
  /// "sharded on dim 2 over 2 groups (replicated within a group)".
  std::string str() const;
  /// "Replicate", "Partial", "Shard(2)", "Shard(0, stride=2)", "ShardOverGroups(2, groups=2)".
  std::string code() const;
  bool operator==(const Placement&) const = default;
};

/// Throws ShapeError unless `placement` can lay out a whole tensor of `shape` over tp ranks: the dim
/// exists, groups divides tp, and size(dim) is divisible by stride · shards(tp) — the message names the
/// rule and the values ("dim 0 of [12, 4] (12) is not divisible by stride 2 × tp 4").
void check_placement(const Placement& placement, const Shape& shape, int tp);

/// The element ranges [start, stop) of dim `placement.dim` that rank `rank` of tp holds: one range for
/// a plain shard, `stride` ranges with a stride, the whole dim for Replicate/Partial. Throws as
/// check_placement.
std::vector<std::pair<int64_t, int64_t>> shard_ranges(const Placement& placement, const Shape& shape,
                                                      int rank, int tp);

/// "rows [12, 24) of dim 0", "indices [2, 4) and [6, 8) of dim 2", or str() when not a shard.
std::string shard_range_str(const Placement& placement, const Shape& shape, int rank, int tp);

/// The local tensor rank `rank` of tp holds of `whole` under `placement` (a copy): the ranges of
/// shard_ranges concatenated in order along the dim; the whole for Replicate and Partial. Throws as
/// check_placement.
Tensor shard_of(const Tensor& whole, const Placement& placement, int rank, int tp);

/// The whole tensor from the rank-order concatenation of every rank's shard along the dim (what an
/// all-gather of the shards returns): the gathered tensor itself for a plain shard; with a stride the
/// blocks put back in order ([gate_0; up_0; gate_1; up_1] → [gate_0; gate_1; up_0; up_1]); over groups,
/// the first rank's piece of each group. `gathered` itself when not a shard. Throws ShapeError when the
/// dim is not divisible by tp · stride.
Tensor whole_of_gathered(const Tensor& gathered, const Placement& placement, int tp);

/// The whole tensor's index of element `local` (an index of rank `rank`'s shard): the shard's dim
/// shifted into its range.
std::vector<int64_t> global_index(std::vector<int64_t> local, const Placement& placement, const Shape& whole,
                                  int rank, int tp);

}  // namespace tpsp
