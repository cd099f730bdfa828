// Softmax: rows sum to 1, stability, all −inf rows, backward against finite differences.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "engine/ops/softmax.h"
#include "tests/ops/helpers.h"

using namespace tpsp;

namespace {

/// Double softmax of each row of length n.
std::vector<double> softmax_d(const std::vector<double>& x, std::size_t n) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / n; ++r) {
    double mx = -INFINITY, sum = 0;
    for (std::size_t j = 0; j < n; ++j) mx = std::fmax(mx, x[r * n + j]);
    for (std::size_t j = 0; j < n; ++j) sum += std::exp(x[r * n + j] - mx);
    for (std::size_t j = 0; j < n; ++j) y[r * n + j] = std::exp(x[r * n + j] - mx) / sum;
  }
  return y;
}

}  // namespace

TEST_CASE("softmax rows sum to 1 and match the double formula") {
  Tensor x = test::rand_tensor({4, 3, 13}, 7, -5.f, 5.f);
  Tensor y = ops::softmax_forward(x);
  std::vector<double> ref = softmax_d(test::to_double(x), 13);
  for (int64_t r = 0; r < 12; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < 13; ++j) sum += y.data()[r * 13 + j];
    CHECK(std::fabs(sum - 1.0) <= 13 * 6e-8);  // one float rounding per entry: n·u
  }
  for (int64_t i = 0; i < x.numel(); ++i) CHECK(std::fabs(y.data()[i] - ref[i]) <= 4e-7);  // a few u
}

TEST_CASE("softmax is stable for large inputs and gives zeros for an all -inf row") {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from({3, 3}, {1000.f, 1000.f, 1000.f, -inf, -inf, -inf, 0.f, -inf, 0.f});
  Tensor y = ops::softmax_forward(x);
  for (int64_t j = 0; j < 3; ++j) CHECK(y.at({0, j}) == doctest::Approx(1.0 / 3.0).epsilon(1e-6));
  for (int64_t j = 0; j < 3; ++j) CHECK(y.at({1, j}) == 0.f);
  CHECK(y.at({2, 0}) == 0.5f);
  CHECK(y.at({2, 1}) == 0.f);
  CHECK(y.at({2, 2}) == 0.5f);
}

TEST_CASE("softmax backward equals finite differences") {
  const std::size_t n = 7;
  Tensor x = test::rand_tensor({3, 7}, 8, -3.f, 3.f), dy = test::rand_tensor({3, 7}, 9);
  Tensor dx = ops::softmax_backward(dy, ops::softmax_forward(x));
  std::vector<double> xd = test::to_double(x);
  for (std::size_t i = 0; i < xd.size(); ++i) {
    const double fd = test::central_difference(xd, i, [&] { return test::dot(softmax_d(xd, n), dy); });
    // y ∈ [0, 1], |dy| ≤ 1: y·(dy − Σ dy·y) with float y (rounding u) → a few u absolute.
    CHECK(std::fabs(dx.data()[i] - fd) <= 1e-6);
  }
}
