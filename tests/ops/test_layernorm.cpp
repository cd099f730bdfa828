// LayerNorm: normalised rows (mean 0, variance 1) and backward against finite differences.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/error.h"
#include "engine/ops/layernorm.h"
#include "tests/ops/helpers.h"

using namespace tpsp;

namespace {

/// Double LayerNorm of rows of length h.
std::vector<double> layernorm_d(const std::vector<double>& x, const std::vector<double>& g,
                                const std::vector<double>& b, std::size_t h, double eps) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / h; ++r) {
    double mean = 0, var = 0;
    for (std::size_t j = 0; j < h; ++j) mean += x[r * h + j];
    mean /= double(h);
    for (std::size_t j = 0; j < h; ++j) var += (x[r * h + j] - mean) * (x[r * h + j] - mean);
    var /= double(h);
    for (std::size_t j = 0; j < h; ++j)
      y[r * h + j] = (x[r * h + j] - mean) / std::sqrt(var + eps) * g[j] + b[j];
  }
  return y;
}

}  // namespace

TEST_CASE("layernorm rows have mean 0 and variance var/(var+eps) with gamma=1, beta=0") {
  const int64_t h = 29;
  Tensor x = test::rand_tensor({3, 2, h}, 10, -2.f, 3.f);
  ops::LayerNormOut out = ops::layernorm_forward(x, Tensor::full({h}, 1.f), Tensor({h}));
  REQUIRE(out.mean.shape() == Shape{6});
  for (int64_t r = 0; r < 6; ++r) {
    double xm = 0, xv = 0, m = 0, v = 0;
    for (int64_t j = 0; j < h; ++j) xm += x.data()[r * h + j], m += out.y.data()[r * h + j];
    xm /= h, m /= h;
    for (int64_t j = 0; j < h; ++j) {
      xv += std::pow(x.data()[r * h + j] - xm, 2);
      v += std::pow(out.y.data()[r * h + j] - m, 2);
    }
    xv /= h, v /= h;
    CHECK(std::fabs(m) <= 1e-6);                     // entries O(1), h float roundings
    CHECK(std::fabs(v - xv / (xv + 1e-5)) <= 1e-6);  // the biased variance with eps inside the root
    CHECK(out.mean.at(r) == doctest::Approx(xm).epsilon(1e-6));
    CHECK(out.rstd.at(r) == doctest::Approx(1.0 / std::sqrt(xv + 1e-5)).epsilon(1e-6));
  }
}

TEST_CASE("layernorm backward (dx, dgamma, dbeta) equals finite differences") {
  const std::size_t h = 10;
  Tensor x = test::rand_tensor({2, 3, 10}, 11, -2.f, 2.f), g = test::rand_tensor({10}, 12, 0.5f, 1.5f),
         b = test::rand_tensor({10}, 13), dy = test::rand_tensor({2, 3, 10}, 14);
  ops::LayerNormOut out = ops::layernorm_forward(x, g, b);
  ops::LayerNormGrads grads = ops::layernorm_backward(dy, x, g, out.mean, out.rstd);
  std::vector<double> xd = test::to_double(x), gd = test::to_double(g), bd = test::to_double(b);
  auto loss = [&] { return test::dot(layernorm_d(xd, gd, bd, h, 1e-5), dy); };
  // dx is rstd·(O(1) terms) with rstd ≈ 1/0.55 here and sums over h = 10 in double; the float
  // rounding of x̂, dx̂ and the final expression gives ~10u·rstd ≈ 2e-6. dγ, dβ sum 6 rows: same order.
  for (std::size_t i = 0; i < xd.size(); ++i)
    CHECK(std::fabs(grads.dx.data()[i] - test::central_difference(xd, i, loss)) <= 5e-6);
  for (std::size_t j = 0; j < h; ++j) {
    CHECK(std::fabs(grads.dgamma.data()[j] - test::central_difference(gd, j, loss)) <= 5e-6);
    CHECK(std::fabs(grads.dbeta.data()[j] - test::central_difference(bd, j, loss)) <= 5e-6);
  }
}

TEST_CASE("layernorm rejects gamma/beta that are not [h]") {
  Tensor x({2, 4});
  CHECK_THROWS_AS(ops::layernorm_forward(x, Tensor({3}), Tensor({4})), ShapeError);
  CHECK_THROWS_AS(ops::layernorm_forward(x, Tensor({4}), Tensor({5})), ShapeError);
}
