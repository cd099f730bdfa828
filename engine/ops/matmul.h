// Dense linear algebra on the CPU through BLAS (OpenBLAS sgemm). No hand-written GEMM.
#pragma once

#include "engine/tensor.h"

namespace tpsp::ops {

/// Y = X · Wᵀ, the weight layout of torch.nn.functional.linear and Megatron's linear layers.
/// x: [..., k] (leading dims flattened to n rows, e.g. [s, b, h]); w: [m, k]; returns [..., m].
/// Throws ShapeError when x's last dim != w's dim 1 (names both shapes).
Tensor matmul_forward(const Tensor& x, const Tensor& w);

/// Gradients of Y = X · Wᵀ given dY: dX = dY · W ([..., k]) and dW = dYᵀ · X ([m, k]).
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
