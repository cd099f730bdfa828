// lab02 scenarios, shared by the ranks and the grader: the vocab-parallel embedding, the
// vocab-parallel cross entropy, the RNG tracker (the transformer layer is in checkers/layer/).
// V=37 is padded to a multiple of tp (38, 39, 40): padded rows/columns must get zero gradient.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "checkers/inputs.h"

namespace tpsp::checkers::lab02 {

constexpr int64_t S = 12, B = 2, H = 24, V = 37;
constexpr uint64_t kF32 = 4;
/// Backward passes of the embedding scenario (its weight gradient must accumulate).
constexpr int kPasses = 2;
/// Numbers drawn per tracker draw in the RNG scenarios.
constexpr int64_t kDraw = 8;
/// The tracker's seed in the RNG scenarios: the models' seed (model_seed_of the check's) with the bits
/// of 0xA5A5A5A5 set in its high half, which is then never zero, so code that keeps a seed in 32 bits
/// (or an int) fails at every check seed.
inline uint64_t tracker_seed(uint64_t seed) {
  return seed | 0xA5A5A5A500000000ull;
}

/// The word-embedding table padded to `rows` (>= V) rows, split by rows (checkers/inputs.h: the grader
/// gets it whole, a rank its rows); drawn [rows, 64] and cut to h columns.
inline Tensor wte(const InputDraw& d, int64_t rows) {
  return d.split(0)({"emb.wte", {rows, 64}}).narrow_copy(1, 0, H);
}
/// Ids [b, s] in [0, V): every rank's, as in Megatron.
inline TokenBatch emb_ids(const InputDraw& d) {
  return input_tokens(B, S, V, d, "emb.ids");
}
/// The output gradient: whole, or split along s under SP.
inline Tensor emb_dout(const InputDraw& d, bool sp) {
  return (sp ? d.split(0) : d)({"emb.dout", {S, B, H}});
}

/// The value of every padded logit (global column >= V): 200 above any real logit, which are
/// N(0, 1)·scale with |N(0, 1)| <= 5.77 (Box–Muller on 24-bit uniforms). Code that lets the padded
/// columns into the max, Σexp or the mean underflows or overflows at every seed (exp(±200) is outside
/// float32).
inline float ce_padding(float scale) {
  return 6.f * scale + 200.f;
}
/// Cross-entropy logits [s·b, vp] (vp: the vocabulary padded for tp), scaled by `scale`, split by
/// vocabulary columns: the grader gets them whole (first_col = 0), a rank its vp/tp columns, the first
/// of which is global column `first_col`. Padded columns hold ce_padding(scale).
inline Tensor ce_logits(const InputDraw& d, int64_t vp, float scale, int64_t first_col) {
  Tensor t = d.split(1)({"ce.logits", {S * B, vp}, scale});
  for (int64_t i = 0; i < t.size(0); ++i)
    for (int64_t j = std::max<int64_t>(0, V - first_col); j < t.size(1); ++j)
      t.at({i, j}) = ce_padding(scale);
  return t;
}
/// Targets of the s·b rows, two of them ignored (−100): every rank's.
inline std::vector<int64_t> ce_targets(const InputDraw& seed) {
  const TokenBatch t = input_tokens(1, S * B, V, seed, "ce.targets");
  std::vector<int64_t> out = t.ids;
  out[3] = out[17] = -100;
  return out;
}

/// The gradient of the loss fed to backward: not 1, so code that ignores dloss (or assumes 1) fails.
constexpr float kDLoss = 0.37f;

/// The cross-entropy variants: label smoothing α, a logit scale (×1000: only a max-subtracted
/// log-sum-exp stays finite), and every target ignored (loss 0 and a zero gradient, not NaN).
struct CECase {
  float alpha = 0.f;
  float scale = 1.f;
  bool all_ignored = false;
};
/// The targets of a case.
inline std::vector<int64_t> ce_case_targets(const InputDraw& seed, const CECase& cc) {
  return cc.all_ignored ? std::vector<int64_t>(static_cast<std::size_t>(S * B), -100) : ce_targets(seed);
}

}  // namespace tpsp::checkers::lab02
