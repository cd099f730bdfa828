// The vectorised loops over fast_math.h's functions that other ops call (softmax, attention).
// Compiled with -fopenmp-simd -fno-trapping-math (CMakeLists.txt).
#include "engine/ops/cpu/fast_math.h"

#include "engine/ops/cpu/vector_clones.h"

namespace tpsp::ops::cpu {

TPSP_VECTOR_CLONES void exp_shifted(float* __restrict x, int64_t n, float shift) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] = exp_poly(x[i] - shift);
}

}  // namespace tpsp::ops::cpu
