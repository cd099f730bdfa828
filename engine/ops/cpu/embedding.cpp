// Token and position embeddings with vocab-parallel masking (Megatron-LM VocabParallelEmbedding):
// a rank holding rows [vocab_start, vocab_start + V_local) of wte writes zero rows for other ids.
#include "engine/ops/embedding.h"

#include <algorithm>

#include "engine/error.h"
#include "engine/ops/cpu/ops.h"

namespace tpsp::ops::cpu {
namespace {

void check_ids(const TokenBatch& ids, const char* what) {
  TPSP_CHECK(ids.b >= 0 && ids.s >= 0 && static_cast<int64_t>(ids.ids.size()) == ids.b * ids.s, what, ": ",
             ids.ids.size(), " ids do not fill [b, s] = [", ids.b, ", ", ids.s, "]");
}

}  // namespace

Tensor embedding_forward(const TokenBatch& ids, const Tensor& wte, int64_t vocab_start) {
  check_ids(ids, "embedding_forward");
  TPSP_CHECK(wte.dim() == 2, "embedding_forward: wte must be [V_local, h], got ", shape_str(wte.shape()));
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

Tensor embedding_backward(const Tensor& dout, const TokenBatch& ids, int64_t vocab_local,
                          int64_t vocab_start) {
  check_ids(ids, "embedding_backward");
  TPSP_CHECK(dout.dim() == 3 && dout.size(0) == ids.s && dout.size(1) == ids.b,
             "embedding_backward: dout must be [s, b, h] = [", ids.s, ", ", ids.b, ", h], got ",
             shape_str(dout.shape()));
  TPSP_CHECK(vocab_local >= 0, "embedding_backward: vocab_local ", vocab_local, " is negative");
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

void position_embedding_add(Tensor& x, const Tensor& wpe, int64_t seq_start) {
  TPSP_CHECK(x.dim() == 3 && wpe.dim() == 2 && x.size(2) == wpe.size(1),
             "position_embedding_add: x must be [s, b, h] and wpe [max_seq, h], got x ", shape_str(x.shape()),
             " and wpe ", shape_str(wpe.shape()));
  const int64_t s = x.size(0), b = x.size(1), h = x.size(2), max_seq = wpe.size(0);
  TPSP_CHECK(seq_start >= 0 && seq_start + s <= max_seq, "position_embedding_add: positions [", seq_start,
             ", ", seq_start + s, ") are outside [0, ", max_seq, ") of wpe");
  for (int64_t si = 0; si < s; ++si) {
    const float* pos = wpe.data() + (seq_start + si) * h;
    for (int64_t bi = 0; bi < b; ++bi) {
      float* dst = x.data() + (si * b + bi) * h;
      for (int64_t j = 0; j < h; ++j) dst[j] += pos[j];
    }
  }
}

Tensor position_embedding_backward(const Tensor& dx, int64_t max_seq, int64_t seq_start) {
  TPSP_CHECK(dx.dim() == 3, "position_embedding_backward: dx must be [s, b, h], got ", shape_str(dx.shape()));
  const int64_t s = dx.size(0), b = dx.size(1), h = dx.size(2);
  TPSP_CHECK(seq_start >= 0 && seq_start + s <= max_seq, "position_embedding_backward: positions [",
             seq_start, ", ", seq_start + s, ") are outside [0, ", max_seq, ")");
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
