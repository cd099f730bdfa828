// The element types and devices of tensor storage, below Tensor so that the device hooks
// (engine/device_hooks.h) can name them without including the tensor that uses those hooks.
#pragma once

#include <cstddef>

namespace tpsp {

/// Element type: f32 and bf16 have storage; f16 is named for a GPU backend.
enum class DType { f32, bf16, f16 };

/// Where the storage lives. cuda storage exists once the GPU backend registered its hooks
/// (engine/device_hooks.h: tpsp::cuda::register_backend()); without them, asking for it raises
/// ShapeError naming the device and the rule.
enum class Device { cpu, cuda };

/// "cpu" or "cuda".
const char* device_name(Device d);

/// Name of a dtype ("f32", "bf16", "f16").
const char* dtype_name(DType dt);
/// Size of one element in bytes (4 for f32, 2 for bf16/f16).
std::size_t dtype_size(DType dt);

}  // namespace tpsp
