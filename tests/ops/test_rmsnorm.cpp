// RMSNorm (engine/ops/rmsnorm.h): closed forms with exact values, forward against a double
// re-implementation, backward against finite differences, dweight accumulating into its buffer, bf16
// rounded once, empty inputs, and the error messages.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/error.h"
#include "engine/ops/rmsnorm.h"
#include "tests/ops/helpers.h"

using namespace tpsp;

namespace {

constexpr double kU = 0x1p-24;  // float32 unit roundoff (round to nearest)

/// Double RMSNorm of rows of length h: y = x·w / √(mean(x²) + eps).
std::vector<double> rmsnorm_d(const std::vector<double>& x, const std::vector<double>& w, std::size_t h,
                              double eps) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / h; ++r) {
    double sq = 0;
    for (std::size_t j = 0; j < h; ++j) sq += x[r * h + j] * x[r * h + j];
    const double rstd = 1.0 / std::sqrt(sq / double(h) + eps);
    for (std::size_t j = 0; j < h; ++j) y[r * h + j] = x[r * h + j] * rstd * w[j];
  }
  return y;
}

/// Same dtype, shape and values (bf16 values read as floats, which is exact).
void check_same(const Tensor& got, const Tensor& want, const char* what) {
  REQUIRE_MESSAGE(got.dtype() == want.dtype(), what);
  REQUIRE_MESSAGE(got.shape() == want.shape(), what);
  int64_t differ = 0;
  for (int64_t i = 0; i < got.numel(); ++i) differ += got.value(i) != want.value(i);
  CHECK_MESSAGE(differ == 0, what, ": ", differ, " of ", got.numel(), " elements differ");
}

}  // namespace

TEST_CASE("rmsnorm closed forms: exact rstd and y, eps inside the root and added to the mean") {
  const Tensor w = Tensor::from({4}, {1.f, 2.f, 0.5f, -1.f});
  // eps = 0. Row [3, 4, 0, 0]: mean square 25/4, rstd = 1/2.5 = 0.4 in double, rounded once to float.
  // Row [−2, −2, −2, −2]: mean square 4, rstd = 0.5 exactly, so y = −w exactly.
  const Tensor x = Tensor::from({2, 4}, {3.f, 4.f, 0.f, 0.f, -2.f, -2.f, -2.f, -2.f});
  const ops::RMSNormOut o = ops::rmsnorm_forward(x, w, 0.f);
  REQUIRE(o.y.shape() == x.shape());
  REQUIRE(o.rstd.shape() == Shape{2});
  CHECK(o.y.dtype() == DType::f32);
  CHECK(o.rstd.at(0) == 0.4f);
  CHECK(o.rstd.at(1) == 0.5f);
  const float r = 0.4f;  // y = x·rstd·w, two float products left to right
  const std::vector<float> y0{3.f * r * 1.f, 4.f * r * 2.f, 0.f, 0.f};
  for (int64_t j = 0; j < 4; ++j) {
    CHECK(o.y.at({0, j}) == y0[static_cast<std::size_t>(j)]);
    CHECK(o.y.at({1, j}) == -w.at(j));
  }
  CHECK(o.y.at({0, 0}) == doctest::Approx(1.2).epsilon(1e-7));  // 1 ulp of the values themselves
  CHECK(o.y.at({0, 1}) == doctest::Approx(3.2).epsilon(1e-7));
  // eps = 3 on row [1, −1, 1, −1] (mean square 1): 1/√(1 + 3) = 0.5 exactly. eps on the sum (1/√((4 + 3)/4))
  // or outside the root (1/(1 + 3)) would not give 0.5. A zero row gives rstd = 1/√eps and y = 0.
  const Tensor x2 = Tensor::from({2, 4}, {1.f, -1.f, 1.f, -1.f, 0.f, 0.f, 0.f, 0.f});
  const ops::RMSNormOut o2 = ops::rmsnorm_forward(x2, w, 3.f);
  CHECK(o2.rstd.at(0) == 0.5f);
  CHECK(o2.rstd.at(1) == static_cast<float>(1.0 / std::sqrt(3.0)));
  for (int64_t j = 0; j < 4; ++j) {
    CHECK(o2.y.at({0, j}) == 0.5f * x2.at({0, j}) * w.at(j));
    CHECK(o2.y.at({1, j}) == 0.f);
  }
}

TEST_CASE("rmsnorm forward is within 3 roundings of a double re-implementation") {
  const std::size_t h = 37;
  const Tensor x = test::rand_tensor({3, 4, 37}, 31, -2.f, 3.f), w = test::rand_tensor({37}, 32, 0.5f, 1.5f);
  const ops::RMSNormOut o = ops::rmsnorm_forward(x, w, 1e-5f);
  const std::vector<double> xd = test::to_double(x), wd = test::to_double(w);
  const std::vector<double> yd = rmsnorm_d(xd, wd, h, static_cast<double>(1e-5f));
  // rstd is a double expression rounded once (≤ u relative); y = fl(fl(x·rstd)·w) adds two roundings:
  // |y − y_d| ≤ ((1 + u)³ − 1)·|y_d| < 3.01u·|y_d| (the double error, ~1e-15, is far below).
  for (std::size_t i = 0; i < yd.size(); ++i)
    CHECK(std::fabs(o.y.data()[i] - yd[i]) <= 3.01 * kU * std::fabs(yd[i]));
  for (std::size_t r = 0; r < xd.size() / h; ++r) {
    double sq = 0;
    for (std::size_t j = 0; j < h; ++j) sq += xd[r * h + j] * xd[r * h + j];
    const double rd = 1.0 / std::sqrt(sq / double(h) + static_cast<double>(1e-5f));
    CHECK(std::fabs(o.rstd.data()[r] - rd) <= 1.01 * kU * rd);
  }
}

TEST_CASE("rmsnorm backward (dx, dweight) equals finite differences") {
  const std::size_t h = 10;
  const Tensor x = test::rand_tensor({2, 3, 10}, 33, -2.f, 2.f), w = test::rand_tensor({10}, 34, 0.5f, 1.5f),
               dy = test::rand_tensor({2, 3, 10}, 35);
  const float eps = 1e-5f;
  const ops::RMSNormOut o = ops::rmsnorm_forward(x, w, eps);
  Tensor dweight({10});
  const Tensor dx = ops::rmsnorm_backward(dy, x, w, o.rstd, dweight);
  REQUIRE(dx.shape() == x.shape());
  CHECK(dx.dtype() == DType::f32);
  std::vector<double> xd = test::to_double(x), wd = test::to_double(w);
  auto loss = [&] { return test::dot(rmsnorm_d(xd, wd, h, static_cast<double>(eps)), dy); };
  // dx = rstd·(dx̂ − x̂·m) with rstd ≤ 1.1 here, terms ≤ 3 and a double sum over h = 10: a few float
  // roundings of those, ≲ 1e-6 (typically 1e-7). dweight is a double sum of 6 rows of dy·x̂ (≤ 2 each)
  // with x̂ rounded, rounded once: the same order.
  for (std::size_t i = 0; i < xd.size(); ++i)
    CHECK(std::fabs(dx.data()[i] - test::central_difference(xd, i, loss)) <= 2e-6);
  for (std::size_t j = 0; j < h; ++j)
    CHECK(std::fabs(dweight.data()[j] - test::central_difference(wd, j, loss)) <= 2e-6);
}

TEST_CASE("rmsnorm backward adds dweight into the buffer (a main_grad) and leaves dx alone") {
  const Tensor x = test::rand_tensor({4, 12}, 36, -2.f, 2.f), w = test::rand_tensor({12}, 37, 0.5f, 1.5f),
               dy = test::rand_tensor({4, 12}, 38);
  const ops::RMSNormOut o = ops::rmsnorm_forward(x, w);
  Tensor fresh({12});
  const Tensor dx0 = ops::rmsnorm_backward(dy, x, w, o.rstd, fresh);
  // The op rounds its column sums once and adds them with one f32 add: from v the buffer holds v + dw
  // bit for bit, and a second call into the same buffer doubles it exactly.
  Tensor acc = test::rand_tensor({12}, 39, -5.f, 5.f);
  const Tensor v = acc.clone();
  const Tensor dx1 = ops::rmsnorm_backward(dy, x, w, o.rstd, acc);
  Tensor twice({12});
  ops::rmsnorm_backward(dy, x, w, o.rstd, twice);
  ops::rmsnorm_backward(dy, x, w, o.rstd, twice);
  for (int64_t j = 0; j < 12; ++j) {
    CHECK(acc.at(j) == v.at(j) + fresh.at(j));
    CHECK(twice.at(j) == 2.f * fresh.at(j));
  }
  check_same(dx1, dx0, "dx with a non-zero buffer");
}

TEST_CASE("rmsnorm on bf16: y and dx rounded once from the f32 op on the widened inputs; rstd, dweight f32") {
  const Tensor x = test::rand_tensor({3, 2, 24}, 40, -2.f, 3.f).to(DType::bf16),
               w = test::rand_tensor({24}, 41, 0.5f, 1.5f).to(DType::bf16),
               dy = test::rand_tensor({3, 2, 24}, 42).to(DType::bf16);
  const Tensor x32 = x.to(DType::f32), w32 = w.to(DType::f32), dy32 = dy.to(DType::f32);
  const ops::RMSNormOut o = ops::rmsnorm_forward(x, w);
  const ops::RMSNormOut want = ops::rmsnorm_forward(x32, w32);
  CHECK(o.y.dtype() == DType::bf16);
  check_same(o.y, want.y.to(DType::bf16), "y (bf16)");
  check_same(o.rstd, want.rstd, "rstd (f32)");
  // One f32 input: the result is f32, the f32 op's own.
  check_same(ops::rmsnorm_forward(x, w32).y, want.y, "y (bf16 x, f32 weight)");
  Tensor dw({24}), dw_want({24});
  const Tensor dx = ops::rmsnorm_backward(dy, x, w, o.rstd, dw);
  const Tensor dx_want = ops::rmsnorm_backward(dy32, x32, w32, want.rstd, dw_want);
  CHECK(dx.dtype() == DType::bf16);
  check_same(dx, dx_want.to(DType::bf16), "dx (bf16)");
  check_same(dw, dw_want, "dweight (f32 buffer)");
  Tensor dw2({24});
  check_same(ops::rmsnorm_backward(dy32, x, w, o.rstd, dw2), dx_want, "dx (f32 dy, bf16 x)");
}

TEST_CASE("rmsnorm on zero rows: empty y, rstd and dx, dweight untouched") {
  const Tensor x({0, 4}), w = Tensor::full({4}, 1.f);
  const ops::RMSNormOut o = ops::rmsnorm_forward(x, w);
  CHECK(o.y.shape() == Shape{0, 4});
  CHECK(o.rstd.shape() == Shape{0});
  Tensor dweight = Tensor::from({4}, {1.f, -2.f, 3.f, 0.5f});
  const Tensor dx = ops::rmsnorm_backward(Tensor({0, 4}), x, w, o.rstd, dweight);
  CHECK(dx.shape() == Shape{0, 4});
  check_same(dweight, Tensor::from({4}, {1.f, -2.f, 3.f, 0.5f}), "dweight after zero rows");
}

TEST_CASE("rmsnorm rejects bad shapes, eps and a bf16 gradient buffer, naming the rule") {
  const Tensor x({2, 4}), w({4}), rstd({2});
  CHECK_THROWS_WITH_AS(ops::rmsnorm_forward(Tensor(Shape{}), w),
                       "rmsnorm_forward: x must be [..., h], got []", ShapeError);
  CHECK_THROWS_WITH_AS(ops::rmsnorm_forward(x, Tensor({3})),
                       "rmsnorm_forward: weight: expected shape [4] but got [3]", ShapeError);
  CHECK_THROWS_WITH_AS(ops::rmsnorm_forward(x, w, -1.f),
                       "rmsnorm_forward: eps = -1 must be a finite number >= 0", ShapeError);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()})
    CHECK_THROWS_WITH_AS(ops::rmsnorm_forward(x, w, bad), doctest::Contains("must be a finite number >= 0"),
                         ShapeError);
  Tensor dw({4}), dw5({5}), dw16({4}, DType::bf16);
  CHECK_THROWS_WITH_AS(ops::rmsnorm_backward(Tensor(Shape{}), Tensor(Shape{}), w, rstd, dw),
                       "rmsnorm_backward: x must be [..., h], got []", ShapeError);
  CHECK_THROWS_WITH_AS(ops::rmsnorm_backward(Tensor({2, 5}), x, w, rstd, dw),
                       "rmsnorm_backward: dy and x: shapes [2, 5] and [2, 4] differ", ShapeError);
  CHECK_THROWS_WITH_AS(ops::rmsnorm_backward(x, x, Tensor({3}), rstd, dw),
                       "rmsnorm_backward: weight: expected shape [4] but got [3]", ShapeError);
  CHECK_THROWS_WITH_AS(ops::rmsnorm_backward(x, x, w, rstd, dw5),
                       "rmsnorm_backward: dweight: expected shape [4] but got [5]", ShapeError);
  CHECK_THROWS_WITH_AS(ops::rmsnorm_backward(x, x, w, Tensor({3}), dw),
                       "rmsnorm_backward: rstd: expected shape [2] but got [3]", ShapeError);
  CHECK_THROWS_WITH_AS(ops::rmsnorm_backward(x, x, w, rstd, dw16),
                       "rmsnorm_backward: the gradient buffer dweight is bf16; gradients accumulate in f32 "
                       "(a main_grad buffer)",
                       ShapeError);
  CHECK(dw.at(0) == 0.f);  // a rejected call writes nothing
}
