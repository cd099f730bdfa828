// The scalars of one AdamW step (engine/ops/adamw.h), as a plain struct that host code and CUDA
// kernels both include: formed once by ops::adamw_scalars (engine/ops/rules.h) in double and rounded
// to float where they meet the tensors (PyTorch's Python floats).
#pragma once

namespace tpsp::ops {

/// decay = 1 − lr·wd; β1, 1 − β1, β2, 1 − β2; neg_step_size = −lr/(1 − β1ᵗ); bc2_sqrt = √(1 − β2ᵗ); eps.
struct AdamWScalars {
  float decay, beta1, one_minus_b1, beta2, one_minus_b2, neg_step_size, bc2_sqrt, eps;
};

}  // namespace tpsp::ops
