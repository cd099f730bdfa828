// bfloat16 (Kalamkar et al. 2019, "A Study of BFLOAT16 for Deep Learning Training"): the top 16 bits
// of an IEEE float32 — 8 exponent bits (float32's range), 7 stored mantissa bits (8 significant: a spacing
// of 2^-7 = 0.0078 just above 1.0, a unit roundoff of 2^-8 = 0.0039). Conversions round to nearest, ties to even, as torch.Tensor.to(torch.bfloat16)
// does; NaN stays NaN.
#pragma once

#include <cstdint>
#include <cstring>

namespace tpsp {

/// float32 → bfloat16 bits, round to nearest even.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
    return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

/// bfloat16 bits → float32 (exact).
inline float bf16_to_f32(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace tpsp
