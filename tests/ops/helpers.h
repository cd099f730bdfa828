// Shared helpers for the op tests: deterministic random tensors and finite differences in double.
//
// Gradient checks compare the float backward of an op against a central difference of a *double*
// re-implementation of its forward (written out in the test). With h = 1e-4 the truncation error
// is O(h²·|f'''|) ≈ 1e-8 and the cancellation error O(ε_double/h) ≈ 1e-12, so the finite
// difference is exact to ~1e-8 and the tolerance of each check only has to cover the float
// rounding of the op itself (stated next to each check).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

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

/// The elements of t as doubles (exact).
inline std::vector<double> to_double(const Tensor& t) {
  return std::vector<double>(t.data(), t.data() + t.numel());
}

/// Σ_i w_i · y_i in double: a scalar loss whose gradient with respect to y is w.
inline double dot(const std::vector<double>& y, const Tensor& w) {
  double s = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * w.data()[i];
  return s;
}

/// Central difference (L(x + h·e_i) − L(x − h·e_i)) / 2h in double; x is restored afterwards.
inline double central_difference(std::vector<double>& x, std::size_t i, const std::function<double()>& loss,
                                 double h = 1e-4) {
  const double saved = x[i];
  x[i] = saved + h;
  const double up = loss();
  x[i] = saved - h;
  const double down = loss();
  x[i] = saved;
  return (up - down) / (2.0 * h);
}

}  // namespace tpsp::test
