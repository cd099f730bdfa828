// Token and position embedding kernels (engine/ops/cpu/embedding.cpp on the GPU). The backward passes
// give each thread one column (or one (position, column) pair) and add in the CPU's order, so their
// float sums are the CPU's bit for bit and need no atomics.
#include <cuda_runtime.h>

#include "engine/ops/cuda/cuda_check.h"
#include "engine/ops/cuda/kernels.h"

namespace tpsp::cuda::kernels {
namespace {

__device__ int64_t thread_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

/// One thread per element of out [s, b, h].
__global__ void embedding_forward_kernel(float* out, const int64_t* ids, const float* wte, int64_t b,
                                         int64_t s, int64_t h, int64_t v_local, int64_t vocab_start) {
  const int64_t i = thread_index();
  if (i >= s * b * h) return;
  const int64_t j = i % h, token = i / h, bi = token % b, si = token / b;
  const int64_t row = ids[bi * s + si] - vocab_start;
  out[i] = row >= 0 && row < v_local ? wte[row * h + j] : 0.f;
}

/// One thread per column j of dwte: tokens in (si, bi) order, as the CPU's scatter-add.
__global__ void embedding_backward_kernel(float* dwte, const float* dout, const int64_t* ids, int64_t b,
                                          int64_t s, int64_t h, int64_t v_local, int64_t vocab_start) {
  const int64_t j = thread_index();
  if (j >= h) return;
  for (int64_t si = 0; si < s; ++si)
    for (int64_t bi = 0; bi < b; ++bi) {
      const int64_t row = ids[bi * s + si] - vocab_start;
      if (row >= 0 && row < v_local) dwte[row * h + j] += dout[(si * b + bi) * h + j];
    }
}

__global__ void position_add_kernel(float* x, const float* wpe, int64_t s, int64_t b, int64_t h,
                                    int64_t seq_start) {
  const int64_t i = thread_index();
  if (i >= s * b * h) return;
  const int64_t j = i % h, si = i / (b * h);
  x[i] += wpe[(seq_start + si) * h + j];
}

/// One thread per (si, j): Σ over b in order, starting from the zeroed dwpe.
__global__ void position_backward_kernel(float* dwpe, const float* dx, int64_t s, int64_t b, int64_t h,
                                         int64_t seq_start) {
  const int64_t i = thread_index();
  if (i >= s * h) return;
  const int64_t j = i % h, si = i / h;
  float acc = dwpe[(seq_start + si) * h + j];
  for (int64_t bi = 0; bi < b; ++bi) acc += dx[(si * b + bi) * h + j];
  dwpe[(seq_start + si) * h + j] = acc;
}

}  // namespace

void embedding_forward(float* out, const int64_t* ids, const float* wte, int64_t b, int64_t s, int64_t h,
                       int64_t v_local, int64_t vocab_start) {
  if (s * b * h == 0) return;
  embedding_forward_kernel<<<blocks_for(s * b * h), kThreads>>>(out, ids, wte, b, s, h, v_local, vocab_start);
  check_cuda(cudaGetLastError(), "embedding_forward kernel");
}

void embedding_backward(float* dwte, const float* dout, const int64_t* ids, int64_t b, int64_t s, int64_t h,
                        int64_t v_local, int64_t vocab_start) {
  if (h == 0 || v_local == 0) return;
  embedding_backward_kernel<<<blocks_for(h), kThreads>>>(dwte, dout, ids, b, s, h, v_local, vocab_start);
  check_cuda(cudaGetLastError(), "embedding_backward kernel");
}

void position_add(float* x, const float* wpe, int64_t s, int64_t b, int64_t h, int64_t seq_start) {
  if (s * b * h == 0) return;
  position_add_kernel<<<blocks_for(s * b * h), kThreads>>>(x, wpe, s, b, h, seq_start);
  check_cuda(cudaGetLastError(), "position_embedding_add kernel");
}

void position_backward(float* dwpe, const float* dx, int64_t s, int64_t b, int64_t h, int64_t seq_start) {
  if (s * h == 0) return;
  position_backward_kernel<<<blocks_for(s * h), kThreads>>>(dwpe, dx, s, b, h, seq_start);
  check_cuda(cudaGetLastError(), "position_embedding_backward kernel");
}

}  // namespace tpsp::cuda::kernels
