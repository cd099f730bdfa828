// Element-wise ops: residual add, scaling, and GELU with the tanh approximation.
#include "engine/ops/elementwise.h"

#include <cmath>

#include "engine/error.h"
#include "engine/ops/cpu/ops.h"

namespace tpsp::ops::cpu {
namespace {
// √(2/π) and the cubic coefficient of the tanh approximation (Hendrycks & Gimpel 2016), as in
// PyTorch's GeluKernel (kBeta, kKappa). Computed in float like PyTorch's CPU kernel.
constexpr float kBeta = 0.7978845608028654f;
constexpr float kKappa = 0.044715f;
}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  check_same_shape(a, b, "add");
  Tensor out(a.shape());
  const float* pa = a.data();
  const float* pb = b.data();
  float* po = out.data();
  for (int64_t i = 0; i < a.numel(); ++i) po[i] = pa[i] + pb[i];
  return out;
}

void add_(Tensor& a, const Tensor& b) {
  check_same_shape(a, b, "add_");
  float* pa = a.data();
  const float* pb = b.data();
  for (int64_t i = 0; i < a.numel(); ++i) pa[i] += pb[i];
}

void scale_(Tensor& a, float s) {
  float* pa = a.data();
  for (int64_t i = 0; i < a.numel(); ++i) pa[i] *= s;
}

Tensor gelu_forward(const Tensor& x) {
  Tensor y(x.shape());
  const float* px = x.data();
  float* py = y.data();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = px[i];
    const float inner = kBeta * (v + kKappa * v * v * v);
    py[i] = 0.5f * v * (1.f + std::tanh(inner));
  }
  return y;
}

Tensor gelu_backward(const Tensor& dy, const Tensor& x) {
  check_same_shape(dy, x, "gelu_backward");
  Tensor dx(x.shape());
  const float* px = x.data();
  const float* pdy = dy.data();
  float* pdx = dx.data();
  for (int64_t i = 0; i < x.numel(); ++i) {
    // d/dx [0.5·x·(1 + tanh u)] = 0.5·(1 + tanh u) + 0.5·x·(1 − tanh² u)·u',
    // u = β·(x + κx³), u' = β·(1 + 3κx²).
    const float v = px[i];
    const float v2 = v * v;
    const float t = std::tanh(kBeta * (v + kKappa * v2 * v));
    const float left = 0.5f * (1.f + t);
    const float right = 0.5f * v * (1.f - t * t) * kBeta * (1.f + 3.f * kKappa * v2);
    pdx[i] = pdy[i] * (left + right);
  }
  return dx;
}

}  // namespace tpsp::ops::cpu
