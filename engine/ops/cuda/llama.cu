// The Llama block's element-wise kernels: SwiGLU on [gate | up] rows and rotary embedding's rotation,
// one thread per output element. Semantics as engine/ops/cpu/swiglu.cpp and rope.cpp: SwiGLU's σ uses
// expf (within 2 ulp of the CPU's libm expf); the rotation uses the host's cos/sin table (rules.h
// rope_table) and the __f*_rn intrinsics, so nvcc contracts nothing into an FMA and every device rounds
// the same products: the rotation is bit-identical to the CPU's.
#include <cuda_runtime.h>

#include "engine/ops/cuda/cuda_check.h"
#include "engine/ops/cuda/kernels.h"

namespace tpsp::cuda::kernels {
namespace {

__device__ int64_t thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ float sigmoid(float g) {
  return 1.f / (1.f + expf(-g));
}

__global__ void swiglu_forward_kernel(float* y, const float* x, int64_t rows, int64_t f) {
  const int64_t i = thread_index();
  if (i >= rows * f) return;
  const int64_t r = i / f, j = i % f;
  const float g = x[r * 2 * f + j], u = x[r * 2 * f + f + j];
  y[i] = __fmul_rn(__fmul_rn(g, sigmoid(g)), u);
}

__global__ void swiglu_backward_kernel(float* dx, const float* dy, const float* x, int64_t rows, int64_t f) {
  const int64_t i = thread_index();
  if (i >= rows * f) return;
  const int64_t r = i / f, j = i % f;
  const float g = x[r * 2 * f + j], u = x[r * 2 * f + f + j], d = dy[i];
  const float s = sigmoid(g);
  const float dsilu = __fmul_rn(s, __fadd_rn(1.f, __fmul_rn(g, __fsub_rn(1.f, s))));
  dx[r * 2 * f + j] = __fmul_rn(__fmul_rn(d, u), dsilu);
  dx[r * 2 * f + f + j] = __fmul_rn(d, __fmul_rn(g, s));
}

/// One thread per pair (row, batch, head, i < d/2).
__global__ void rope_kernel(float* y, const float* x, const float* cos, const float* sin, int64_t s,
                            int64_t b, int64_t heads, int64_t d) {
  const int64_t half = d / 2;
  const int64_t p = thread_index();
  if (p >= s * b * heads * half) return;
  const int64_t i = p % half, rbh = p / half;  // rbh = (r·b + bi)·heads + h
  const int64_t r = rbh / (b * heads);
  const int64_t base = rbh * d;  // rows of width heads·d: (r·b + bi)·heads·d + h·d
  const float c = cos[r * half + i], sn = sin[r * half + i];
  const float x1 = x[base + i], x2 = x[base + i + half];
  y[base + i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, sn));
  y[base + i + half] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, sn));
}

void launched(const char* kernel) {
  check_cuda(cudaGetLastError(), kernel);
}

}  // namespace

void swiglu_forward(float* y, const float* x, int64_t rows, int64_t f) {
  if (rows * f == 0) return;
  swiglu_forward_kernel<<<blocks_for(rows * f), kThreads>>>(y, x, rows, f);
  launched("swiglu_forward kernel");
}

void swiglu_backward(float* dx, const float* dy, const float* x, int64_t rows, int64_t f) {
  if (rows * f == 0) return;
  swiglu_backward_kernel<<<blocks_for(rows * f), kThreads>>>(dx, dy, x, rows, f);
  launched("swiglu_backward kernel");
}

void rope_rotate(float* y, const float* x, const float* cos, const float* sin, int64_t s, int64_t b,
                 int64_t heads, int64_t d) {
  const int64_t pairs = s * b * heads * (d / 2);
  if (pairs == 0) return;
  rope_kernel<<<blocks_for(pairs), kThreads>>>(y, x, cos, sin, s, b, heads, d);
  launched("rope kernel");
}

}  // namespace tpsp::cuda::kernels
