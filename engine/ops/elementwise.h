// Element-wise ops: residual add, scaling, GELU (tanh approximation).
#pragma once

#include "engine/tensor.h"

namespace tpsp::ops {

/// Residual add: returns a + b (same shape; ShapeError names both shapes otherwise).
/// Backward is the identity to both inputs.
Tensor add(const Tensor& a, const Tensor& b);
/// In place a += b (same shape).
void add_(Tensor& a, const Tensor& b);
/// In place a *= s.
void scale_(Tensor& a, float s);

/// GELU, tanh approximation (GPT-2, Megatron's openai_gelu; PyTorch gelu(approximate="tanh")):
/// y = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). Any shape.
Tensor gelu_forward(const Tensor& x);
/// dx = dy · gelu'(x), with x the forward input. Same shape as x.
Tensor gelu_backward(const Tensor& dy, const Tensor& x);

}  // namespace tpsp::ops
