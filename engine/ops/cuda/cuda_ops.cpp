#include "engine/ops/cuda/cuda_ops.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <stdexcept>

#include "engine/error.h"

namespace tpsp::cuda {

cudaError_t bias_add_device(float* y, const float* b, long long n, long long m);

namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(s));
}
struct DeviceBuffer {
  float* p = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { check(cudaMalloc(&p, bytes), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(p); }
};
}  // namespace

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cudaGetErrorName(e);
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device";
  return n;
}

Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& b) {
  TPSP_CHECK(w.dim() == 2 && x.size(-1) == w.size(1), "cuda linear: x ", shape_str(x.shape()), " and w ",
             shape_str(w.shape()), " do not match (x's last dim must equal w's dim 1)");
  const int64_t k = w.size(1), m = w.size(0), n = x.numel() / k;
  Shape out_shape = x.shape();
  out_shape.back() = m;
  Tensor y(out_shape);
  DeviceBuffer dx(x.nbytes()), dw(w.nbytes()), dy(y.nbytes());
  check(cudaMemcpy(dx.p, x.data(), x.nbytes(), cudaMemcpyHostToDevice), "copy x");
  check(cudaMemcpy(dw.p, w.data(), w.nbytes(), cudaMemcpyHostToDevice), "copy w");
  cublasHandle_t h = nullptr;
  check(cublasCreate(&h), "cublasCreate");
  std::unique_ptr<cublasContext, decltype(&cublasDestroy)> guard(h, cublasDestroy);
  const float one = 1.f, zero = 0.f;
  // Row-major Y[n, m] = X[n, k] · W[m, k]ᵀ is column-major Yᵀ[m, n] = W · Xᵀ.
  check(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n),
                    static_cast<int>(k), &one, dw.p, static_cast<int>(k), dx.p, static_cast<int>(k), &zero,
                    dy.p, static_cast<int>(m)),
        "cublasSgemm");
  if (b.defined()) {
    TPSP_CHECK(b.numel() == m, "cuda linear: bias of ", b.numel(), " elements for ", m, " outputs");
    DeviceBuffer db(b.nbytes());
    check(cudaMemcpy(db.p, b.data(), b.nbytes(), cudaMemcpyHostToDevice), "copy b");
    check(bias_add_device(dy.p, db.p, n, m), "bias_add kernel");
  }
  check(cudaMemcpy(y.data(), dy.p, y.nbytes(), cudaMemcpyDeviceToHost), "copy y");
  return y;
}

}  // namespace tpsp::cuda
