// Closed-form checks of Y = X·Wᵀ, its gradients and the bias add, against explicit double loops.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/error.h"
#include "engine/ops/matmul.h"
#include "tests/ops/helpers.h"

using namespace tpsp;

namespace {

// sgemm accumulates k float products; the standard bound |ŷ − y| ≤ γ_k·Σ|a_i b_i| with
// γ_k ≈ k·u, u = 2⁻²⁴, holds for any summation order. We allow twice that bound plus one rounding.
double gemm_tol(int64_t k, double abs_sum) {
  return 2.0 * static_cast<double>(k + 1) * std::ldexp(1.0, -24) * abs_sum;
}

}  // namespace

TEST_CASE("matmul forward and both gradients equal explicit loops (non power-of-two dims)") {
  const int64_t s = 3, b = 5, k = 7, m = 11;  // x: [s, b, k], w: [m, k]
  Tensor x = test::rand_tensor({s, b, k}, 1), w = test::rand_tensor({m, k}, 2),
         dy = test::rand_tensor({s, b, m}, 3);
  const int64_t n = s * b;
  Tensor y = ops::matmul_forward(x, w);
  CHECK(y.shape() == Shape{s, b, m});
  ops::MatmulGrads g = ops::matmul_backward(dy, x, w);
  REQUIRE(g.dx.shape() == x.shape());
  REQUIRE(g.dw.shape() == w.shape());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {  // Y = X·Wᵀ
      double ref = 0, abs = 0;
      for (int64_t l = 0; l < k; ++l) {
        ref += double(x.data()[i * k + l]) * w.data()[j * k + l];
        abs += std::fabs(double(x.data()[i * k + l]) * w.data()[j * k + l]);
      }
      CHECK(std::fabs(y.data()[i * m + j] - ref) <= gemm_tol(k, abs));
    }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t l = 0; l < k; ++l) {  // dX = dY·W
      double ref = 0, abs = 0;
      for (int64_t j = 0; j < m; ++j) {
        ref += double(dy.data()[i * m + j]) * w.data()[j * k + l];
        abs += std::fabs(double(dy.data()[i * m + j]) * w.data()[j * k + l]);
      }
      CHECK(std::fabs(g.dx.data()[i * k + l] - ref) <= gemm_tol(m, abs));
    }
  for (int64_t j = 0; j < m; ++j)
    for (int64_t l = 0; l < k; ++l) {  // dW = dYᵀ·X
      double ref = 0, abs = 0;
      for (int64_t i = 0; i < n; ++i) {
        ref += double(dy.data()[i * m + j]) * x.data()[i * k + l];
        abs += std::fabs(double(dy.data()[i * m + j]) * x.data()[i * k + l]);
      }
      CHECK(std::fabs(g.dw.data()[j * k + l] - ref) <= gemm_tol(n, abs));
    }
}

TEST_CASE("matmul on small integers is exact and a frozen weight still gives dX (case L1)") {
  // X = 8×8 identity, W = ones [1, 8] (one column-parallel shard at tp=8), dY = ones.
  Tensor x({8, 8});
  for (int64_t i = 0; i < 8; ++i) x.at({i, i}) = 1.f;
  Tensor w = Tensor::full({1, 8}, 1.f);
  Tensor y = ops::matmul_forward(x, w);
  for (int64_t i = 0; i < 8; ++i) CHECK(y.at({i, 0}) == 1.f);
  ops::MatmulGrads g =
      ops::matmul_backward(Tensor::full({8, 1}, 1.f), x, w, /*need_dx=*/true, /*need_dw=*/false);
  CHECK_FALSE(g.dw.defined());
  for (int64_t i = 0; i < 64; ++i) CHECK(g.dx.at(i) == 1.f);  // each shard gives 1; summed over tp=8 it is 8
  ops::MatmulGrads g2 = ops::matmul_backward(Tensor::full({8, 1}, 1.f), x, w, false, true);
  CHECK_FALSE(g2.dx.defined());
  for (int64_t l = 0; l < 8; ++l) CHECK(g2.dw.at({0, l}) == 1.f);
}

TEST_CASE("bias add adds the row and its gradient is the column sums") {
  Tensor y = Tensor::from({2, 3}, {1, 2, 3, 4, 5, 6});
  ops::bias_add_forward(y, Tensor::from({3}, {10, 20, 30}));
  CHECK(y.at({0, 0}) == 11.f);
  CHECK(y.at({1, 2}) == 36.f);
  Tensor dy = test::rand_tensor({3, 5, 7}, 9);
  Tensor db = ops::bias_add_backward(dy);
  REQUIRE(db.shape() == Shape{7});
  for (int64_t j = 0; j < 7; ++j) {
    double ref = 0;
    for (int64_t i = 0; i < 15; ++i) ref += dy.data()[i * 7 + j];
    CHECK(db.at(j) == static_cast<float>(ref));  // both sum in double: one rounding, same result
  }
}

TEST_CASE("matmul shape errors name both shapes") {
  Tensor x({4, 3}), w({5, 2});
  try {
    ops::matmul_forward(x, w);
    FAIL("no error");
  } catch (const ShapeError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("[4, 3]") != std::string::npos);
    CHECK(msg.find("[5, 2]") != std::string::npos);
  }
  CHECK_THROWS_AS(ops::matmul_backward(Tensor({4, 4}), x, Tensor({5, 3})), ShapeError);
  Tensor y({2, 3});
  CHECK_THROWS_AS(ops::bias_add_forward(y, Tensor({4})), ShapeError);
}

TEST_CASE("matmul with an empty dimension gives zeros and no BLAS error") {
  Tensor y = ops::matmul_forward(Tensor({0, 3}), Tensor({4, 3}));
  CHECK(y.shape() == Shape{0, 4});
  Tensor z = ops::matmul_forward(Tensor({2, 0}), Tensor({4, 0}));
  CHECK(z.shape() == Shape{2, 4});
  for (int64_t i = 0; i < z.numel(); ++i) CHECK(z.at(i) == 0.f);
  ops::MatmulGrads g = ops::matmul_backward(Tensor({0, 4}), Tensor({0, 3}), Tensor({4, 3}));
  for (int64_t i = 0; i < g.dw.numel(); ++i) CHECK(g.dw.at(i) == 0.f);
}
