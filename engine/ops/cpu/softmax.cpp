// Row-wise softmax over the last dimension with the maximum subtracted first.
#include "engine/ops/softmax.h"

#include <cmath>
#include <limits>

#include "engine/ops/cpu/cpu_ops.h"
#include "engine/ops/cpu/fast_math.h"

namespace tpsp::ops::cpu {

Tensor CpuOps::softmax_forward(const Tensor& x) {
  const int64_t n = x.size(-1);
  Tensor y(x.shape());
  if (n == 0) return y;
  const int64_t rows = x.numel() / n;
  for (int64_t r = 0; r < rows; ++r) {
    const float* px = x.data() + r * n;
    float* py = y.data() + r * n;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n; ++j)
      mx = px[j] > mx ? px[j] : mx;  // std::fmax (a NaN is skipped) without a libm call
    if (mx == -std::numeric_limits<float>::infinity()) continue;  // all −inf: a zero row
    for (int64_t j = 0; j < n; ++j) py[j] = px[j];
    exp_shifted(py, n, mx);
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) sum += py[j];
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < n; ++j) py[j] *= inv;
  }
  return y;
}

Tensor CpuOps::softmax_backward(const Tensor& dy, const Tensor& y) {
  const int64_t n = y.size(-1);
  Tensor dx(y.shape());
  if (n == 0) return dx;
  const int64_t rows = y.numel() / n;
  for (int64_t r = 0; r < rows; ++r) {
    const float* py = y.data() + r * n;
    const float* pdy = dy.data() + r * n;
    float* pdx = dx.data() + r * n;
    double dot = 0.0;
    for (int64_t j = 0; j < n; ++j) dot += static_cast<double>(pdy[j]) * py[j];
    const float d = static_cast<float>(dot);
    for (int64_t j = 0; j < n; ++j) pdx[j] = py[j] * (pdy[j] - d);
  }
  return dx;
}

}  // namespace tpsp::ops::cpu
