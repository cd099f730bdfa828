// The CPU's ops object (cpu_ops.h); its members are defined by the kernel files beside it.
#include "engine/ops/cpu/cpu_ops.h"

namespace tpsp::ops {

DeviceOps& cpu_ops() {
  static cpu::CpuOps ops;
  return ops;
}

}  // namespace tpsp::ops
