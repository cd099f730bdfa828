// Error checks and launch sizes shared by the GPU backend's sources (engine/ops/cuda/*). Every CUDA
// or cuBLAS failure becomes a std::runtime_error naming the call and the runtime's error name, e.g.
// "cudaMalloc(4096 bytes): cudaErrorMemoryAllocation (out of memory)". All work runs on the legacy
// default stream (stream 0), which orders every kernel, copy and GEMM of the process.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tpsp::cuda {

/// Throws std::runtime_error "<what>: <error name> (<error string>)" unless e is cudaSuccess.
inline void check_cuda(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess)
    throw std::runtime_error(what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

/// Threads per block of the element-wise kernels, and the grid that covers n elements.
constexpr int kThreads = 256;
inline unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>((n + kThreads - 1) / kThreads);
}

/// The device this process uses (cudaSetDevice'd on every thread that calls into the backend,
/// including a ProcessGroup's comm thread): 0 unless register_backend chose another.
int process_device();
/// Makes process_device() current on the calling thread (cheap when it already is).
void use_process_device();

/// A device copy of a small host array (token ids, targets, per-row results), freed with the object.
template <class T>
class DeviceArray {
 public:
  /// n uninitialised elements.
  explicit DeviceArray(std::size_t n) : n_(n) {
    use_process_device();
    if (n_)
      check_cuda(cudaMalloc(&p_, n_ * sizeof(T)), "cudaMalloc(" + std::to_string(n_ * sizeof(T)) + " bytes)");
  }
  /// A copy of `host`.
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    if (n_)
      check_cuda(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return p_; }
  /// The elements, copied to the host.
  std::vector<T> to_host() const {
    std::vector<T> out(n_);
    if (n_)
      check_cuda(cudaMemcpy(out.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return out;
  }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace tpsp::cuda
