// Row kernels of the GPU backend: LayerNorm, RMSNorm, softmax, the masked softmax of attention and its
// backward step, cross entropy. One block of kRowThreads threads per row; row sums in double (as
// engine/ops/cpu, which sums rows in double too, in another order), results rounded once to float.
// exp is expf (the CPU's softmax uses a polynomial within 1 ulp of it).
#include <cuda_runtime.h>
#include <math_constants.h>

#include "engine/ops/cuda/cuda_check.h"
#include "engine/ops/cuda/kernels.h"

namespace tpsp::cuda::kernels {
namespace {

constexpr int kRowThreads = 256;   // a multiple of 32
constexpr int64_t kIgnore = -100;  // engine/tokens.h kIgnoreIndex

/// Sum of v over the block (every thread gets it). Uses `scratch` (32 doubles) and syncs.
__device__ double block_sum(double v, double* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // scratch may still be read by an earlier reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += scratch[w];
  return total;
}

/// Maximum of v over the block (every thread gets it); NaN-ignoring like std::fmax.
__device__ double block_max(double v, double* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_down_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double m = -CUDART_INF;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) m = fmax(m, scratch[w]);
  return m;
}

/// Smallest v over the block (every thread gets it).
__device__ long long block_min(long long v, double* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    const long long other = __shfl_down_sync(0xffffffffu, v, o);
    v = other < v ? other : v;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  long long* s = reinterpret_cast<long long*>(scratch);
  __syncthreads();
  if (lane == 0) s[warp] = v;
  __syncthreads();
  long long m = s[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) m = s[w] < m ? s[w] : m;
  return m;
}

__global__ void layernorm_forward_kernel(float* y, float* mean, float* rstd, const float* x,
                                         const float* gamma, const float* beta, int64_t h, float eps) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  const float* px = x + r * h;
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) sum += px[j];
  const double mu = block_sum(sum, scratch) / static_cast<double>(h);
  double sq = 0.0;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) sq += (px[j] - mu) * (px[j] - mu);
  const double var = block_sum(sq, scratch) / static_cast<double>(h);  // biased, as torch layer_norm
  const float m = static_cast<float>(mu);
  const float rs = static_cast<float>(1.0 / sqrt(var + static_cast<double>(eps)));
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) y[r * h + j] = (px[j] - m) * rs * gamma[j] + beta[j];
  if (threadIdx.x == 0) {
    mean[r] = m;
    rstd[r] = rs;
  }
}

__global__ void layernorm_dx_kernel(float* dx, const float* dy, const float* x, const float* gamma,
                                    const float* mean, const float* rstd, int64_t h) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  const float m = mean[r], rs = rstd[r];
  double s1 = 0.0, s2 = 0.0;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    const float xhat = (x[r * h + j] - m) * rs;
    const float dxhat = dy[r * h + j] * gamma[j];
    s1 += dxhat;
    s2 += static_cast<double>(dxhat) * xhat;
  }
  const float mean_dxhat = static_cast<float>(block_sum(s1, scratch) / static_cast<double>(h));
  const float mean_dxhat_xhat = static_cast<float>(block_sum(s2, scratch) / static_cast<double>(h));
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    const float xhat = (x[r * h + j] - m) * rs;
    const float dxhat = dy[r * h + j] * gamma[j];
    dx[r * h + j] = rs * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
  }
}

/// One thread per column: dgamma[j] = Σ_r dy·x̂, dbeta[j] = Σ_r dy (double, row order).
__global__ void layernorm_dparams_kernel(float* dgamma, float* dbeta, const float* dy, const float* x,
                                         const float* mean, const float* rstd, int64_t n, int64_t h) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= h) return;
  double dg = 0.0, db = 0.0;
  for (int64_t r = 0; r < n; ++r) {
    const float xhat = (x[r * h + j] - mean[r]) * rstd[r];
    dg += static_cast<double>(dy[r * h + j]) * xhat;
    db += dy[r * h + j];
  }
  dgamma[j] = static_cast<float>(dg);
  dbeta[j] = static_cast<float>(db);
}

/// RMSNorm of row blockIdx.x: rstd = 1/√(Σ x²/h + eps) (squares summed in double: a float32 sum
/// overflows past |x| ≈ 1.8e19), y = x·rstd·w. engine/ops/cpu/rmsnorm.cpp's float operations in its
/// order; only the double sum runs in another order.
__global__ void rmsnorm_forward_kernel(float* y, float* rstd, const float* x, const float* w, int64_t h,
                                       float eps) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  const float* px = x + r * h;
  double sq = 0.0;  // each product of two floats is exact in double, so a contraction into an FMA is too
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) sq += static_cast<double>(px[j]) * px[j];
  const double ms = block_sum(sq, scratch) / static_cast<double>(h);
  const float rs = static_cast<float>(1.0 / sqrt(ms + static_cast<double>(eps)));
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) y[r * h + j] = px[j] * rs * w[j];
  if (threadIdx.x == 0) rstd[r] = rs;
}

/// dx of row blockIdx.x: x̂ = x·rstd, dx̂ = dy·w, m = (float)(Σ dx̂·x̂ / h) (double sum), then
/// dx = rstd·(dx̂ − x̂·m) with x̂·m rounded on its own (__fmul_rn: no FMA), as the CPU computes it.
__global__ void rmsnorm_dx_kernel(float* dx, const float* dy, const float* x, const float* w,
                                  const float* rstd, int64_t h) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  const float rs = rstd[r];
  double s = 0.0;
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    const float xhat = x[r * h + j] * rs;
    const float dxhat = dy[r * h + j] * w[j];
    s += static_cast<double>(dxhat) * xhat;
  }
  const float m = static_cast<float>(block_sum(s, scratch) / static_cast<double>(h));
  for (int64_t j = threadIdx.x; j < h; j += blockDim.x) {
    const float xhat = x[r * h + j] * rs;
    const float dxhat = dy[r * h + j] * w[j];
    dx[r * h + j] = rs * __fsub_rn(dxhat, __fmul_rn(xhat, m));
  }
}

/// One thread per column: dweight[j] += (float)Σ_r dy·x̂, the sum in double in row order (the CPU's
/// order: the same terms, so the same bits), rounded once, then one f32 add into the buffer.
__global__ void rmsnorm_dweight_kernel(float* dweight, const float* dy, const float* x, const float* rstd,
                                       int64_t n, int64_t h) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= h) return;
  double acc = 0.0;
  for (int64_t r = 0; r < n; ++r) {
    const float xhat = x[r * h + j] * rstd[r];
    acc += static_cast<double>(dy[r * h + j]) * xhat;
  }
  dweight[j] += static_cast<float>(acc);
}

/// Softmax of one row in place in y (already holding the masked scores), all −inf → zeros.
__device__ void softmax_row(float* y, int64_t n, double* scratch) {
  double mx = -CUDART_INF;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) mx = fmax(mx, static_cast<double>(y[j]));
  const float fmx = static_cast<float>(block_max(mx, scratch));
  if (fmx == -CUDART_INF_F) {
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) y[j] = 0.f;
    return;
  }
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    y[j] = expf(y[j] - fmx);
    sum += y[j];
  }
  const float inv = static_cast<float>(1.0 / block_sum(sum, scratch));
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) y[j] *= inv;
}

__global__ void softmax_forward_kernel(float* y, const float* x, int64_t n) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) y[r * n + j] = x[r * n + j];
  __syncthreads();
  softmax_row(y + r * n, n, scratch);
}

/// dx = y ⊙ (dy − Σ dy·y) for one row; dx may be dy.
__device__ void softmax_backward_row(float* dx, const float* dy, const float* y, int64_t n, double* scratch) {
  double dot = 0.0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dot += static_cast<double>(dy[j]) * y[j];
  const float d = static_cast<float>(block_sum(dot, scratch));
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) dx[j] = y[j] * (dy[j] - d);
}

__global__ void softmax_backward_kernel(float* dx, const float* dy, const float* y, int64_t n) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  softmax_backward_row(dx + r * n, dy + r * n, y + r * n, n, scratch);
}

/// Row r of P = (bi·heads + head)·s + i: mask query i's invisible keys, then softmax.
__global__ void attention_softmax_kernel(float* P, int64_t heads, int64_t s, const float* key_ok,
                                         const int64_t* first) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  const int64_t i = r % s, bi = r / s / heads;
  float* row = P + r * s;
  const int64_t j0 = first[i];
  for (int64_t j = threadIdx.x; j < s; j += blockDim.x) {
    const bool visible = j0 <= j && j <= i && (key_ok == nullptr || key_ok[bi * s + j] != 0.f);
    if (!visible) row[j] = -CUDART_INF_F;
  }
  __syncthreads();
  softmax_row(row, s, scratch);
}

__global__ void attention_softmax_backward_kernel(float* dP, const float* P, int64_t s) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  softmax_backward_row(dP + r * s, dP + r * s, P + r * s, s, scratch);
}

/// log-sum-exp of one row in double, and the first NaN/+inf column (−1 if none).
__device__ void row_stats(const float* x, int64_t V, double* scratch, double& lse, long long& bad) {
  long long first_bad = V;
  double mx = -CUDART_INF;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    if (isnan(x[j]) || x[j] == CUDART_INF_F) first_bad = j < first_bad ? j : first_bad;
    mx = fmax(mx, static_cast<double>(x[j]));
  }
  first_bad = block_min(first_bad, scratch);
  bad = first_bad == V ? -1 : first_bad;
  mx = block_max(mx, scratch);
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) sum += exp(static_cast<double>(x[j]) - mx);
  lse = mx + log(block_sum(sum, scratch));
}

__global__ void cross_entropy_forward_kernel(double* loss, float* losses, int64_t* bad_col,
                                             const float* logits, const int64_t* targets, int64_t V,
                                             double alpha) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  const int64_t t = targets[r];
  if (t == kIgnore) {
    if (threadIdx.x == 0) {
      loss[r] = 0.0;
      losses[r] = 0.f;
      bad_col[r] = -1;
    }
    return;
  }
  const float* x = logits + r * V;
  double lse = 0.0;
  long long bad = -1;
  row_stats(x, V, scratch, lse, bad);
  double sum_nlp = 0.0;  // Σ_j (lse − x_j)
  if (alpha > 0.0)
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) sum_nlp += lse - x[j];
  sum_nlp = block_sum(sum_nlp, scratch);
  if (threadIdx.x == 0) {
    double l = (1.0 - alpha) * (lse - x[t]);
    if (alpha > 0.0) l += alpha / static_cast<double>(V) * sum_nlp;
    loss[r] = l;
    losses[r] = static_cast<float>(l);
    bad_col[r] = bad;
  }
}

__global__ void cross_entropy_backward_kernel(float* dlogits, double* lse_out, int64_t* bad_col,
                                              const float* logits, const int64_t* targets, int64_t V,
                                              double alpha, double scale) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  const int64_t t = targets[r];
  if (t == kIgnore) {
    if (threadIdx.x == 0) {
      lse_out[r] = 0.0;
      bad_col[r] = -1;
    }
    return;
  }
  const float* x = logits + r * V;
  double lse = 0.0;
  long long bad = -1;
  row_stats(x, V, scratch, lse, bad);
  const double smooth = alpha / static_cast<double>(V);
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    const double p = exp(static_cast<double>(x[j]) - lse);
    const double target = (j == t ? 1.0 - alpha : 0.0) + smooth;
    dlogits[r * V + j] = static_cast<float>(scale * (p - target));
  }
  if (threadIdx.x == 0) {
    lse_out[r] = lse;
    bad_col[r] = bad;
  }
}

void launched(const char* kernel) {
  check_cuda(cudaGetLastError(), kernel);
}

unsigned grid(int64_t rows) {
  return static_cast<unsigned>(rows);
}

}  // namespace

void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                       const float* beta, int64_t n, int64_t h, float eps) {
  if (n == 0 || h == 0) return;
  layernorm_forward_kernel<<<grid(n), kRowThreads>>>(y, mean, rstd, x, gamma, beta, h, eps);
  launched("layernorm_forward kernel");
}

void layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* gamma, const float* mean, const float* rstd, int64_t n, int64_t h) {
  if (n == 0 || h == 0) return;
  layernorm_dx_kernel<<<grid(n), kRowThreads>>>(dx, dy, x, gamma, mean, rstd, h);
  launched("layernorm_backward dx kernel");
  layernorm_dparams_kernel<<<blocks_for(h), kThreads>>>(dgamma, dbeta, dy, x, mean, rstd, n, h);
  launched("layernorm_backward dgamma/dbeta kernel");
}

void rmsnorm_forward(float* y, float* rstd, const float* x, const float* w, int64_t n, int64_t h, float eps) {
  if (n == 0 || h == 0) return;
  rmsnorm_forward_kernel<<<grid(n), kRowThreads>>>(y, rstd, x, w, h, eps);
  launched("rmsnorm_forward kernel");
}

void rmsnorm_backward(float* dx, float* dweight, const float* dy, const float* x, const float* w,
                      const float* rstd, int64_t n, int64_t h) {
  if (n == 0 || h == 0) return;
  rmsnorm_dx_kernel<<<grid(n), kRowThreads>>>(dx, dy, x, w, rstd, h);
  launched("rmsnorm_backward dx kernel");
  rmsnorm_dweight_kernel<<<blocks_for(h), kThreads>>>(dweight, dy, x, rstd, n, h);
  launched("rmsnorm_backward dweight kernel");
}

void softmax_forward(float* y, const float* x, int64_t rows, int64_t n) {
  if (rows == 0 || n == 0) return;
  softmax_forward_kernel<<<grid(rows), kRowThreads>>>(y, x, n);
  launched("softmax_forward kernel");
}

void softmax_backward(float* dx, const float* dy, const float* y, int64_t rows, int64_t n) {
  if (rows == 0 || n == 0) return;
  softmax_backward_kernel<<<grid(rows), kRowThreads>>>(dx, dy, y, n);
  launched("softmax_backward kernel");
}

void attention_softmax(float* P, int64_t b, int64_t heads, int64_t s, const float* key_ok,
                       const int64_t* first) {
  if (b * heads * s == 0) return;
  attention_softmax_kernel<<<grid(b * heads * s), kRowThreads>>>(P, heads, s, key_ok, first);
  launched("attention softmax kernel");
}

void attention_softmax_backward(float* dP, const float* P, int64_t rows, int64_t s) {
  if (rows == 0 || s == 0) return;
  attention_softmax_backward_kernel<<<grid(rows), kRowThreads>>>(dP, P, s);
  launched("attention softmax backward kernel");
}

void cross_entropy_forward(double* loss, float* losses, int64_t* bad_col, const float* logits,
                           const int64_t* targets, int64_t n, int64_t V, double alpha) {
  if (n == 0) return;
  cross_entropy_forward_kernel<<<grid(n), kRowThreads>>>(loss, losses, bad_col, logits, targets, V, alpha);
  launched("cross_entropy_forward kernel");
}

void cross_entropy_backward(float* dlogits, double* lse, int64_t* bad_col, const float* logits,
                            const int64_t* targets, int64_t n, int64_t V, double alpha, double scale) {
  if (n == 0) return;
  cross_entropy_backward_kernel<<<grid(n), kRowThreads>>>(dlogits, lse, bad_col, logits, targets, V, alpha,
                                                          scale);
  launched("cross_entropy_backward kernel");
}

}  // namespace tpsp::cuda::kernels
