// Host-side helpers of the GPU ops (cuda_ops.cpp, attention.cpp): device pointers of f32 cuda
// tensors, and the dropout index of a DropoutKey.
#pragma once

#include "engine/ops/cuda/dropout_index.h"
#include "engine/ops/dropout.h"
#include "engine/tensor.h"

namespace tpsp::cuda {

/// The device pointer of an f32 cuda tensor; ShapeError naming `what` otherwise (an internal rule:
/// the dispatcher hands the device ops f32 cuda tensors).
float* dptr(Tensor& t, const char* what);
const float* dptr(const Tensor& t, const char* what);

/// Where a local tensor of `local_shape` sits in the key's global tensor, with the key and p: the
/// geometry of ops::rules::dropout (its ShapeError for p ∉ [0, 1) or a local tensor that does not fit),
/// and a ShapeError for more than DropoutIndex::kMaxDims dims (the kernels' limit).
DropoutIndex make_dropout_index(const Shape& local_shape, float p, const ops::DropoutKey& key);

}  // namespace tpsp::cuda
