// GELU (tanh approximation) at known points and its derivative against finite differences; add/scale.
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>

#include "engine/error.h"
#include "engine/ops/elementwise.h"
#include "tests/ops/helpers.h"

using namespace tpsp;

namespace {

double gelu_d(double x) {
  const double c = std::sqrt(2.0 / std::numbers::pi);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

}  // namespace

TEST_CASE("gelu tanh approximation at known points") {
  Tensor x = Tensor::from({5}, {0.f, 1.f, -1.f, 2.f, 10.f});
  Tensor y = ops::gelu_forward(x);
  CHECK(y.at(0) == 0.f);
  // 0.5·(1 + tanh(√(2/π)·1.044715)) = 0.841192 (PyTorch gelu(1., approximate="tanh") = 0.8411920)
  CHECK(y.at(1) == doctest::Approx(0.841192).epsilon(1e-6));
  CHECK(y.at(2) == doctest::Approx(-0.158808).epsilon(1e-5));  // gelu(−x) = gelu(x) − x
  CHECK(y.at(3) == doctest::Approx(1.954598).epsilon(1e-6));
  CHECK(y.at(4) == 10.f);  // tanh saturates to 1 in float
  // Against the double formula on [−6, 6]: a few float roundings of O(|x|) values → 1e-6·(1+|x|).
  Tensor xs = test::rand_tensor({1000}, 4, -6.f, 6.f);
  Tensor ys = ops::gelu_forward(xs);
  for (int64_t i = 0; i < xs.numel(); ++i)
    CHECK(std::fabs(ys.at(i) - gelu_d(xs.at(i))) <= 1e-6 * (1.0 + std::fabs(xs.at(i))));
}

TEST_CASE("gelu backward equals finite differences of the double formula") {
  Tensor x = test::rand_tensor({37}, 5, -4.f, 4.f), dy = test::rand_tensor({37}, 6);
  Tensor dx = ops::gelu_backward(dy, x);
  std::vector<double> xd = test::to_double(x);
  for (std::size_t i = 0; i < xd.size(); ++i) {
    const double fd = test::central_difference(xd, i, [&] { return gelu_d(xd[i]) * dy.data()[i]; });
    // gelu' ≤ 1.13 and dy ∈ [−1, 1]; a dozen float roundings → 2e-6 absolute.
    CHECK(std::fabs(dx.data()[i] - fd) <= 2e-6);
  }
  CHECK_THROWS_AS(ops::gelu_backward(Tensor({3}), Tensor({4})), ShapeError);
}

TEST_CASE("add, add_ and scale_") {
  Tensor a = Tensor::from({2, 2}, {1, 2, 3, 4}), b = Tensor::from({2, 2}, {10, 20, 30, 40});
  Tensor c = ops::add(a, b);
  CHECK(c.at({1, 1}) == 44.f);
  CHECK(a.at({1, 1}) == 4.f);  // inputs untouched
  ops::add_(a, b);
  CHECK(a.at({0, 1}) == 22.f);
  ops::scale_(a, 0.5f);
  CHECK(a.at({0, 1}) == 11.f);
  Tensor d({4});
  CHECK_THROWS_AS(ops::add(a, d), ShapeError);
  CHECK_THROWS_AS(ops::add_(a, d), ShapeError);
}
