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
/// The tracker's seed in the RNG scenarios: the check's seed with high bits set, so code that keeps
/// a seed in 32 bits (or an int) fails at every check seed.
inline uint64_t tracker_seed(uint64_t seed) {
  return seed ^ 0xA5A5A5A500000000ull;
}

/// A [rows, cols] tensor whose element (i, j) does not depend on cols (drawn at a fixed stride 64):
/// the padded vocabulary of every tp shares its first V rows/columns.
inline Tensor stable_matrix(int64_t rows, int64_t cols, uint64_t seed, const std::string& name,
                            float scale = 1.f) {
  return input_tensor({rows, 64}, seed, name, scale).narrow_copy(1, 0, cols);
}
/// The word-embedding table, padded to `rows` (>= V) rows.
inline Tensor wte(uint64_t seed, int64_t rows) {
  return stable_matrix(rows, H, seed, "emb.wte");
}
/// Ids [b, s] in [0, V).
inline TokenBatch emb_ids(uint64_t seed) {
  return input_tokens(B, S, V, seed, "emb.ids");
}
inline Tensor emb_dout(uint64_t seed) {
  return input_tensor({S, B, H}, seed, "emb.dout");
}

/// Cross-entropy logits [s·b, cols] (cols >= V: padded vocabulary), scaled by `scale`. The padded
/// columns (global id >= V) hold the row's largest real logit + 200: code that lets them into the
/// max, Σexp or the mean underflows or overflows at every seed (exp(±200) is outside float32).
inline Tensor ce_logits(uint64_t seed, int64_t cols, float scale) {
  Tensor t = stable_matrix(S * B, cols, seed, "ce.logits", scale);
  for (int64_t i = 0; i < S * B; ++i) {
    float mx = t.at({i, 0});
    for (int64_t j = 1; j < V; ++j) mx = std::max(mx, t.at({i, j}));
    for (int64_t j = V; j < cols; ++j) t.at({i, j}) = mx + 200.f;
  }
  return t;
}
/// Targets of the s·b rows, two of them ignored (−100).
inline std::vector<int64_t> ce_targets(uint64_t seed) {
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
inline std::vector<int64_t> ce_case_targets(uint64_t seed, const CECase& cc) {
  return cc.all_ignored ? std::vector<int64_t>(static_cast<std::size_t>(S * B), -100) : ce_targets(seed);
}

}  // namespace tpsp::checkers::lab02
