// Dense linear algebra: Y = X·Wᵀ and its gradients (CPU: OpenBLAS sgemm, engine/ops/cpu/matmul.cpp;
// no hand-written GEMM). bf16 inputs are computed in f32 (engine/ops/dispatch.cpp).
#pragma once

#include "engine/tensor.h"

namespace tpsp::ops {

/// Y = X · Wᵀ, the weight layout of torch.nn.functional.linear and Megatron's linear layers.
/// x: [..., k] (leading dims flattened to n rows, e.g. [s, b, h]); w: [m, k]; returns [..., m].
/// Throws ShapeError when x's last dim != w's dim 1 (names both shapes).
Tensor matmul_forward(const Tensor& x, const Tensor& w);

/// The data gradient of Y = X · Wᵀ: dX [..., k] = dY [..., m] · W [m, k]. ShapeError on mismatched shapes.
Tensor matmul_dgrad(const Tensor& dy, const Tensor& w);
/// The weight gradient of Y = X · Wᵀ, ACCUMULATED into the float32 buffer dw [m, k]: dw += dYᵀ · X
/// (one GEMM with β = 1: Megatron's gradient_accumulation_fusion into main_grad, so micro-batches and
/// several backward passes add up without a temporary). ShapeError on mismatched shapes or a dw that
/// is not f32.
void matmul_wgrad(const Tensor& dy, const Tensor& x, Tensor& dw);

/// Gradients of Y = X · Wᵀ given dY: dX = dY · W ([..., k]) and dW = dYᵀ · X ([m, k]), fresh tensors.
/// Either can be skipped (left undefined) with need_dx / need_dw = false — a frozen weight still
/// needs dX (docs/known_cases.md L1). Throws ShapeError on inconsistent shapes.
struct MatmulGrads {
  Tensor dx;
  Tensor dw;
};
MatmulGrads matmul_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool need_dx = true,
                            bool need_dw = true);

/// In place y[..., m] += b[m]. Throws ShapeError if y's last dim != b's length.
void bias_add_forward(Tensor& y, const Tensor& b);
/// db[m] = Σ over all leading positions of dy[..., m].
Tensor bias_add_backward(const Tensor& dy);

}  // namespace tpsp::ops
