// Dense linear algebra through BLAS: every product is one cblas_sgemm call (row-major).
#include <cblas.h>

#include <vector>

#include "engine/ops/cpu/cpu_ops.h"
#include "engine/ops/rules.h"

namespace tpsp::ops::cpu {
namespace {

/// C[M, N] = op(A) · op(B) + beta · C with row-major storage; skips BLAS for empty products (BLAS
/// rejects leading dimensions of 0). beta = 0 overwrites C (never reads it: C may be Tensor::empty),
/// beta = 1 accumulates into it.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
          const float* B, int64_t ldb, float* C, int64_t ldc, float beta = 0.f) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.f ? 0.f : C[i * ldc + j] * beta;
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.f, A, static_cast<int>(lda), B,
              static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}

/// The f32 operand of a GEMM: bf16 operands are widened (sgemm reads f32).
Tensor f32(const Tensor& t) {
  return t.to(DType::f32);
}

}  // namespace

Tensor CpuOps::matmul_forward(const Tensor& x_in, const Tensor& w_in) {
  const Tensor x = f32(x_in), w = f32(w_in);
  const int64_t k = x.size(-1), m = w.size(0), n = leading_rows(x);
  Shape out_shape = x.shape();
  out_shape.back() = m;
  Tensor y = Tensor::empty(out_shape);
  // Y[n, m] = X[n, k] · W[m, k]ᵀ
  gemm(false, true, n, m, k, x.data(), k, w.data(), k, y.data(), m);
  return y;
}

Tensor CpuOps::matmul_dgrad(const Tensor& dy_in, const Tensor& w_in) {
  const Tensor dy = f32(dy_in), w = f32(w_in);
  const int64_t m = w.size(0), k = w.size(1), n = leading_rows(dy);
  Shape x_shape = dy.shape();
  x_shape.back() = k;
  Tensor dx = Tensor::empty(x_shape);
  // dX[n, k] = dY[n, m] · W[m, k]
  gemm(false, false, n, k, m, dy.data(), m, w.data(), k, dx.data(), k);
  return dx;
}

void CpuOps::matmul_wgrad(const Tensor& dy_in, const Tensor& x_in, Tensor& dw) {
  const Tensor dy = f32(dy_in), x = f32(x_in);
  const int64_t n = leading_rows(x), k = x.size(-1), m = dw.size(0);
  // dW[m, k] += dY[n, m]ᵀ · X[n, k]  (β = 1: the GEMM accumulates into the gradient buffer)
  gemm(true, false, m, k, n, dy.data(), m, x.data(), k, dw.data(), k, 1.f);
}

MatmulGrads CpuOps::matmul_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool need_dx,
                                    bool need_dw) {
  MatmulGrads g;
  if (need_dx) g.dx = matmul_dgrad(dy, w);
  if (need_dw) {
    g.dw = Tensor(w.shape());
    matmul_wgrad(dy, x, g.dw);
  }
  return g;
}

void CpuOps::bias_add_forward(Tensor& y, const Tensor& b) {
  const int64_t m = b.size(0), n = leading_rows(y);
  float* __restrict py = y.data();  // y and b never overlap: the inner loop vectorises
  const float* __restrict pb = b.data();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) py[i * m + j] += pb[j];
}

Tensor CpuOps::bias_add_backward(const Tensor& dy) {
  const int64_t m = dy.size(-1), n = leading_rows(dy);
  // Column sums accumulated in double, in row order, then rounded once.
  std::vector<double> acc(static_cast<std::size_t>(m), 0.0);
  const float* p = dy.data();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) acc[static_cast<std::size_t>(j)] += p[i * m + j];
  Tensor db({m});
  for (int64_t j = 0; j < m; ++j) db.data()[j] = static_cast<float>(acc[static_cast<std::size_t>(j)]);
  return db;
}

}  // namespace tpsp::ops::cpu
