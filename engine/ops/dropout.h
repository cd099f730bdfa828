// Dropout with shard-invariant masks. The keep decision of an element is
// uniform(seed, stream, global flat index) >= p, where the global flat index is computed from the
// element's coordinates in the *whole* (unsharded) tensor. A sequence shard [s/tp, b, h] or a
// head shard of attention probabilities therefore draws exactly the mask bits the single-process
// reference draws for the same elements (docs/architecture.md idea 4).
#pragma once

#include <cstdint>
#include <string>

#include "engine/tensor.h"

namespace tpsp::ops {

/// Identifies a mask: the generator key (seed, stream) and where the local tensor sits inside the
/// whole one: global_shape (e.g. [s, b, h]) and offset (e.g. [rank·s/tp, 0, 0]). An empty
/// global_shape means "the local tensor is the whole tensor".
struct DropoutKey {
  uint64_t seed = 0;
  uint64_t stream = 0;
  Shape global_shape;
  Shape offset;
};

/// Stream id of a dropout site at a training iteration, e.g. ("layers.0.hidden_after_attn", 3).
uint64_t dropout_stream(const std::string& site, int64_t iteration);

/// Mask with the local tensor's shape: 0 for dropped elements, 1/(1−p) for kept ones.
/// Throws ShapeError if p ∉ [0, 1) or the local shape/offset do not fit inside global_shape.
Tensor dropout_mask(const Shape& local_shape, float p, const DropoutKey& key);
/// y = x ⊙ mask. p == 0 returns x unchanged (a copy).
Tensor dropout_forward(const Tensor& x, float p, const DropoutKey& key);
/// dx = dy ⊙ mask (the mask is regenerated from the key, never stored).
Tensor dropout_backward(const Tensor& dy, float p, const DropoutKey& key);

}  // namespace tpsp::ops
