// LayerNorm over the last dimension: forward saves per-row mean and rstd; backward is the
// closed form dx = rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)) with dx̂ = dy·γ (llm.c layernorm_backward).
#include <cmath>
#include <vector>

#include "engine/ops/cpu/cpu_ops.h"

namespace tpsp::ops::cpu {
LayerNormOut CpuOps::layernorm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) {
  const int64_t h = x.size(-1);
  const int64_t n = h == 0 ? 0 : x.numel() / h;
  LayerNormOut out{Tensor::empty(x.shape()), Tensor::empty({n}), Tensor::empty({n})};
  const float* pg = gamma.data();
  const float* pb = beta.data();
  for (int64_t r = 0; r < n; ++r) {
    const float* px = x.data() + r * h;
    float* py = out.y.data() + r * h;
    // Statistics in double (two passes), then rounded once to the saved float values.
    double sum = 0.0;
    for (int64_t j = 0; j < h; ++j) sum += px[j];
    const double mean = sum / static_cast<double>(h);
    double sq = 0.0;
    for (int64_t j = 0; j < h; ++j) sq += (px[j] - mean) * (px[j] - mean);
    const double var = sq / static_cast<double>(h);  // biased, as torch layer_norm
    const float m = static_cast<float>(mean);
    const float rstd = static_cast<float>(1.0 / std::sqrt(var + static_cast<double>(eps)));
    for (int64_t j = 0; j < h; ++j) py[j] = (px[j] - m) * rstd * pg[j] + pb[j];
    out.mean.data()[r] = m;
    out.rstd.data()[r] = rstd;
  }
  return out;
}

LayerNormGrads CpuOps::layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                          const Tensor& mean, const Tensor& rstd) {
  const int64_t h = x.size(-1);
  const int64_t n = h == 0 ? 0 : x.numel() / h;
  LayerNormGrads g{Tensor(x.shape()), Tensor({h}), Tensor({h})};
  std::vector<double> dgamma(static_cast<std::size_t>(h), 0.0), dbeta(static_cast<std::size_t>(h), 0.0);
  const float* pg = gamma.data();
  for (int64_t r = 0; r < n; ++r) {
    const float* px = x.data() + r * h;
    const float* pdy = dy.data() + r * h;
    float* pdx = g.dx.data() + r * h;
    const float m = mean.data()[r], rs = rstd.data()[r];
    double sum_dxhat = 0.0, sum_dxhat_xhat = 0.0;
    for (int64_t j = 0; j < h; ++j) {
      const float xhat = (px[j] - m) * rs;
      const float dxhat = pdy[j] * pg[j];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += static_cast<double>(dxhat) * xhat;
      dgamma[static_cast<std::size_t>(j)] += static_cast<double>(pdy[j]) * xhat;
      dbeta[static_cast<std::size_t>(j)] += pdy[j];
    }
    const float mean_dxhat = static_cast<float>(sum_dxhat / static_cast<double>(h));
    const float mean_dxhat_xhat = static_cast<float>(sum_dxhat_xhat / static_cast<double>(h));
    for (int64_t j = 0; j < h; ++j) {
      const float xhat = (px[j] - m) * rs;
      const float dxhat = pdy[j] * pg[j];
      pdx[j] = rs * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
  for (int64_t j = 0; j < h; ++j) {
    g.dgamma.data()[j] = static_cast<float>(dgamma[static_cast<std::size_t>(j)]);
    g.dbeta.data()[j] = static_cast<float>(dbeta[static_cast<std::size_t>(j)]);
  }
  return g;
}

}  // namespace tpsp::ops::cpu
