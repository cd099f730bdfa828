// Ops on bf16 tensors (CPU): every op widens its bf16 inputs to f32, computes in f32 and rounds the
// result once (engine/ops/dispatch.cpp). So (1) a bf16 op equals the f32 op on the same (rounded)
// inputs, rounded — bit for bit; and (2) against the f32 op on the unrounded inputs it is within the
// bf16 bound stated in docs/tolerances.md: rounding to bf16 (round to nearest, 8 significant bits)
// changes each input by a relative error ≤ u = 2^-8, so a product x_k·w_k by ≤ 2u = 2^-7 (first
// order), and the result takes one more rounding (≤ u·|Y|). For Y = X·Wᵀ
//   |Y_bf16 − Y_f32| ≤ 2^-7 · Σ_k |x_k|·|w_k| + 2^-8 · |Y| (+ f32 rounding, covered by 1e-6).
#include <doctest/doctest.h>

#include <cmath>

#include "engine/error.h"
#include "engine/ops/ops.h"
#include "engine/random/init.h"

using namespace tpsp;

namespace {

Tensor randn(const Shape& shape, const std::string& name) {
  Tensor t(shape);
  random::init_normal(t, 5, name, 1.f);
  return t;
}

Tensor bf(const Tensor& t) {
  return t.to(DType::bf16);
}

/// Bit-for-bit: got (bf16) == round_bf16(want_f32).
void same_bits(const Tensor& got, const Tensor& want_f32, const char* what) {
  REQUIRE_MESSAGE(got.dtype() == DType::bf16, what);
  const Tensor want = want_f32.to(DType::bf16);
  REQUIRE(got.shape() == want.shape());
  for (int64_t i = 0; i < got.numel(); ++i)
    REQUIRE_MESSAGE(got.data_bf16()[i] == want.data_bf16()[i], what << " element " << i);
}

}  // namespace

TEST_CASE("bf16 ops equal the f32 op on the rounded inputs, rounded once") {
  const Tensor x = randn({6, 2, 8}, "x"), w = randn({5, 8}, "w"), b = randn({5}, "b"), g = randn({8}, "g");
  const Tensor xb = bf(x), wb = bf(w);
  same_bits(ops::matmul_forward(xb, wb), ops::matmul_forward(xb.to(DType::f32), wb.to(DType::f32)), "matmul");
  same_bits(ops::gelu_forward(xb), ops::gelu_forward(xb.to(DType::f32)), "gelu");
  same_bits(ops::add(xb, xb), ops::add(xb.to(DType::f32), xb.to(DType::f32)), "add");
  same_bits(ops::layernorm_forward(xb, bf(g), bf(g)).y,
            ops::layernorm_forward(xb.to(DType::f32), bf(g).to(DType::f32), bf(g).to(DType::f32)).y,
            "layernorm");
  same_bits(ops::softmax_forward(xb), ops::softmax_forward(xb.to(DType::f32)), "softmax");
  Tensor y = bf(randn({6, 2, 5}, "y"));
  const Tensor y32 = y.to(DType::f32).clone();
  ops::bias_add_forward(y, bf(b));
  Tensor y_want = y32.clone();
  ops::bias_add_forward(y_want, bf(b).to(DType::f32));
  same_bits(y, y_want, "bias_add (in place)");
}

TEST_CASE("bf16 matmul is within the bf16 bound of the f32 matmul on unrounded inputs") {
  const Tensor x = randn({16, 32}, "x"), w = randn({24, 32}, "w");
  const Tensor y = ops::matmul_forward(x, w);
  const Tensor yb = ops::matmul_forward(bf(x), bf(w));
  double worst = 0;
  for (int64_t i = 0; i < 16; ++i)
    for (int64_t j = 0; j < 24; ++j) {
      double abs_dot = 0;
      for (int64_t k = 0; k < 32; ++k) abs_dot += std::fabs(x.at({i, k}) * w.at({j, k}));
      const double want = y.at({i, j}), got = yb.value(i * 24 + j);
      const double bound = std::ldexp(1.0, -7) * abs_dot + std::ldexp(1.0, -8) * std::fabs(want) + 1e-6;
      REQUIRE(std::fabs(got - want) <= bound);
      worst = std::max(worst, std::fabs(got - want) / bound);
    }
  MESSAGE("largest share of the bf16 bound used: " << worst);
  CHECK(worst > 0);  // the bf16 path really rounds
}

TEST_CASE("mixed f32 and bf16 inputs give f32; gradients accumulate into f32 buffers only") {
  const Tensor x = randn({4, 3}, "x"), w = bf(randn({2, 3}, "w"));
  CHECK(ops::matmul_forward(x, w).dtype() == DType::f32);
  Tensor dw({2, 3});
  ops::matmul_wgrad(randn({4, 2}, "dy"), x, dw);
  Tensor dw16({2, 3}, DType::bf16);
  CHECK_THROWS_WITH_AS(ops::matmul_wgrad(randn({4, 2}, "dy"), x, dw16),
                       doctest::Contains("accumulate in f32"), ShapeError);
}

TEST_CASE("matmul_wgrad accumulates into the buffer (β = 1); matmul_dgrad is dY·W") {
  const Tensor x = randn({5, 3}, "x"), dy = randn({5, 2}, "dy"), w = randn({2, 3}, "w");
  const ops::MatmulGrads g = ops::matmul_backward(dy, x, w);
  Tensor acc = Tensor::full({2, 3}, 10.f);
  ops::matmul_wgrad(dy, x, acc);
  ops::matmul_wgrad(dy, x, acc);
  for (int64_t i = 0; i < 6; ++i) CHECK(acc.at(i) == doctest::Approx(10.f + 2 * g.dw.at(i)).epsilon(1e-6));
  const Tensor dx = ops::matmul_dgrad(dy, w);
  for (int64_t i = 0; i < dx.numel(); ++i) CHECK(dx.at(i) == g.dx.at(i));
  CHECK_THROWS_AS(ops::matmul_dgrad(randn({5, 3}, "bad"), w), ShapeError);
}
