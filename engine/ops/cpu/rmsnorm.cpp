// RMSNorm over the last dimension (engine/ops/rmsnorm.h): forward saves the per-row rstd; backward is
// the closed form of LayerNorm's without the mean terms,
//   x̂ = x·rstd,  dx̂ = dy·w,  dx = rstd·(dx̂ − x̂·mean(dx̂·x̂)),  dw += Σ_rows dy·x̂,
// with every row and column sum in double and rounded once (as layernorm.cpp).
#include <cmath>
#include <vector>

#include "engine/ops/cpu/cpu_ops.h"

namespace tpsp::ops::cpu {

RMSNormOut CpuOps::rmsnorm_forward(const Tensor& x, const Tensor& weight, float eps) {
  const int64_t h = x.size(-1);
  const int64_t n = h == 0 ? 0 : x.numel() / h;
  RMSNormOut out{Tensor::empty(x.shape()), Tensor::empty({n})};
  const float* pw = weight.data();
  for (int64_t r = 0; r < n; ++r) {
    const float* px = x.data() + r * h;
    float* py = out.y.data() + r * h;
    double sq = 0.0;
    for (int64_t j = 0; j < h; ++j) sq += static_cast<double>(px[j]) * static_cast<double>(px[j]);
    const float rstd =
        static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(h) + static_cast<double>(eps)));
    for (int64_t j = 0; j < h; ++j) py[j] = px[j] * rstd * pw[j];
    out.rstd.data()[r] = rstd;
  }
  return out;
}

Tensor CpuOps::rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                                Tensor& dweight) {
  const int64_t h = x.size(-1);
  const int64_t n = h == 0 ? 0 : x.numel() / h;
  Tensor dx(x.shape());
  std::vector<double> dw(static_cast<std::size_t>(h), 0.0);
  const float* pw = weight.data();
  for (int64_t r = 0; r < n; ++r) {
    const float* px = x.data() + r * h;
    const float* pdy = dy.data() + r * h;
    float* pdx = dx.data() + r * h;
    const float rs = rstd.data()[r];
    double dot = 0.0;  // Σ_j dx̂·x̂
    for (int64_t j = 0; j < h; ++j) {
      const float xhat = px[j] * rs;
      dot += static_cast<double>(pdy[j] * pw[j]) * static_cast<double>(xhat);
      dw[static_cast<std::size_t>(j)] += static_cast<double>(pdy[j]) * static_cast<double>(xhat);
    }
    const float mean_dot = static_cast<float>(dot / static_cast<double>(h));
    for (int64_t j = 0; j < h; ++j) {
      const float xhat = px[j] * rs;
      pdx[j] = rs * (pdy[j] * pw[j] - xhat * mean_dot);
    }
  }
  float* pdw = dweight.data();
  for (int64_t j = 0; j < h; ++j) pdw[j] += static_cast<float>(dw[static_cast<std::size_t>(j)]);
  return dx;
}

}  // namespace tpsp::ops::cpu
