// The GPU backend's entry points (CUDA + cuBLAS): compiled whenever nvcc is found (cmake/cuda.cmake,
// library tpsp_cuda), so CI catches compile errors; used only when a device exists.
//
// A program that wants cuda tensors calls tpsp::cuda::register_backend() once, before its first cuda
// tensor: it installs the CUDA storage hooks of Tensor (engine/device_hooks.h) and the CUDA ops
// behind engine/ops (engine/ops/device_ops.h). The call is explicit on purpose: a static
// initializer in a static library is dropped by the linker when nothing references its object.
#pragma once

#include <string>

#include "engine/tensor.h"

namespace tpsp::cuda {

/// Number of visible CUDA devices; 0 when there is none or no driver, with the CUDA error text in
/// *why (e.g. "cudaErrorInsufficientDriver"). Never throws.
int device_count(std::string* why = nullptr);

/// Registers the CUDA storage and ops for this process, on CUDA device `device` (made current on
/// every thread that calls into the backend, a ProcessGroup's comm thread included). Idempotent
/// for the same device. Works without a device too: the first cuda tensor then raises the CUDA
/// error (std::runtime_error, e.g. "cudaSetDevice(0): cudaErrorInsufficientDriver ..."). Throws ShapeError
/// for a negative device, or a device other than the one registered first.
void register_backend(int device = 0);

/// Y = X · Wᵀ (+ b) on the GPU with cuBLAS: x [..., k], w [m, k], b [m] or undefined, all on the
/// CPU → [..., m] on the CPU (copies in and out: a smoke path). Needs register_backend().
/// Throws ShapeError on mismatched shapes and std::runtime_error naming the CUDA/cuBLAS error.
Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& b);

}  // namespace tpsp::cuda
