// Element-wise ops: residual add and scaling (GELU is in gelu.cpp).
#include "engine/ops/elementwise.h"

#include <cmath>

#include "engine/error.h"
#include "engine/ops/cpu/ops.h"

namespace tpsp::ops::cpu {

Tensor add(const Tensor& a, const Tensor& b) {
  check_same_shape(a, b, "add");
  Tensor out = Tensor::empty(a.shape());
  const float* pa = a.data();
  const float* pb = b.data();
  float* __restrict po = out.data();  // a fresh tensor: no overlap, the loop vectorises
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

}  // namespace tpsp::ops::cpu
