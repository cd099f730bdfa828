// The CUDA storage of Tensor (engine/device_hooks.h): cudaMalloc/cudaFree, copies in any direction,
// 2-D copies for narrow_copy/cat, and the fill and f32 ↔ bf16 conversion kernels. bf16 rounding is
// the host's (engine/bf16.h): nearest even, NaN stays NaN, so a tensor converted on either device has
// the same bits.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "engine/bf16.h"
#include "engine/device_hooks.h"
#include "engine/ops/cuda/cuda_check.h"

namespace tpsp::cuda {
namespace {

int g_device = 0;

__device__ uint16_t f32_to_bf16_rne(float f) {
  return bf16_bits_of_f32_bits(__float_as_uint(f));
}

__device__ float bf16_bits_to_f32(uint16_t b) {
  return __uint_as_float(f32_bits_of_bf16(b));
}

__global__ void fill_f32(float* p, float v, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}

__global__ void fill_u16(uint16_t* p, uint16_t v, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}

__global__ void f32_to_bf16_kernel(uint16_t* dst, const float* src, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = f32_to_bf16_rne(src[i]);
}

__global__ void bf16_to_f32_kernel(float* dst, const uint16_t* src, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = bf16_bits_to_f32(src[i]);
}

void* alloc(std::size_t bytes) {
  use_process_device();
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
  return p;
}

void release(void* p) noexcept {
  // Errors here (a context torn down at exit) have nobody to report to: ignored, never thrown.
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != g_device) cudaSetDevice(g_device);
  cudaFree(p);
}

void copy(void* dst, bool dst_on_device, const void* src, bool src_on_device, std::size_t bytes) {
  use_process_device();
  const cudaMemcpyKind kind = dst_on_device
                                  ? (src_on_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                  : (src_on_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  check_cuda(cudaMemcpy(dst, src, bytes, kind), "cudaMemcpy(" + std::to_string(bytes) + " bytes)");
}

void copy_2d(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
             std::size_t height) {
  use_process_device();
  check_cuda(cudaMemcpy2D(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice),
             "cudaMemcpy2D(" + std::to_string(height) + " rows of " + std::to_string(width) + " bytes)");
}

void fill(void* dst, DType dt, float value, std::size_t n) {
  use_process_device();
  const int64_t count = static_cast<int64_t>(n);
  if (dt == DType::f32)
    fill_f32<<<blocks_for(count), kThreads>>>(static_cast<float*>(dst), value, count);
  else
    fill_u16<<<blocks_for(count), kThreads>>>(static_cast<uint16_t*>(dst), f32_to_bf16(value), count);
  check_cuda(cudaGetLastError(), "fill kernel");
}

void convert(void* dst, DType dst_dt, const void* src, DType src_dt, std::size_t n) {
  use_process_device();
  const int64_t count = static_cast<int64_t>(n);
  if (dst_dt == DType::bf16 && src_dt == DType::f32)
    f32_to_bf16_kernel<<<blocks_for(count), kThreads>>>(static_cast<uint16_t*>(dst),
                                                        static_cast<const float*>(src), count);
  else if (dst_dt == DType::f32 && src_dt == DType::bf16)
    bf16_to_f32_kernel<<<blocks_for(count), kThreads>>>(static_cast<float*>(dst),
                                                        static_cast<const uint16_t*>(src), count);
  else
    throw std::runtime_error(std::string("convert: no conversion from ") + dtype_name(src_dt) + " to " +
                             dtype_name(dst_dt) + " on cuda");
  check_cuda(cudaGetLastError(), "convert kernel");
}

}  // namespace

int process_device() {
  return g_device;
}

void use_process_device() {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == g_device) return;
  check_cuda(cudaSetDevice(g_device), "cudaSetDevice(" + std::to_string(g_device) + ")");
}

void set_process_device(int device) {
  g_device = device;
}

// The device's clock for compute spans: CUDA events on the legacy default stream, where every op runs.
void* event_record() {
  use_process_device();
  cudaEvent_t e = nullptr;
  check_cuda(cudaEventCreate(&e), "cudaEventCreate (a compute span's marker)");
  check_cuda(cudaEventRecord(e, 0), "cudaEventRecord (a compute span's marker)");
  return e;
}
double event_elapsed_s(void* a, void* b) {
  check_cuda(cudaEventSynchronize(static_cast<cudaEvent_t>(b)),
             "cudaEventSynchronize (a compute span's end)");
  check_cuda(cudaEventSynchronize(static_cast<cudaEvent_t>(a)),
             "cudaEventSynchronize (a compute span's start)");
  float ms = 0.f;
  check_cuda(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(a), static_cast<cudaEvent_t>(b)),
             "cudaEventElapsedTime (a compute span)");
  return static_cast<double>(ms) * 1e-3;
}
void event_release(void* e) noexcept {
  cudaEventDestroy(static_cast<cudaEvent_t>(e));
}

DeviceHooks storage_hooks() {
  DeviceHooks h;
  h.event_record = event_record;
  h.event_elapsed_s = event_elapsed_s;
  h.event_release = event_release;
  h.alloc = alloc;
  h.free = release;
  h.copy = copy;
  h.copy_2d = copy_2d;
  h.fill = fill;
  h.convert = convert;
  return h;
}

}  // namespace tpsp::cuda
