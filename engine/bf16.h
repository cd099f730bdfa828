// bfloat16 (Kalamkar et al. 2019, "A Study of BFLOAT16 for Deep Learning Training"): the top 16 bits
// of an IEEE float32 — 8 exponent bits (float32's range), 7 stored mantissa bits (8 significant: a spacing
// of 2^-7 = 0.0078 just above 1.0, a unit roundoff of 2^-8 = 0.0039). Conversions round to nearest, ties to
// even, as torch.Tensor.to(torch.bfloat16) does; NaN stays NaN. The rounding is written once, on the float's
// bits, for host code and the CUDA kernels (engine/ops/cuda/storage.cu) alike, so a tensor converted on
// either device has the same bits.
#pragma once

#include <cstdint>
#include <cstring>

#include "engine/host_device.h"

namespace tpsp {

/// The bfloat16 bits of the float32 whose bits are u: round to nearest even; a NaN stays a (quiet) NaN.
TPSP_HOST_DEVICE inline uint16_t bf16_bits_of_f32_bits(uint32_t u) {
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
    return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

/// The float32 bits of bfloat16 bits b (exact).
TPSP_HOST_DEVICE inline uint32_t f32_bits_of_bf16(uint16_t b) {
  return static_cast<uint32_t>(b) << 16;
}

/// float32 → bfloat16 bits, round to nearest even.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return bf16_bits_of_f32_bits(u);
}

/// bfloat16 bits → float32 (exact).
inline float bf16_to_f32(uint16_t b) {
  const uint32_t u = f32_bits_of_bf16(b);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace tpsp
