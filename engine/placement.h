// Placement: how one rank's local tensor relates to the whole (logical) tensor, in the vocabulary of
// PyTorch DTensor (torch.distributed.tensor Replicate / Shard(dim) / Partial):
//   Replicate   every rank holds the whole tensor;
//   Shard(d)    rank r of n holds chunk r of dim d (equal chunks, rank order): [.., k, ..] of [.., n·k, ..];
//   Partial     every rank holds a tensor of the whole shape, and the whole is their sum.
// Used by the checkers to map a rank's dump onto the expected whole tensor.
#pragma once

#include <string>

namespace tpsp {

struct Placement {
  enum class Kind { replicate, shard, partial };
  Kind kind = Kind::replicate;
  int dim = 0;  ///< the split dimension of a Shard (0 otherwise)

  static Placement Replicate() { return {Kind::replicate, 0}; }
  /// Chunk r of dim d on rank r.
  static Placement Shard(int d) { return {Kind::shard, d}; }
  static Placement Partial() { return {Kind::partial, 0}; }
  bool is_replicate() const { return kind == Kind::replicate; }
  bool is_shard() const { return kind == Kind::shard; }
  bool is_partial() const { return kind == Kind::partial; }
  /// "replicated", "sharded on dim 2", "partial sum".
  std::string str() const {
    if (is_shard()) return "sharded on dim " + std::to_string(dim);
    return is_partial() ? "partial sum" : "replicated";
  }
  bool operator==(const Placement&) const = default;
};

}  // namespace tpsp
