// exp and tanh written so that compilers vectorise a loop over them (std::exp and std::tanh are scalar
// libm calls per element). Both are branch-free: clamps and selects, multiply-adds, and for exp an
// integer add into the exponent bits. Loops over them are compiled with -fopenmp-simd and
// -fno-trapping-math (CMakeLists.txt: fast_math.cpp, gelu.cpp) so the selects become vector blends.
//
// tanh: the [13/6] minimax rational on [-7.9053, 7.9053] of Eigen's generic_fast_tanh_float: beyond
// ±7.9053 float tanh is ±1 within half an ulp, so the input is clamped there. Measured against glibc's
// tanhf on a 1e-4 grid over [-12, 12]: at most 6 ulp, 3.6e-7 absolute (tests/ops/test_fast_math.cpp).
#pragma once

#include <bit>
#include <cstdint>

namespace tpsp::ops::cpu {

/// e^x for float x: x = n·ln 2 + r with n = round(x / ln 2), |r| ≤ ln 2 / 2 (ln 2 split in two parts,
/// Cody & Waite), e^r by a degree-7 polynomial (Cephes expf's coefficients), times 2^n built in the
/// exponent bits. At most 1 ulp from glibc's expf on [-87, 88] (tests/ops/test_fast_math.cpp).
/// Below -87.34 (where expf leaves the normal range) the result is 0, so exp(-inf) = 0 as a masked
/// softmax needs; above 88.72 it saturates at 3.4e38 instead of inf. NaN gives NaN.
inline float exp_poly(float x) {
  constexpr float kLo = -87.3365447505531f, kHi = 88.7228391116729f;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  float c = x >= kLo ? x : kLo;  // NaN → kLo: the integer conversion below stays defined
  c = c > kHi ? kHi : c;
  const float n = (c * kLog2e + 12582912.f) - 12582912.f;  // round to nearest: 12582912 = 1.5·2^23
  const float r = (c - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  const float y = x < kLo ? 0.f : p * scale;
  return x == x ? y : x;
}

/// tanh(x) for float x, branch-free (clamps and multiply-adds; one division), so that a loop over
/// it vectorises. |error| ≤ 6 ulp of tanhf(x), ≤ 3.6e-7 absolute. NaN in gives NaN out.
inline float tanh_rational(float x) {
  constexpr float kClamp = 7.90531110763549805f;
  float c = x < -kClamp ? -kClamp : x;
  c = c > kClamp ? kClamp : c;
  const float c2 = c * c;
  float p = -2.76076847742355e-16f;  // odd numerator, x^13 ... x^1
  p = p * c2 + 2.00018790482477e-13f;
  p = p * c2 - 8.60467152213735e-11f;
  p = p * c2 + 5.12229709037114e-08f;
  p = p * c2 + 1.48572235717979e-05f;
  p = p * c2 + 6.37261928875436e-04f;
  p = p * c2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;  // even denominator, x^6 ... x^0
  q = q * c2 + 1.18534705686654e-04f;
  q = q * c2 + 2.26843463243900e-03f;
  q = q * c2 + 4.89352518554385e-03f;
  return p * c / q;
}

/// x[i] = e^(x[i] − shift) for i < n, in place (the step of a numerically stable softmax; shift is
/// the row maximum), vectorised (fast_math.cpp; an AVX2 clone on x86-64).
void exp_shifted(float* x, int64_t n, float shift);

}  // namespace tpsp::ops::cpu
