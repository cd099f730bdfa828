// Philox-4x32-10 (Salmon et al., SC 2011) with the Random123 constants, and the uniform/normal
// draws keyed by (seed, stream, element index) that initialisation and dropout use.
#include "engine/random/philox.h"

#include <cmath>
#include <numbers>

namespace tpsp::random {
namespace {

constexpr uint32_t kM0 = 0xD2511F53u;  // round multipliers
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;  // Weyl key increments (golden ratio, √3 − 1)
constexpr uint32_t kW1 = 0xBB67AE85u;

/// One Philox round: two 32×32→64 multiplies, then the S-box-like mix of hi, lo, counter and key.
std::array<uint32_t, 4> round(const std::array<uint32_t, 4>& c, const std::array<uint32_t, 2>& k) {
  const uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
  const uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
  const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
  const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
  return {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
}

/// The four lanes for key = seed (low word first) and counter = (ctr, stream), low words first.
std::array<uint32_t, 4> block(uint64_t seed, uint64_t stream, uint64_t ctr) {
  return philox4x32({static_cast<uint32_t>(ctr), static_cast<uint32_t>(ctr >> 32),
                     static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                    {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

/// Top 24 bits of a lane as a float in [0, 1): exact in float, multiples of 2⁻²⁴.
float to_unit(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

}  // namespace

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    counter = round(counter, key);
  }
  return counter;
}

float uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  return to_unit(block(seed, stream, index / 4)[index % 4]);
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
