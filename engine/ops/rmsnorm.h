// RMSNorm over the last dimension (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization"): the
// Llama block's norm, LayerNorm without the mean and the bias. Megatron-LM's RMSNorm
// (megatron/core/transformer/torch_norm.py; TransformerEngine's te.pytorch.RMSNorm) computes the same.
#pragma once

#include "engine/tensor.h"

namespace tpsp::ops {

/// Forward result: y = x·rstd·w with rstd = 1/√(mean(x²) + eps) per row, and rstd [n] (f32,
/// n = numel / h, 0 when h = 0) that backward needs.
struct RMSNormOut {
  Tensor y;
  Tensor rstd;
};

/// x: [..., h] (f32 or bf16); weight: [h]. y has x's shape and the inputs' precision (bf16 when x and
/// weight are both bf16); the statistics accumulate in double and rstd is f32. Throws ShapeError when
/// x has no dimension, weight is not [h], or eps is negative or not finite.
RMSNormOut rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps = 1e-5f);

/// Backward of rmsnorm_forward for dy [..., h]: returns dx [..., h] (bf16 when dy and x are both bf16,
/// else f32) and adds Σ_rows dy·x̂ (x̂ = x·rstd)
/// into dweight [h], an f32 gradient buffer (accumulated like matmul_wgrad's dw: a main_grad). Under
/// sequence parallelism a rank holds only its tokens, so its dweight is a partial sum to be
/// all-reduced over TP (Megatron-LM finalize_model_grads). Throws ShapeError when dy is not x's
/// shape, weight or dweight is not [h], rstd is not [n], or dweight is not f32.
Tensor rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                        Tensor& dweight);

}  // namespace tpsp::ops
