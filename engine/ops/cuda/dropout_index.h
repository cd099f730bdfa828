// Where a local element sits in the whole (unsharded) tensor, for dropout masks drawn on the GPU:
// the same global flat index engine/ops/cpu/dropout.cpp computes from DropoutKey (global_shape,
// offset), so with random::dropout_keeps (engine/random/philox_core.h) a CUDA mask has the CPU's bits.
#pragma once

#include <cstdint>

#include "engine/random/philox_core.h"

namespace tpsp::cuda {

/// Up to kMaxDims dims: the local extents, the local tensor's offset in the global one, and the
/// global row-major strides; plus the generator key and the keep decision's p and kept value.
struct DropoutIndex {
  static constexpr int kMaxDims = 8;
  int nd = 0;
  int64_t local[kMaxDims] = {};
  int64_t offset[kMaxDims] = {};
  int64_t gstride[kMaxDims] = {};
  uint64_t seed = 0;
  uint64_t stream = 0;
  float p = 0.f;
  float keep_value = 1.f;
};

/// Global flat index of local flat index `flat` (row-major in both). A scalar (nd 0) is index 0.
TPSP_HOST_DEVICE inline uint64_t global_index(const DropoutIndex& d, int64_t flat) {
  uint64_t g = 0;
  for (int k = d.nd - 1; k >= 0; --k) {
    const int64_t c = flat % d.local[k];
    flat /= d.local[k];
    g += static_cast<uint64_t>((c + d.offset[k]) * d.gstride[k]);
  }
  return g;
}

/// The mask value of local element `flat`: keep_value if kept, else 0 (1/(1−p) or 0, as the CPU's).
TPSP_HOST_DEVICE inline float mask_value(const DropoutIndex& d, int64_t flat) {
  return random::dropout_keeps(d.seed, d.stream, global_index(d, flat), d.p) ? d.keep_value : 0.f;
}

}  // namespace tpsp::cuda
