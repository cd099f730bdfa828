// Dense linear algebra through BLAS: every product is one cblas_sgemm call (row-major).
#include "engine/ops/matmul.h"

#include <cblas.h>

#include <array>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/ops/cpu/ops.h"

namespace tpsp::ops::cpu {
namespace {

/// Rows of a [..., k] tensor flattened to a matrix: numel / last dim (0 when the last dim is 0).
int64_t leading_rows(const Tensor& t) {
  const int64_t last = t.size(-1);
  return last == 0 ? shape_numel(Shape(t.shape().begin(), t.shape().end() - 1)) : t.numel() / last;
}

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

/// Checks x [..., k], w [m, k] and dy [..., m] for `op`; returns {n (rows), k, m}.
std::array<int64_t, 3> grad_dims(const Tensor& dy, const Tensor& x_or_shape, const Shape& w_shape,
                                 const char* op) {
  TPSP_CHECK(x_or_shape.dim() >= 1 && w_shape.size() == 2, op, ": x must be [..., k] and w [m, k], got x ",
             shape_str(x_or_shape.shape()), " and w ", shape_str(w_shape));
  const int64_t k = x_or_shape.size(-1), m = w_shape[0];
  TPSP_CHECK(w_shape[1] == k, op, ": x ", shape_str(x_or_shape.shape()), " has last dim ", k, " but w ",
             shape_str(w_shape), " has dim 1 = ", w_shape[1]);
  Shape y_shape = x_or_shape.shape();
  y_shape.back() = m;
  check_shape(dy, y_shape, (std::string(op) + ": dy").c_str());
  return {leading_rows(x_or_shape), k, m};
}

}  // namespace

Tensor matmul_forward(const Tensor& x, const Tensor& w) {
  TPSP_CHECK(x.dim() >= 1 && w.dim() == 2, "matmul_forward: x must be [..., k] and w [m, k], got x ",
             shape_str(x.shape()), " and w ", shape_str(w.shape()));
  const int64_t k = x.size(-1), m = w.size(0);
  TPSP_CHECK(w.size(1) == k, "matmul_forward: x ", shape_str(x.shape()), " has last dim ", k, " but w ",
             shape_str(w.shape()), " has dim 1 = ", w.size(1));
  const int64_t n = leading_rows(x);
  Shape out_shape = x.shape();
  out_shape.back() = m;
  Tensor y = Tensor::empty(out_shape);
  // Y[n, m] = X[n, k] · W[m, k]ᵀ
  gemm(false, true, n, m, k, x.data(), k, w.data(), k, y.data(), m);
  return y;
}

Tensor matmul_dgrad(const Tensor& dy, const Tensor& w) {
  TPSP_CHECK(dy.dim() >= 1 && w.dim() == 2 && dy.size(-1) == w.size(0),
             "matmul_dgrad: dy must be [..., m] and w [m, k], got dy ", shape_str(dy.shape()), " and w ",
             shape_str(w.shape()));
  const int64_t m = w.size(0), k = w.size(1), n = leading_rows(dy);
  Shape x_shape = dy.shape();
  x_shape.back() = k;
  Tensor dx = Tensor::empty(x_shape);
  // dX[n, k] = dY[n, m] · W[m, k]
  gemm(false, false, n, k, m, dy.data(), m, w.data(), k, dx.data(), k);
  return dx;
}

void matmul_wgrad(const Tensor& dy, const Tensor& x, Tensor& dw) {
  const auto [n, k, m] = grad_dims(dy, x, dw.shape(), "matmul_wgrad");
  // dW[m, k] += dY[n, m]ᵀ · X[n, k]  (β = 1: the GEMM accumulates into the gradient buffer)
  gemm(true, false, m, k, n, dy.data(), m, x.data(), k, dw.data(), k, 1.f);
}

MatmulGrads matmul_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool need_dx, bool need_dw) {
  grad_dims(dy, x, w.shape(), "matmul_backward");
  MatmulGrads g;
  if (need_dx) g.dx = matmul_dgrad(dy, w);
  if (need_dw) {
    g.dw = Tensor(w.shape());
    matmul_wgrad(dy, x, g.dw);
  }
  return g;
}

void bias_add_forward(Tensor& y, const Tensor& b) {
  TPSP_CHECK(y.dim() >= 1 && b.dim() == 1 && y.size(-1) == b.size(0), "bias_add_forward: y ",
             shape_str(y.shape()), " needs a bias of its last dim, got b ", shape_str(b.shape()));
  const int64_t m = b.size(0), n = leading_rows(y);
  float* __restrict py = y.data();  // y and b never overlap: the inner loop vectorises
  const float* __restrict pb = b.data();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) py[i * m + j] += pb[j];
}

Tensor bias_add_backward(const Tensor& dy) {
  TPSP_CHECK(dy.dim() >= 1, "bias_add_backward: dy must be [..., m], got ", shape_str(dy.shape()));
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
