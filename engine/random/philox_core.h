// The Philox-4x32-10 block function and the per-element uniform draw, written once for the host and
// the GPU (`__host__ __device__` under nvcc, plain inline functions elsewhere), so that a dropout
// mask drawn by a CUDA kernel is bit-identical to the one engine/ops/cpu/dropout.cpp draws for the
// same (seed, stream, global index). Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3"
// (SC 2011), with the Random123 constants. No std:: types: device code can call everything here.
#pragma once

#include <cstdint>

#include "engine/host_device.h"

namespace tpsp::random {

/// Four 32-bit lanes of one Philox block.
struct PhiloxLanes {
  uint32_t v[4];
};

/// Philox-4x32 with 10 rounds for counter (c0, c1, c2, c3) and key (k0, k1), low words first.
TPSP_HOST_DEVICE inline PhiloxLanes philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                                  uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments (golden ratio, √3 − 1)
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    // One round: two 32×32→64 multiplies, then the mix of hi, lo, counter and key.
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  return PhiloxLanes{{c0, c1, c2, c3}};
}

/// The block of (seed, stream) at counter `ctr`: key = seed, counter = (ctr, stream), low words first.
TPSP_HOST_DEVICE inline PhiloxLanes philox_block(uint64_t seed, uint64_t stream, uint64_t ctr) {
  return philox4x32_10(static_cast<uint32_t>(ctr), static_cast<uint32_t>(ctr >> 32),
                       static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32),
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

/// Top 24 bits of a lane as a float in [0, 1): exact in float, multiples of 2⁻²⁴.
TPSP_HOST_DEVICE inline float lane_to_unit(uint32_t lane) {
  return static_cast<float>(lane >> 8) * (1.0f / 16777216.0f);
}

/// Uniform in [0, 1) for element `index` of (seed, stream): lane index % 4 of block index / 4.
TPSP_HOST_DEVICE inline float uniform_at(uint64_t seed, uint64_t stream, uint64_t index) {
  return lane_to_unit(philox_block(seed, stream, index / 4).v[index % 4]);
}

/// The dropout decision of element `index` (global flat index) of (seed, stream): kept when its
/// uniform is >= p. engine/ops/cpu/dropout.cpp and engine/ops/cuda both decide with it.
TPSP_HOST_DEVICE inline bool dropout_keeps(uint64_t seed, uint64_t stream, uint64_t index, float p) {
  return uniform_at(seed, stream, index) >= p;
}

}  // namespace tpsp::random
