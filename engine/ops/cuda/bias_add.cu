// y[i, j] += b[j] for a row-major [n, m] matrix on the device (one thread per element).
#include <cuda_runtime.h>

namespace tpsp::cuda {

__global__ void bias_add_kernel(float* y, const float* b, long long n, long long m) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n * m) y[i] += b[i % m];
}

/// Launches bias_add_kernel on the default stream; returns the launch error.
cudaError_t bias_add_device(float* y, const float* b, long long n, long long m) {
  const long long total = n * m;
  if (total == 0) return cudaSuccess;
  const int threads = 256;
  const unsigned blocks = static_cast<unsigned>((total + threads - 1) / threads);
  bias_add_kernel<<<blocks, threads>>>(y, b, n, m);
  return cudaGetLastError();
}

}  // namespace tpsp::cuda
