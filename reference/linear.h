// Dense building blocks of the reference model, one process and no communication: the linear layer
// y = x·Wᵀ + b (torch.nn.functional.linear) and the MLP fc1 → GELU(tanh) → fc2 (Megatron-LM
// megatron/core/transformer/mlp.py without parallelism). They are what a ColumnParallelLinear, a
// RowParallelLinear and the TP MLP must equal when their shards are put back together
// (Shoeybi et al. 2019 §3), so the checkers' expected tensors come from here, never from lab code.
#pragma once

#include "engine/tensor.h"

namespace tpsp::reference {

/// y [..., out] = x [..., in] · wᵀ + b, with w [out, in] and b [out] (undefined: no bias).
/// Throws ShapeError when x's last dim != in or b is not [out] (names the shapes).
Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& b);

/// Gradients of linear_forward for dy [..., out]: dx [..., in] = dy·w, dw [out, in] = dyᵀ·x and
/// db [out] = Σ dy over every leading position (undefined when has_bias is false).
struct LinearGrads {
  Tensor dx, dw, db;
};
LinearGrads linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool has_bias);

/// The whole (unsharded) parameters of an MLP: w1 [ffn, h], b1 [ffn], w2 [h, ffn], b2 [h].
struct MLPParams {
  Tensor w1, b1, w2, b2;
};
/// What MLP backward needs: the input [..., h] and the pre-activation fc1 output [..., ffn].
struct MLPSaved {
  Tensor x, fc1;
};
/// Gradients of the MLP: dx [..., h] and one tensor per parameter.
struct MLPGrads {
  Tensor dx, dw1, db1, dw2, db2;
};
/// y [..., h] = GELU(x·w1ᵀ + b1)·w2ᵀ + b2; fills `saved`.
Tensor mlp_forward(const Tensor& x, const MLPParams& p, MLPSaved& saved);
MLPGrads mlp_backward(const Tensor& dy, const MLPParams& p, const MLPSaved& saved);

}  // namespace tpsp::reference
