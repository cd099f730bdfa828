// The whole-model scenario: one training step of the TP GPT (2 layers, V=37 padded, h=24, 12 heads,
// ffn=48, dropout 0.1) with the learner's files in place. Every layer class runs several times,
// as several instances, in forward and backward, so code that only works for one call (cached
// results, a global saved input, a reused output buffer, a weight changed in backward) fails here
// even when each piece passes on its own. Outputs: the loss, every gradient and every parameter
// after one AdamW step, as the rank's shards.
#include "checkers/scenario.h"
#include "engine/model/gpt.h"

namespace tpsp::checkers {

namespace {

constexpr int64_t kVocab = 37, kSeq = 12, kBatch = 2;

GPTConfig step_config() {
  GPTConfig c;
  c.vocab = kVocab;
  c.seq = kSeq;
  c.hidden = 24;
  c.heads = 12;
  c.layers = 2;
  c.ffn = 48;
  c.dropout = 0.1f;
  return c;
}

Outputs run_gpt_step(RunContext& ctx) {
  const GPTConfig c = step_config();
  model::ParallelGPT gpt(c, ctx.seed, *ctx.ps, {.sequence_parallel = ctx.sp});
  TokenBatch ids{kBatch, kSeq, {}}, targets{kBatch, kSeq, {}};
  const Tensor u = input_tensor({2, kBatch * kSeq}, ctx.seed, "gpt.tokens");
  for (int64_t k = 0; k < kBatch * kSeq; ++k) {
    ids.ids.push_back(static_cast<int64_t>(std::fabs(u.at(k)) * 1000) % kVocab);
    targets.ids.push_back(static_cast<int64_t>(std::fabs(u.at(kBatch * kSeq + k)) * 1000) % kVocab);
  }
  ctx.begin_phase("forward");
  const float loss = gpt.forward(ids, targets, 2);
  ctx.begin_phase("backward");
  gpt.backward();
  ctx.begin_phase("step");
  // AdamW divides by √v + eps: an analytically zero gradient (the key bias) carries rounding noise
  // (~1e-10) that the update scales by lr/eps. eps = 1e-6 keeps that below 1e-7, under the 1e-5
  // absolute tolerance of the parameters after the step.
  gpt.step({.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-6f, .weight_decay = 0.01f});
  Outputs out{{"loss", {Tensor::from({1}, {loss})}}};
  for (const auto& [name, g] : gpt.grads()) {
    const model::ShardSpec& spec = gpt.shard_spec(name);
    const bool vocab = spec.split_dim == 0 && spec.global_shape[0] == gpt.padded_vocab();
    out["grad." + name] = {g.clone(), spec.split_dim, vocab ? kVocab : -1};
    out["param_after_step." + name] = {gpt.params().at(name).clone(), spec.split_dim, vocab ? kVocab : -1,
                                       1e-5};
  }
  return out;
}

/// The single-process answer, with the vocabulary rows padded (and ignored) to the run's tp.
Outputs expected_gpt_step(uint64_t seed, int tp, bool sp) {
  Scenario s;
  s.run = run_gpt_step;
  Outputs o = run_single_process(s, seed, sp);
  const int64_t padded = (kVocab + tp - 1) / tp * tp;
  for (auto& [name, out] : o)
    if (out.real_rows >= 0) out.local = pad_dim(out.local, 0, padded);
  return o;
}

}  // namespace

Scenario gpt_step_scenario(const std::string& lab, bool sp_only) {
  return {.lab = lab,
          .name = "gpt_step",
          .summary =
              "one training step of the 2-layer TP GPT with your code inside (loss, every gradient, AdamW)",
          .sp_variants = !sp_only,
          .sp_only = sp_only,
          .run = run_gpt_step,
          .expected = expected_gpt_step};
}

}  // namespace tpsp::checkers
