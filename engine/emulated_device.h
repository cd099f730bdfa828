// The emulated device: "cuda" tensors whose storage is host memory and whose ops are the CPU's, so
// that the device paths of the engine, the labs and the checker run on a machine without a GPU.
// It checks placement, not numerics: a host read of a device tensor (Tensor::data()), an op mixing
// devices, or a collective on a backend that does not accept the device raises exactly as on a GPU,
// while every value is the CPU's, bit for bit. `--device cuda-emulated` in tpsp-train, the demo and
// ./check selects it (engine/device_select.h); tests use it to run the GPU code paths in CI.
// The shape of the idea: PyTorch's "meta"/fake devices, which run device code without the device.
#pragma once

namespace tpsp::emulated {

/// Registers the emulated device as Device::cuda in this process: storage hooks over malloc/memcpy
/// (engine/device_hooks.h) and DeviceOps that copy their inputs to the CPU, run the CPU op and copy
/// the results back (engine/ops/device_ops.h). Idempotent. Throws ShapeError when a real cuda backend
/// is already registered ("the process already uses a real CUDA device").
void register_cuda();

/// True once register_cuda() ran in this process.
bool is_registered();

/// The host address behind an emulated device pointer (a host pointer is returned as it is). Device
/// pointers carry a tag that makes a host dereference fault, as on a GPU; the emulated transport
/// (engine/runtime) hands the untagged address to the host transport under it.
void* untag(const void* p);

/// Clock markers recorded so far (DeviceHooks::event_record: the device-timed compute spans' path).
long markers_recorded();

}  // namespace tpsp::emulated
