// Philox-4x32-10 counter-based generator (Salmon et al., "Parallel Random Numbers: As Easy as
// 1, 2, 3", SC 2011; the generator behind cuRAND and PyTorch's CUDA dropout).
//
// A value is a pure function of (key, counter): no state, so the random number for a global
// element index is the same whichever rank computes it and however the tensor is sharded.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace tpsp::random {

/// Philox-4x32 with 10 rounds: four 32-bit outputs for a 128-bit counter and a 64-bit key.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

/// Uniform float in [0, 1) for element `index` of the stream (seed, stream): Philox with
/// key = seed, counter = (index / 4, stream), output lane index % 4, top 24 bits.
float uniform(uint64_t seed, uint64_t stream, uint64_t index);

/// Standard normal for element `index` of (seed, stream) by Box–Muller on two Philox lanes.
float normal(uint64_t seed, uint64_t stream, uint64_t index);

/// FNV-1a 64-bit hash of a name (stream ids from parameter names and dropout sites).
uint64_t hash_name(std::string_view name);

}  // namespace tpsp::random
