// The scenario "packed_sequences", shared by the ranks and the grader: one forward + backward of the
// 2-layer TP GPT of gpt_step (dropout off) on three sequences of lengths 5, 3 and 7 packed into one
// row (engine/packed_seq.h; seed §1: the "thd" layout with cu_seqlens). The ranks pack them with
// pack_sequences, each sequence padded to a multiple of tp under SP (15 tokens → 16 at tp=2, 18 at
// tp=3, 20 at tp=4), and run ParallelGPT::forward_packed; the grader runs reference::GPT on the
// same sequences UNPACKED, as a right-padded [3, 7] batch whose padding targets are −100 (causal
// attention keeps every real token blind to the padding after it, so this is the three sequences'
// own loss and gradients). Dropout is off because its masks are keyed by the element's place in
// the whole tensor, and a packed [T, 1, h] tensor and a padded [s, 3, h] one place tokens
// differently.
#pragma once

#include <string>
#include <vector>

#include "checkers/gpt_step/gpt_step.h"

namespace tpsp::checkers::packed {

/// The sequences' real lengths, in packing order.
inline const std::vector<int64_t>& seqlens() {
  static const std::vector<int64_t> lens{5, 3, 7};
  return lens;
}
/// gpt_step's model (V=37, h=24, 12 heads, 2 layers) with dropout off and a position table of
/// seq=20 ≥ every packed total (15, 16, 18, 20 at tp 1–4), so that positions that run on across the
/// boundaries (not restarted per sequence) give wrong numbers rather than an out-of-table error.
inline GPTConfig config() {
  GPTConfig c = gpt_step::config();
  c.seq = 20;
  c.dropout = 0.f;
  return c;
}
/// Sequence k's ids (what = "ids") or targets (what = "targets"), drawn from (seed, name).
inline std::vector<int64_t> sequence(const InputDraw& seed, const std::string& what, std::size_t k) {
  return input_tokens(1, seqlens()[k], gpt_step::kVocab, seed, "packed." + what + "." + std::to_string(k))
      .ids;
}
inline std::vector<std::vector<int64_t>> sequences(const InputDraw& seed, const std::string& what) {
  std::vector<std::vector<int64_t>> out;
  for (std::size_t k = 0; k < seqlens().size(); ++k) out.push_back(sequence(seed, what, k));
  return out;
}

}  // namespace tpsp::checkers::packed
