// tanh as a rational function that compilers vectorise (std::tanh is a scalar libm call per element).
// The [13/6] minimax rational on [-7.9053, 7.9053] used by Eigen's generic_fast_tanh_float (and, via
// Eigen/Sleef-style vector kernels, by PyTorch's CPU tanh): beyond ±7.9053 float tanh is ±1 within
// half an ulp, so the input is clamped there. Measured against glibc's tanhf on a 1e-4 grid over
// [-12, 12]: at most 6 ulp, 3.6e-7 absolute (tests/ops/test_gelu_fast.cpp keeps both figures).
#pragma once

namespace tpsp::ops::cpu {

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

}  // namespace tpsp::ops::cpu
