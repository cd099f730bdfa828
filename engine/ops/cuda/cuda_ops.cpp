// The GPU backend's registration and the host-side helpers of its ops (op_args.h): device pointers,
// and a dropout key's index from the shared geometry (engine/ops/rules.h). The ops themselves are
// cuda_ops_impl.cpp; semantics, shapes and errors: the public headers engine/ops/*.h.
#include "engine/ops/cuda/cuda_ops.h"

#include <cuda_runtime.h>

#include <cmath>
#include <mutex>
#include <vector>

#include "engine/device_hooks.h"
#include "engine/error.h"
#include "engine/ops/cuda/attention.h"
#include "engine/ops/cuda/cuda_check.h"
#include "engine/ops/cuda/gemm.h"
#include "engine/ops/cuda/kernels.h"
#include "engine/ops/cuda/op_args.h"
#include "engine/ops/device_ops.h"
#include "engine/ops/ops.h"
#include "engine/ops/rules.h"

namespace tpsp::cuda {

DeviceHooks storage_hooks();          // storage.cu
void set_process_device(int device);  // storage.cu
ops::DeviceOps& cuda_ops();           // cuda_ops_impl.cpp

float* dptr(Tensor& t, const char* what) {
  TPSP_CHECK(t.device() == Device::cuda && t.dtype() == DType::f32, what,
             ": expected an f32 cuda tensor, got ", dtype_name(t.dtype()), " on ", device_name(t.device()));
  return static_cast<float*>(t.raw_data());
}

const float* dptr(const Tensor& t, const char* what) {
  return dptr(const_cast<Tensor&>(t), what);
}

DropoutIndex make_dropout_index(const Shape& local_shape, float p, const ops::DropoutKey& key) {
  const ops::DropoutGeometry g = ops::rules::dropout(local_shape, p, key);
  const std::size_t nd = local_shape.size();
  TPSP_CHECK(nd <= static_cast<std::size_t>(DropoutIndex::kMaxDims), "dropout on cuda: ", nd,
             " dims; at most ", DropoutIndex::kMaxDims, " are supported");
  DropoutIndex idx;
  idx.nd = static_cast<int>(nd);
  for (std::size_t d = 0; d < nd; ++d) {
    idx.local[d] = local_shape[d];
    idx.offset[d] = g.offset[d];
    idx.gstride[d] = g.gstride[d];
  }
  idx.seed = key.seed;
  idx.stream = key.stream;
  idx.p = p;
  idx.keep_value = g.keep_value;
  return idx;
}

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

void register_backend(int device) {
  static std::mutex mu;
  static int registered = -1;
  std::lock_guard<std::mutex> lock(mu);
  TPSP_CHECK(device >= 0, "register_backend: device ", device, " is negative");
  if (registered == device) return;
  TPSP_CHECK(registered < 0, "register_backend: this process already uses CUDA device ", registered,
             "; it cannot switch to device ", device);
  set_process_device(device);
  register_device_hooks(Device::cuda, storage_hooks());
  ops::register_device_ops(Device::cuda, &cuda_ops());
  registered = device;
}

Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& b) {
  TPSP_CHECK(w.dim() == 2 && x.dim() >= 1 && x.size(-1) == w.size(1), "cuda linear: x ", shape_str(x.shape()),
             " and w ", shape_str(w.shape()), " do not match (x's last dim must equal w's dim 1)");
  Tensor y = ops::matmul_forward(x.to(Device::cuda), w.to(Device::cuda));
  if (b.defined()) {
    TPSP_CHECK(b.numel() == w.size(0), "cuda linear: bias of ", b.numel(), " elements for ", w.size(0),
               " outputs");
    ops::bias_add_forward(y, b.to(Device::cuda));
  }
  return y.to(Device::cpu);
}

}  // namespace tpsp::cuda
