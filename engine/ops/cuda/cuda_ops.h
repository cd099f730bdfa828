// GPU ops (CUDA + cuBLAS), the start of the GPU backend: compiled whenever nvcc is found, so CI
// catches compile errors; used only when a device exists. Same semantics as engine/ops (f32).
#pragma once

#include <string>

#include "engine/tensor.h"

namespace tpsp::cuda {

/// Number of visible CUDA devices; 0 when there is none or no driver, with the CUDA error text in
/// *why (e.g. "cudaErrorInsufficientDriver"). Never throws.
int device_count(std::string* why = nullptr);

/// Y = X · Wᵀ (+ b) on device 0 with cuBLAS sgemm: x [..., k], w [m, k], b [m] or undefined →
/// [..., m] on the CPU. Copies in and out (a correctness path, not a fast one).
/// Throws ShapeError on mismatched shapes and std::runtime_error naming the CUDA/cuBLAS error.
Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& b);

}  // namespace tpsp::cuda
