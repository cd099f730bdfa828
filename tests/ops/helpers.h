// Shared helpers for the op tests: deterministic random tensors and finite differences in double.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>

#include "engine/tensor.h"

namespace tpsp::test {

/// Tensor of the given shape with values uniform in [lo, hi) from a fixed-seed mt19937.
inline Tensor rand_tensor(const Shape& shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = dist(gen);
  return t;
}

/// Σ_i w_i · f(x)_i in double: a scalar loss whose gradient wrt f's output is w.
inline double weighted_sum(const Tensor& y, const Tensor& w) {
  double s = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y.data()[i]) * w.data()[i];
  return s;
}

/// Central difference of loss(x) at element i of x with step h: (L(x+h) − L(x−h)) / 2h. x is
/// restored afterwards. The loss is evaluated by the op under test in float and summed in double.
inline double central_difference(Tensor& x, int64_t i, float h, const std::function<double()>& loss) {
  const float saved = x.data()[i];
  x.data()[i] = saved + h;
  const double up = loss();
  x.data()[i] = saved - h;
  const double down = loss();
  x.data()[i] = saved;
  // The actual steps taken in float: (saved + h) − (saved − h) may differ from 2h by rounding.
  const double step = static_cast<double>(saved + h) - static_cast<double>(saved - h);
  return (up - down) / step;
}

}  // namespace tpsp::test
