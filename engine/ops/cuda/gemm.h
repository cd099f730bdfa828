// Row-major GEMMs on the GPU through cuBLAS (cublasGemmEx / cublasGemmStridedBatchedEx with
// CUBLAS_COMPUTE_32F: f32 accumulation, no TF32), the GPU counterpart of engine/ops/cpu/matmul.cpp's
// cblas_sgemm. cuBLAS is column-major: a row-major C = op(A)·op(B) is computed as the column-major
// Cᵀ = op(B)ᵀ·op(A)ᵀ, i.e. the operands are passed swapped with the same transpose flags.
#pragma once

#include <cstdint>

#include "engine/tensor.h"

namespace tpsp::cuda {

/// Row-major C[M, N] = alpha·op(A)·op(B) + beta·C with op(A) [M, K], op(B) [K, N]; A and B are both
/// `ab` (f32 or bf16), C is f32. beta = 0 never reads C. K = 0 gives beta·C. Throws ShapeError when
/// an extent or leading dimension exceeds cuBLAS's int range, std::runtime_error naming the cuBLAS
/// status on failure.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const void* A,
          int64_t lda, const void* B, int64_t ldb, float beta, float* C, int64_t ldc, DType ab = DType::f32);

/// `batch` independent f32 GEMMs as above, operand z at A + z·stride_a (elements), and so on.
void gemm_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                  int64_t lda, int64_t stride_a, const float* B, int64_t ldb, int64_t stride_b, float beta,
                  float* C, int64_t ldc, int64_t stride_c, int64_t batch);

}  // namespace tpsp::cuda
