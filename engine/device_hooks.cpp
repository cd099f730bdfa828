#include "engine/device_hooks.h"

#include <atomic>

#include "engine/error.h"

namespace tpsp {
namespace {

/// One table per non-CPU device (only cuda today). Registered once at start-up, read by every
/// allocation: the pointer is atomic so a late registration from another thread is seen whole.
std::atomic<const DeviceHooks*> g_cuda_hooks{nullptr};

}  // namespace

void register_device_hooks(Device device, const DeviceHooks& hooks) {
  TPSP_CHECK(device != Device::cpu, "register_device_hooks: cpu storage is built in and cannot be replaced");
  TPSP_CHECK(hooks.alloc && hooks.free && hooks.copy && hooks.copy_2d && hooks.fill && hooks.convert,
             "register_device_hooks: every hook of the ", device_name(device), " table must be set");
  // Leaked on purpose: tensors freed during static destruction still find their free().
  g_cuda_hooks.store(new DeviceHooks(hooks));
}

const DeviceHooks* device_hooks(Device device) {
  return device == Device::cuda ? g_cuda_hooks.load() : nullptr;
}

const DeviceHooks& require_device_hooks(Device device, const char* what) {
  const DeviceHooks* h = device_hooks(device);
  TPSP_CHECK(h != nullptr, what, ": tensor storage on ", device_name(device),
             " is not available in this process (no ", device_name(device),
             " backend is registered: a build without the GPU backend, or tpsp::cuda::register_backend() "
             "was not called)");
  return *h;
}

}  // namespace tpsp
