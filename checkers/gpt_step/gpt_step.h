// The whole-model scenario "gpt_step", shared by the ranks and the grader: one training step of a
// 2-layer GPT (V=37 padded, h=24, 12 heads, ffn=48, dropout 0.1) on a batch drawn from the seed.
#pragma once

#include "checkers/inputs.h"
#include "engine/model/config.h"
#include "engine/ops/adamw.h"

namespace tpsp::checkers::gpt_step {

constexpr int64_t kVocab = 37, kSeq = 12, kBatch = 2;
constexpr int64_t kIteration = 2;  ///< keys the dropout masks

inline GPTConfig config() {
  return {.vocab = kVocab, .seq = kSeq, .hidden = 24, .heads = 12, .layers = 2, .ffn = 48, .dropout = 0.1f};
}
/// AdamW divides by √v + eps: an analytically zero gradient (the key bias) carries rounding noise
/// (~1e-10) that the update scales by lr/eps. eps = 1e-6 keeps that below 1e-7, under the 1e-5
/// absolute tolerance of the parameters after the step.
inline ops::AdamWConfig adamw() {
  return {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .weight_decay = 0.01f};
}
inline TokenBatch ids(const InputDraw& seed) {
  return input_tokens(kBatch, kSeq, kVocab, seed, "gpt.ids");
}
inline TokenBatch targets(const InputDraw& seed) {
  return input_tokens(kBatch, kSeq, kVocab, seed, "gpt.targets");
}

}  // namespace tpsp::checkers::gpt_step
