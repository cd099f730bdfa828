// Element-wise ops: residual add and scaling (GELU is in gelu.cpp).
#include "engine/ops/elementwise.h"

#include <cmath>

#include "engine/ops/cpu/cpu_ops.h"

namespace tpsp::ops::cpu {

Tensor CpuOps::add(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty(a.shape());
  const float* pa = a.data();
  const float* pb = b.data();
  float* __restrict po = out.data();  // a fresh tensor: no overlap, the loop vectorises
  for (int64_t i = 0; i < a.numel(); ++i) po[i] = pa[i] + pb[i];
  return out;
}

void CpuOps::add_(Tensor& a, const Tensor& b) {
  float* pa = a.data();
  const float* pb = b.data();
  for (int64_t i = 0; i < a.numel(); ++i) pa[i] += pb[i];
}

void CpuOps::scale_(Tensor& a, float s) {
  float* pa = a.data();
  for (int64_t i = 0; i < a.numel(); ++i) pa[i] *= s;
}

}  // namespace tpsp::ops::cpu
