// Token and position embeddings with vocab-parallel masking (Megatron-LM VocabParallelEmbedding):
// a rank holding rows [vocab_start, vocab_start + V_local) of wte writes zero rows for other ids.
#include "engine/ops/embedding.h"

#include <algorithm>

#include "engine/ops/cpu/cpu_ops.h"

namespace tpsp::ops::cpu {

Tensor CpuOps::embedding_forward(const TokenBatch& ids, const Tensor& wte, int64_t vocab_start) {
  const int64_t v_local = wte.size(0), h = wte.size(1), b = ids.b, s = ids.s;
  Tensor out({s, b, h});
  for (int64_t si = 0; si < s; ++si) {
    for (int64_t bi = 0; bi < b; ++bi) {
      const int64_t row = ids.at(bi, si) - vocab_start;
      if (row < 0 || row >= v_local) continue;  // another rank's slice: zero row
      const float* src = wte.data() + row * h;
      std::copy(src, src + h, out.data() + (si * b + bi) * h);
    }
  }
  return out;
}

Tensor CpuOps::embedding_backward(const Tensor& dout, const TokenBatch& ids, int64_t vocab_local,
                                  int64_t vocab_start) {
  const int64_t h = dout.size(2), b = ids.b, s = ids.s;
  Tensor dwte({vocab_local, h});
  // Scatter-add in (si, bi) order: repeated ids accumulate.
  for (int64_t si = 0; si < s; ++si) {
    for (int64_t bi = 0; bi < b; ++bi) {
      const int64_t row = ids.at(bi, si) - vocab_start;
      if (row < 0 || row >= vocab_local) continue;
      const float* src = dout.data() + (si * b + bi) * h;
      float* dst = dwte.data() + row * h;
      for (int64_t j = 0; j < h; ++j) dst[j] += src[j];
    }
  }
  return dwte;
}

void CpuOps::position_embedding_add(Tensor& x, const Tensor& wpe, int64_t seq_start) {
  const int64_t s = x.size(0), b = x.size(1), h = x.size(2);
  for (int64_t si = 0; si < s; ++si) {
    const float* pos = wpe.data() + (seq_start + si) * h;
    for (int64_t bi = 0; bi < b; ++bi) {
      float* dst = x.data() + (si * b + bi) * h;
      for (int64_t j = 0; j < h; ++j) dst[j] += pos[j];
    }
  }
}

Tensor CpuOps::position_embedding_backward(const Tensor& dx, int64_t max_seq, int64_t seq_start) {
  const int64_t s = dx.size(0), b = dx.size(1), h = dx.size(2);
  Tensor dwpe({max_seq, h});
  for (int64_t si = 0; si < s; ++si) {
    float* dst = dwpe.data() + (seq_start + si) * h;
    for (int64_t bi = 0; bi < b; ++bi) {
      const float* src = dx.data() + (si * b + bi) * h;
      for (int64_t j = 0; j < h; ++j) dst[j] += src[j];
    }
  }
  return dwpe;
}

}  // namespace tpsp::ops::cpu
