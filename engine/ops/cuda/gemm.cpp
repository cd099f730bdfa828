// cuBLAS GEMMs (gemm.h): one handle per thread (a cuBLAS handle must not be used by two threads at
// once), on the legacy default stream, created on first use.
#include "engine/ops/cuda/gemm.h"

#include <cublas_v2.h>

#include <limits>
#include <memory>
#include <string>

#include "engine/error.h"
#include "engine/ops/cuda/cuda_check.h"

namespace tpsp::cuda {
namespace {

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": " + cublasGetStatusName(s) + " (" +
                             cublasGetStatusString(s) + ")");
}

struct HandleDeleter {
  void operator()(cublasContext* h) const { cublasDestroy(h); }
};

cublasHandle_t handle() {
  thread_local std::unique_ptr<cublasContext, HandleDeleter> h;
  use_process_device();
  if (!h) {
    cublasHandle_t raw = nullptr;
    check_cublas(cublasCreate(&raw), "cublasCreate");
    h.reset(raw);  // default math mode: with CUBLAS_COMPUTE_32F, no TF32
  }
  return h.get();
}

int as_int(int64_t v, const char* what) {
  TPSP_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "cuBLAS GEMM: ", what, " = ", v,
             " is outside cuBLAS's int range");
  return static_cast<int>(v);
}

cudaDataType_t cuda_type(DType dt) {
  TPSP_CHECK(dt == DType::f32 || dt == DType::bf16, "cuBLAS GEMM: operands are f32 or bf16, got ",
             dtype_name(dt));
  return dt == DType::f32 ? CUDA_R_32F : CUDA_R_16BF;
}

/// K = 0: C = beta·C (beta is 0 or 1 in this engine: zero C, or leave it).
void empty_product(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  if (beta == 1.f) return;
  TPSP_CHECK(beta == 0.f, "cuBLAS GEMM with K = 0: beta = ", beta, " (only 0 or 1 are used)");
  check_cuda(cudaMemset2D(C, static_cast<std::size_t>(ldc) * 4, 0, static_cast<std::size_t>(N) * 4,
                          static_cast<std::size_t>(M)),
             "cudaMemset2D (GEMM with K = 0)");
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const void* A,
          int64_t lda, const void* B, int64_t ldb, float beta, float* C, int64_t ldc, DType ab) {
  if (M == 0 || N == 0) return;
  if (K == 0) return empty_product(M, N, beta, C, ldc);
  const cudaDataType_t t = cuda_type(ab);
  check_cublas(cublasGemmEx(handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                            trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, as_int(N, "N"), as_int(M, "M"),
                            as_int(K, "K"), &alpha, B, t, as_int(ldb, "ldb"), A, t, as_int(lda, "lda"), &beta,
                            C, CUDA_R_32F, as_int(ldc, "ldc"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

void gemm_batched(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                  int64_t lda, int64_t stride_a, const float* B, int64_t ldb, int64_t stride_b, float beta,
                  float* C, int64_t ldc, int64_t stride_c, int64_t batch) {
  if (M == 0 || N == 0 || batch == 0) return;
  TPSP_CHECK(K > 0, "cuBLAS batched GEMM: K = 0 is not used by the engine");
  check_cublas(cublasGemmStridedBatchedEx(handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, as_int(N, "N"), as_int(M, "M"),
                                          as_int(K, "K"), &alpha, B, CUDA_R_32F, as_int(ldb, "ldb"), stride_b,
                                          A, CUDA_R_32F, as_int(lda, "lda"), stride_a, &beta, C, CUDA_R_32F,
                                          as_int(ldc, "ldc"), stride_c, as_int(batch, "batch"),
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

}  // namespace tpsp::cuda
