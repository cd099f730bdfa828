// SwiGLU on [..., 2f] = [gate | up] (engine/ops/swiglu.h): y = silu(gate)·up, silu(g) = g·σ(g), in float
// as PyTorch's CPU kernels compute silu (σ(g) = 1/(1 + e^(−g)); e^(−g) overflows to inf for g < −88, where
// σ is 0 exactly, as it should be).
#include <cmath>

#include "engine/ops/cpu/cpu_ops.h"
#include "engine/ops/rules.h"

namespace tpsp::ops::cpu {
namespace {

float sigmoid(float g) {
  return 1.f / (1.f + std::exp(-g));
}

}  // namespace

Tensor CpuOps::swiglu_forward(const Tensor& x) {
  const int64_t two_f = x.size(-1), f = two_f / 2, rows = leading_rows(x);
  Shape y_shape = x.shape();
  y_shape.back() = f;
  Tensor y = Tensor::empty(y_shape);
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = x.data() + r * two_f;
    const float* up = gate + f;
    float* out = y.data() + r * f;
    for (int64_t j = 0; j < f; ++j) out[j] = gate[j] * sigmoid(gate[j]) * up[j];
  }
  return y;
}

Tensor CpuOps::swiglu_backward(const Tensor& dy, const Tensor& x) {
  const int64_t two_f = x.size(-1), f = two_f / 2, rows = leading_rows(x);
  Tensor dx = Tensor::empty(x.shape());
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = x.data() + r * two_f;
    const float* up = gate + f;
    const float* g = dy.data() + r * f;
    float* dgate = dx.data() + r * two_f;
    float* dup = dgate + f;
    for (int64_t j = 0; j < f; ++j) {
      const float s = sigmoid(gate[j]);
      dgate[j] = g[j] * up[j] * (s * (1.f + gate[j] * (1.f - s)));  // silu'(g) = σ(g)·(1 + g·(1 − σ(g)))
      dup[j] = g[j] * (gate[j] * s);
    }
  }
  return dx;
}

}  // namespace tpsp::ops::cpu
