// GELU with the tanh approximation (Hendrycks & Gimpel 2016; GPT-2, Megatron's openai_gelu, PyTorch
// gelu(approximate="tanh")), forward and backward, as vectorised loops: tanh is the rational of
// fast_math.h, and the loops are compiled with -fno-trapping-math (CMakeLists.txt) so that the
// clamps become vector min/max. On x86-64 an AVX2 clone is picked at load time (vector_clones.h).
#include <cstdint>

#include "engine/error.h"
#include "engine/ops/cpu/cpu_ops.h"
#include "engine/ops/cpu/fast_math.h"
#include "engine/ops/cpu/vector_clones.h"
#include "engine/ops/elementwise.h"

namespace tpsp::ops::cpu {
namespace {

// √(2/π) and the cubic coefficient of the tanh approximation, as in PyTorch's GeluKernel (kBeta,
// kKappa). Computed in float like PyTorch's CPU kernel.
constexpr float kBeta = 0.7978845608028654f;
constexpr float kKappa = 0.044715f;

/// y[i] = 0.5·x·(1 + tanh(β·(x + κx³))) for i < n.
TPSP_VECTOR_CLONES void gelu_forward_loop(const float* __restrict x, float* __restrict y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.f + tanh_rational(kBeta * (v + kKappa * v * v * v)));
  }
}

/// dx[i] = dy[i]·gelu'(x[i]) for i < n:
/// d/dx [0.5·x·(1 + tanh u)] = 0.5·(1 + tanh u) + 0.5·x·(1 − tanh² u)·u', u = β·(x + κx³),
/// u' = β·(1 + 3κx²). tanh u is recomputed from x (Megatron's bias_gelu_back does the same).
TPSP_VECTOR_CLONES void gelu_backward_loop(const float* __restrict dy, const float* __restrict x,
                                           float* __restrict dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float v2 = v * v;
    const float t = tanh_rational(kBeta * (v + kKappa * v2 * v));
    const float left = 0.5f * (1.f + t);
    const float right = 0.5f * v * (1.f - t * t) * kBeta * (1.f + 3.f * kKappa * v2);
    dx[i] = dy[i] * (left + right);
  }
}

}  // namespace

Tensor CpuOps::gelu_forward(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape());
  gelu_forward_loop(x.data(), y.data(), x.numel());
  return y;
}

Tensor CpuOps::gelu_backward(const Tensor& dy, const Tensor& x) {
  Tensor dx = Tensor::empty(x.shape());
  gelu_backward_loop(dy.data(), x.data(), dx.data(), x.numel());
  return dx;
}

}  // namespace tpsp::ops::cpu
