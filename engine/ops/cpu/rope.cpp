// Rotary position embedding's rotation (engine/ops/rope.h) with the cos/sin table of rules.h's
// rope_table: per head of d dims, y_i = x_i·c − x_{i+d/2}·s and y_{i+d/2} = x_{i+d/2}·c + x_i·s, in float.
#include "engine/ops/cpu/cpu_ops.h"

namespace tpsp::ops::cpu {

Tensor CpuOps::rope_rotate(const Tensor& x, const std::vector<float>& cos, const std::vector<float>& sin,
                           int64_t d) {
  const int64_t s = x.size(0), b = x.size(1), width = x.size(2), heads = width / d, half = d / 2;
  Tensor y = Tensor::empty(x.shape());
  for (int64_t r = 0; r < s; ++r) {
    const float* c = cos.data() + r * half;
    const float* sn = sin.data() + r * half;
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t h = 0; h < heads; ++h) {
        const float* in = x.data() + (r * b + bi) * width + h * d;
        float* out = y.data() + (r * b + bi) * width + h * d;
        for (int64_t i = 0; i < half; ++i) {
          out[i] = in[i] * c[i] - in[i + half] * sn[i];
          out[i + half] = in[i + half] * c[i] + in[i] * sn[i];
        }
      }
  }
  return y;
}

}  // namespace tpsp::ops::cpu
