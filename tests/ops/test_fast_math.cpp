// The vectorised exp (softmax, attention) and tanh (GELU) of engine/ops/cpu/fast_math.h against
// glibc's expf and tanhf, and the GELU kernels against the formula evaluated with std::tanh in double.
// exp: a Cody–Waite reduction and a degree-7 polynomial, within 1 ulp of expf on [-87, 88]. Bounds: the
// rational is a minimax fit whose float evaluation stays within 6 ulp of tanhf (measured over [-12, 12] on a
// 1e-4 grid; the header states the same figure); GELU then carries at most a few f32 roundings of values ≤
// |x|, so 2e-6·(1 + |x|) holds with room.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "engine/ops/cpu/fast_math.h"
#include "engine/ops/ops.h"

using namespace tpsp;

namespace {

/// Distance in ulp of `got` from `want` (floats), measured in want's binade.
double ulp_distance(float got, float want) {
  const float ulp = std::nextafter(std::fabs(want), std::numeric_limits<float>::infinity()) - std::fabs(want);
  return std::fabs(static_cast<double>(got) - want) / std::max(ulp, std::numeric_limits<float>::denorm_min());
}

double gelu_double(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

}  // namespace

TEST_CASE("exp_poly is within 1 ulp of expf over [-87, 88]; 0 below the normal range, NaN stays NaN") {
  double worst = 0;
  for (int i = -87000; i <= 88000; ++i) {
    const float x = static_cast<float>(i) * 1e-3f;
    worst = std::max(worst, ulp_distance(ops::cpu::exp_poly(x), std::exp(x)));
  }
  MESSAGE("worst: " << worst << " ulp");
  CHECK(worst <= 1.0);
  CHECK(ops::cpu::exp_poly(0.f) == 1.f);
  CHECK(ops::cpu::exp_poly(-std::numeric_limits<float>::infinity()) == 0.f);  // a masked logit
  CHECK(ops::cpu::exp_poly(-100.f) == 0.f);
  CHECK(ops::cpu::exp_poly(100.f) > 3e38f);
  CHECK(std::isnan(ops::cpu::exp_poly(std::numeric_limits<float>::quiet_NaN())));
  float row[5] = {1.f, 2.f, -std::numeric_limits<float>::infinity(), 3.f, 0.5f};
  ops::cpu::exp_shifted(row, 5, 3.f);
  CHECK(row[2] == 0.f);
  CHECK(row[3] == 1.f);
  CHECK(ulp_distance(row[0], std::exp(-2.f)) <= 1.0);
}

TEST_CASE("tanh_rational is within 6 ulp of tanhf over [-12, 12], odd, saturating, NaN-preserving") {
  double worst = 0, worst_abs = 0;
  for (int i = -120000; i <= 120000; ++i) {
    const float x = static_cast<float>(i) * 1e-4f;
    const float got = ops::cpu::tanh_rational(x);
    worst = std::max(worst, ulp_distance(got, std::tanh(x)));
    worst_abs = std::max(worst_abs, std::fabs(static_cast<double>(got) - std::tanh(x)));
    REQUIRE(ops::cpu::tanh_rational(-x) == -got);
  }
  MESSAGE("worst: " << worst << " ulp, " << worst_abs << " absolute");
  CHECK(worst <= 6.0);
  CHECK(worst_abs <= 3.6e-7);
  CHECK(ops::cpu::tanh_rational(1e30f) == doctest::Approx(1.0f).epsilon(1e-7));
  CHECK(ops::cpu::tanh_rational(-std::numeric_limits<float>::infinity()) ==
        doctest::Approx(-1.0f).epsilon(1e-7));
  CHECK(std::isnan(ops::cpu::tanh_rational(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("vectorised GELU forward and backward equal the double formula on 100,003 points") {
  const int64_t n = 100003;  // not a multiple of any vector width: the loop's tail is covered
  Tensor x({n}), dy({n});
  for (int64_t i = 0; i < n; ++i) {
    x.data()[i] = -10.f + 20.f * static_cast<float>(i) / static_cast<float>(n - 1);
    dy.data()[i] = 1.f + static_cast<float>(i % 7) / 8.f;
  }
  const Tensor y = ops::gelu_forward(x);
  const Tensor dx = ops::gelu_backward(dy, x);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x.data()[i];
    REQUIRE(std::fabs(y.data()[i] - gelu_double(v)) <= 2e-6 * (1.0 + std::fabs(v)));
    const double h = 1e-4;
    const double d = (gelu_double(v + h) - gelu_double(v - h)) / (2 * h) * dy.data()[i];
    REQUIRE(std::fabs(dx.data()[i] - d) <= 2e-5 * (1.0 + std::fabs(d)));
  }
}
