#include "engine/device.h"

namespace tpsp {

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::f32:
      return "f32";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
  }
  return "?";
}

const char* device_name(Device d) {
  return d == Device::cpu ? "cpu" : "cuda";
}

std::size_t dtype_size(DType dt) {
  return dt == DType::f32 ? 4 : 2;
}

}  // namespace tpsp
