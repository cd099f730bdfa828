// Device memory hooks: how Tensor allocates, copies, fills and converts storage on a device other
// than the CPU, without the engine library depending on that device's runtime. A device library
// fills the table once (the GPU backend: tpsp::cuda::register_backend(), engine/ops/cuda/cuda_ops.h);
// until then, asking for storage on that device raises ShapeError naming the device and the rule.
// The shape of the idea: PyTorch's c10::Allocator registry and DeviceGuardImpl table, reduced to
// what Tensor needs.
#pragma once

#include <cstddef>

#include "engine/device.h"

namespace tpsp {

/// The storage operations of one device. Every function raises (std::runtime_error naming the
/// device runtime's error) on failure, except free. Pointers are device pointers unless named host.
/// All calls are ordered with each other and with the device's ops (one stream per process, the
/// legacy default stream for CUDA): a copy to the host returns once the bytes are there.
struct DeviceHooks {
  /// A block of `bytes` (> 0) bytes of device memory.
  void* (*alloc)(std::size_t bytes) = nullptr;
  /// Frees a block from alloc. Never throws.
  void (*free)(void* p) noexcept = nullptr;
  /// Copies `bytes` bytes; each side is on the device or the host as its flag says.
  void (*copy)(void* dst, bool dst_on_device, const void* src, bool src_on_device,
               std::size_t bytes) = nullptr;
  /// Copies `height` rows of `width` bytes, row i from src + i·spitch to dst + i·dpitch, both on
  /// the device (narrow_copy and cat along an inner dim).
  void (*copy_2d)(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
                  std::size_t height) = nullptr;
  /// Writes `value` (rounded to nearest even for bf16) into n elements of dtype dt.
  void (*fill)(void* dst, DType dt, float value, std::size_t n) = nullptr;
  /// dst[i] = src[i] converted from src_dt to dst_dt (f32 ↔ bf16), n elements, both on the device.
  void (*convert)(void* dst, DType dst_dt, const void* src, DType src_dt, std::size_t n) = nullptr;

  // Optional: the device's own clock, for compute spans (engine/trace/span.h) of work that the host only
  // queues (CUDA events). Without them, spans of device ops use the host clock.
  /// A marker recorded now in the device's queue (a CUDA event); its time is when the device reaches it.
  void* (*event_record)() = nullptr;
  /// Seconds from marker a to marker b on the device's clock; waits until the device reached both.
  double (*event_elapsed_s)(void* a, void* b) = nullptr;
  /// Frees a marker. Never throws.
  void (*event_release)(void* e) noexcept = nullptr;
};

/// Installs the hooks of `device` (replacing earlier ones; the table must outlive every tensor of
/// that device). ShapeError for Device::cpu, whose storage is built in.
void register_device_hooks(Device device, const DeviceHooks& hooks);

/// The hooks of `device`, or nullptr when none are registered (always nullptr for Device::cpu).
const DeviceHooks* device_hooks(Device device);

/// The hooks of `device`; throws ShapeError naming `what`, the device and the rule when none are
/// registered: "<what>: tensor storage on cuda is not available in this process (no cuda backend is
/// registered: a build without the GPU backend, or tpsp::cuda::register_backend() was not called)".
const DeviceHooks& require_device_hooks(Device device, const char* what);

}  // namespace tpsp
