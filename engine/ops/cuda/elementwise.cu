// Element-wise kernels of the GPU backend: add, scale, GELU, bias add and its gradient, dropout and
// AdamW, one thread per element (the bias gradient: one thread per column). Semantics and rounding
// as engine/ops/cpu: GELU's tanh is tanhf here (the CPU's is a rational within 6 ulp of it); AdamW
// uses the __f*_rn intrinsics so that nvcc contracts nothing the CPU does not, which keeps it in the
// CPU's order of IEEE operations.
#include <cuda_runtime.h>

#include "engine/ops/cuda/cuda_check.h"
#include "engine/ops/cuda/kernels.h"

namespace tpsp::cuda::kernels {
namespace {

// √(2/π) and the cubic coefficient, as engine/ops/cpu/gelu.cpp.
constexpr float kBeta = 0.7978845608028654f;
constexpr float kKappa = 0.044715f;

__device__ int64_t thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__global__ void add_kernel(float* out, const float* a, const float* b, int64_t n) {
  const int64_t i = thread_index();
  if (i < n) out[i] = a[i] + b[i];
}

__global__ void add_inplace_kernel(float* a, const float* b, int64_t n) {
  const int64_t i = thread_index();
  if (i < n) a[i] += b[i];
}

__global__ void scale_kernel(float* a, float s, int64_t n) {
  const int64_t i = thread_index();
  if (i < n) a[i] *= s;
}

__global__ void gelu_forward_kernel(float* y, const float* x, int64_t n) {
  const int64_t i = thread_index();
  if (i >= n) return;
  const float v = x[i];
  y[i] = 0.5f * v * (1.f + tanhf(kBeta * (v + kKappa * v * v * v)));
}

__global__ void gelu_backward_kernel(float* dx, const float* dy, const float* x, int64_t n) {
  const int64_t i = thread_index();
  if (i >= n) return;
  const float v = x[i];
  const float v2 = v * v;
  const float t = tanhf(kBeta * (v + kKappa * v2 * v));
  const float left = 0.5f * (1.f + t);
  const float right = 0.5f * v * (1.f - t * t) * kBeta * (1.f + 3.f * kKappa * v2);
  dx[i] = dy[i] * (left + right);
}

__global__ void bias_add_kernel(float* y, const float* b, int64_t rows, int64_t m) {
  const int64_t i = thread_index();
  if (i < rows * m) y[i] += b[i % m];
}

__global__ void bias_grad_kernel(float* db, const float* dy, int64_t rows, int64_t m) {
  const int64_t j = thread_index();
  if (j >= m) return;
  double acc = 0.0;
  for (int64_t r = 0; r < rows; ++r) acc += dy[r * m + j];
  db[j] = static_cast<float>(acc);
}

__global__ void dropout_kernel(float* y, const float* x, int64_t n, DropoutIndex index) {
  const int64_t i = thread_index();
  if (i < n) y[i] = x[i] * mask_value(index, i);
}

__global__ void adamw_kernel(float* p, float* m, float* v, const float* g, int64_t n, AdamWScalars k) {
  const int64_t i = thread_index();
  if (i >= n) return;
  const float gi = g[i];
  const float pi = __fmul_rn(p[i], k.decay);
  const float mi = fmaf(gi, k.one_minus_b1, __fmul_rn(m[i], k.beta1));
  const float vi = fmaf(__fmul_rn(k.one_minus_b2, gi), gi, __fmul_rn(v[i], k.beta2));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bc2_sqrt), k.eps);
  m[i] = mi;
  v[i] = vi;
  p[i] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(k.neg_step_size, mi), denom));
}

/// Throws naming the kernel if its launch failed.
void launched(const char* kernel) {
  check_cuda(cudaGetLastError(), kernel);
}

}  // namespace

void add(float* out, const float* a, const float* b, int64_t n) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads>>>(out, a, b, n);
  launched("add kernel");
}

void add_inplace(float* a, const float* b, int64_t n) {
  if (n == 0) return;
  add_inplace_kernel<<<blocks_for(n), kThreads>>>(a, b, n);
  launched("add_ kernel");
}

void scale_inplace(float* a, float s, int64_t n) {
  if (n == 0) return;
  scale_kernel<<<blocks_for(n), kThreads>>>(a, s, n);
  launched("scale_ kernel");
}

void gelu_forward(float* y, const float* x, int64_t n) {
  if (n == 0) return;
  gelu_forward_kernel<<<blocks_for(n), kThreads>>>(y, x, n);
  launched("gelu_forward kernel");
}

void gelu_backward(float* dx, const float* dy, const float* x, int64_t n) {
  if (n == 0) return;
  gelu_backward_kernel<<<blocks_for(n), kThreads>>>(dx, dy, x, n);
  launched("gelu_backward kernel");
}

void bias_add(float* y, const float* b, int64_t rows, int64_t m) {
  if (rows * m == 0) return;
  bias_add_kernel<<<blocks_for(rows * m), kThreads>>>(y, b, rows, m);
  launched("bias_add kernel");
}

void bias_grad(float* db, const float* dy, int64_t rows, int64_t m) {
  if (m == 0) return;
  bias_grad_kernel<<<blocks_for(m), kThreads>>>(db, dy, rows, m);
  launched("bias_grad kernel");
}

void dropout_apply(float* y, const float* x, int64_t n, const DropoutIndex& index) {
  if (n == 0) return;
  dropout_kernel<<<blocks_for(n), kThreads>>>(y, x, n, index);
  launched("dropout kernel");
}

void adamw(float* p, float* m, float* v, const float* g, int64_t n, const AdamWScalars& k) {
  if (n == 0) return;
  adamw_kernel<<<blocks_for(n), kThreads>>>(p, m, v, g, n, k);
  launched("adamw kernel");
}

}  // namespace tpsp::cuda::kernels
