// Softmax over the last dimension, numerically stable (max subtracted).
#pragma once

#include "engine/tensor.h"

namespace tpsp::ops {

/// y = softmax(x) along the last dim; any shape [..., n]. Rows that are all −inf give zeros.
Tensor softmax_forward(const Tensor& x);
/// dx = y ⊙ (dy − Σ_j dy_j·y_j) row-wise, with y the forward output.
Tensor softmax_backward(const Tensor& dy, const Tensor& y);

}  // namespace tpsp::ops
