// Rotary position embedding (Su et al. 2021, "RoFormer"), non-interleaved as Megatron-LM's
// apply_rotary_pos_emb (megatron/core/models/common/embeddings/rotary_pos_embedding.py, rotate_half) and
// Llama apply: within each head of d dims, the pair (x_i, x_{i+d/2}) of i < d/2 is rotated by the angle
// p·θ_i, θ_i = base^(−2i/d), where p is the row's position:
//   y_i = x_i·cos − x_{i+d/2}·sin,   y_{i+d/2} = x_{i+d/2}·cos + x_i·sin.
// Positions are given per row of the sequence dim, so a sequence shard under SP passes its global
// positions and packed sequences pass positions that restart at each sequence; the angles are computed
// in double and cos/sin rounded once to float.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace tpsp::ops {

/// x: [s, b, n·d] (n heads of d dims, e.g. q or k; f32 or bf16); positions: s values ≥ 0, one per row of
/// the sequence dim (the same for every batch element); base > 0 (rotary_base, 10000 in Llama).
/// Returns the rotated tensor, x's shape and precision. Throws ShapeError when x is not 3-d, d is not
/// positive and even, x's last dim is not a multiple of d, positions does not hold s values or holds a
/// negative one, or base is not a finite number > 0.
Tensor rope_forward(const Tensor& x, const std::vector<int64_t>& positions, int64_t d, float base = 10000.f);

/// The backward of rope_forward: a rotation is orthogonal, so dx is dy rotated by the opposite angles.
/// Same arguments, shapes and errors as rope_forward.
Tensor rope_backward(const Tensor& dy, const std::vector<int64_t>& positions, int64_t d,
                     float base = 10000.f);

}  // namespace tpsp::ops
