// Philox-4x32-10 (Salmon et al., SC 2011) with the Random123 constants (the block function is
// philox_core.h's, shared with the GPU), and the uniform/normal draws keyed by (seed, stream,
// element index) that initialisation and dropout use.
#include "engine/random/philox.h"

#include <cmath>
#include <numbers>

#include "engine/random/philox_core.h"

namespace tpsp::random {
namespace {

/// The four lanes for key = seed (low word first) and counter = (ctr, stream), low words first.
std::array<uint32_t, 4> block(uint64_t seed, uint64_t stream, uint64_t ctr) {
  const PhiloxLanes l = philox_block(seed, stream, ctr);
  return {l.v[0], l.v[1], l.v[2], l.v[3]};
}

}  // namespace

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  const PhiloxLanes l = philox4x32_10(counter[0], counter[1], counter[2], counter[3], key[0], key[1]);
  return {l.v[0], l.v[1], l.v[2], l.v[3]};
}

float uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return uniform_at(seed, stream, index);
}

// Element `index` uses the Philox block at counter (index / 2, stream): lanes (0, 1) for even
// indices, (2, 3) for odd ones. u1 = (top24(a) + 1)·2⁻²⁴ ∈ (0, 1] keeps the log finite,
// u2 = top24(b)·2⁻²⁴ ∈ [0, 1); z = √(−2 ln u1)·cos(2π u2), evaluated in double, rounded once.
float normal(uint64_t seed, uint64_t stream, uint64_t index) {
  const std::array<uint32_t, 4> lanes = block(seed, stream, index / 2);
  const std::size_t first = 2 * static_cast<std::size_t>(index % 2);
  const double u1 = (static_cast<double>(lanes[first] >> 8) + 1.0) / 16777216.0;
  const double u2 = static_cast<double>(lanes[first + 1] >> 8) / 16777216.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

uint64_t hash_name(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64-bit offset basis
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;  // FNV 64-bit prime
  }
  return h;
}

}  // namespace tpsp::random
