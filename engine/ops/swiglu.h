// SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer"): the Llama MLP's activation on the fused fc1
// output, as Megatron-LM computes it (megatron/core/transformer/mlp.py, glu with F.silu): the last dim
// holds [gate | up], each f wide, chunked locally; y = silu(gate) ⊙ up with silu(g) = g·σ(g). Under
// tensor parallelism a rank's fc1 shard must hold the r-th piece of gate AND of up, so that its local
// [gate_r | up_r] chunk pairs them (a contiguous split of [W_gate; W_up] gives rank 0 only gate rows).
#pragma once

#include "engine/tensor.h"

namespace tpsp::ops {

/// x: [..., 2f] = [gate | up] (f32 or bf16); returns y [..., f] = silu(gate)·up, in x's precision.
/// Throws ShapeError when x has no dimension or its last dim is odd.
Tensor swiglu_forward(const Tensor& x);

/// dx [..., 2f] = [dy·up·silu'(gate) | dy·silu(gate)] for dy [..., f] and the forward input x, with
/// silu'(g) = σ(g)·(1 + g·(1 − σ(g))). bf16 when dy and x are both bf16. Throws ShapeError when dy is not
/// x's shape with the last dim halved.
Tensor swiglu_backward(const Tensor& dy, const Tensor& x);

}  // namespace tpsp::ops
