// LayerNorm over the last dimension (Ba et al. 2016; torch.nn.functional.layer_norm).
#pragma once

#include "engine/tensor.h"

namespace tpsp::ops {

/// Forward result: y = (x − mean)·rstd·γ + β, plus the per-row statistics backward needs.
/// mean and rstd have shape [n] with n = numel / h (rstd = 1/√(var + eps), biased variance).
struct LayerNormOut {
  Tensor y;
  Tensor mean;
  Tensor rstd;
};
/// x: [..., h]; gamma, beta: [h]. Throws ShapeError if gamma/beta are not [h].
LayerNormOut layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps = 1e-5f);

/// Gradients for dy [..., h]: dx [..., h], dgamma [h], dbeta [h]. Under sequence parallelism the
/// caller holds only its tokens, so dgamma/dbeta are partial sums to be all-reduced over TP.
struct LayerNormGrads {
  Tensor dx;
  Tensor dgamma;
  Tensor dbeta;
};
LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                  const Tensor& rstd);

}  // namespace tpsp::ops
