// lab02 scenarios: the vocab-parallel embedding, the vocab-parallel cross entropy (with and
// without label smoothing), the transformer layer split by heads, and the RNG tracker.
// V=37 is padded to a multiple of tp (38, 39, 40): padded rows/columns must get zero gradient.
#include "checkers/layer_fixture.h"
#include "checkers/scenario.h"
#include "engine/tensor_parallel/cross_entropy.h"
#include "engine/tensor_parallel/layers.h"
#include "engine/tensor_parallel/random.h"

namespace tpsp::checkers {

namespace {

using comm::OpKind;
constexpr int64_t S = 12, B = 2, H = 24, V = 37;
constexpr uint64_t kF32 = 4;

int64_t padded(int tp) {
  return (V + tp - 1) / tp * tp;
}

/// Ids [b, s] in [0, V), drawn from the seed.
TokenBatch ids_of(uint64_t seed) {
  const Tensor u = input_tensor({B * S}, seed, "emb.ids");
  TokenBatch ids{B, S, {}};
  for (int64_t k = 0; k < B * S; ++k) ids.ids.push_back(static_cast<int64_t>(std::fabs(u.at(k)) * 1000) % V);
  return ids;
}

/// A [rows, cols] tensor whose element (i, j) does not depend on cols (drawn at a fixed stride).
Tensor stable_matrix(int64_t rows, int64_t cols, uint64_t seed, const std::string& name) {
  return input_tensor({rows, 64}, seed, name).narrow_copy(1, 0, cols);
}

Outputs run_embedding(RunContext& ctx) {
  const int n = ctx.size(), r = ctx.rank();
  const Tensor wte =
      stable_matrix(padded(n), H, ctx.seed, "emb.wte");  // [V_pad, h] row-major, rows independent of n
  Tensor dwte({padded(n) / n, H});
  tensor_parallel::VocabParallelEmbedding emb(chunk(wte, 0, r, n), dwte, ctx.sp, "check.embedding");
  const TokenBatch ids = ids_of(ctx.seed);
  const Tensor dout = input_tensor({S, B, H}, ctx.seed, "emb.dout");
  ctx.begin_phase("forward");
  Tensor out = emb.forward(ids, *ctx.tp);
  ctx.begin_phase("backward");
  emb.backward(ctx.sp ? chunk(dout, 0, r, n) : dout, ids, *ctx.tp);
  return {{"out", {out.clone(), ctx.sp ? 0 : kReplicated}}, {"dweight", {dwte, 0}}};
}

Outputs expected_embedding(uint64_t seed, int tp, bool sp) {
  Scenario s;
  s.run = run_embedding;
  Outputs o = run_single_process(s, seed, sp);
  o["dweight"].local = pad_dim(o["dweight"].local, 0, padded(tp));  // padded rows: zero gradient
  return o;
}

Pattern pattern_embedding(int tp, bool sp) {
  if (tp == 1) return {};
  const uint64_t sbh = S * B * H * kF32;
  if (sp)
    return {{"forward", {{OpKind::reduce_scatter, sbh, "reduce-scatter of the partial lookups"}}},
            {"backward", {{OpKind::all_gather, sbh, "all-gather of the output gradient's shards"}}}};
  return {{"forward", {{OpKind::all_reduce, sbh, "g: all-reduce of the partial lookups"}}}};
}

/// Targets of the n = s·b rows, two of them ignored (−100).
std::vector<int64_t> targets_of(uint64_t seed) {
  const Tensor u = input_tensor({S * B}, seed, "ce.targets");
  std::vector<int64_t> t;
  for (int64_t k = 0; k < S * B; ++k) t.push_back(static_cast<int64_t>(std::fabs(u.at(k)) * 1000) % V);
  t[3] = t[17] = -100;
  return t;
}

Outputs run_cross_entropy(RunContext& ctx, float alpha) {
  const int n = ctx.size(), r = ctx.rank();
  const Tensor logits = stable_matrix(S * B, padded(n), ctx.seed, "ce.logits");
  tensor_parallel::VocabParallelCESaved saved;
  ctx.begin_phase("forward");
  const auto res = tensor_parallel::vocab_parallel_cross_entropy_forward(
      chunk(logits, 1, r, n), targets_of(ctx.seed), V, alpha, *ctx.tp, saved, "check.ce");
  ctx.begin_phase("backward");
  Tensor dlogits = tensor_parallel::vocab_parallel_cross_entropy_backward(saved, 1.f, *ctx.tp);
  return {
      {"losses", {res.losses.clone()}}, {"loss", {Tensor::from({1}, {res.loss})}}, {"dlogits", {dlogits, 1}}};
}

Outputs expected_cross_entropy(uint64_t seed, int tp, float alpha) {
  Scenario s;
  s.run = [alpha](RunContext& c) { return run_cross_entropy(c, alpha); };
  Outputs o = run_single_process(s, seed, false);
  o["dlogits"].local = pad_dim(o["dlogits"].local, 1, padded(tp));  // padded columns: zero gradient
  return o;
}

Pattern pattern_cross_entropy(int tp, float alpha) {
  if (tp == 1) return {};
  const uint64_t rows = S * B * kF32;
  return {{"forward",
           {{OpKind::all_reduce, rows, "max over the vocabulary"},
            {OpKind::all_reduce, rows, "the target's logit"},
            {OpKind::all_reduce, alpha > 0 ? 2 * rows : rows,
             alpha > 0 ? "Σexp and Σlogits (label smoothing), fused" : "Σexp over the vocabulary"}}}};
}

/// The tracker's draws on this rank: the default stream, the model-parallel stream inside a fork,
/// and the default stream again after the fork.
Outputs run_rng(RunContext& ctx) {
  tensor_parallel::RngStatesTracker tracker;
  tensor_parallel::model_parallel_manual_seed(tracker, ctx.seed, ctx.rank());
  auto draw = [&tracker] {
    const std::vector<float> u = tracker.uniform(8);
    return Tensor::from({1, 8}, u);
  };
  const Tensor before = draw();
  Tensor inside;
  {
    auto guard = tracker.fork();
    inside = draw();
  }
  const Tensor after = draw();
  return {{"default_before_fork", {before}},
          {"model_parallel_in_fork", {inside, 0}},
          {"default_after_fork", {after}}};
}

Outputs expected_rng(uint64_t seed, int tp, bool) {
  Outputs o;
  std::vector<Tensor> rows;
  for (int r = 0; r < tp; ++r) {
    tensor_parallel::RngStatesTracker t;
    tensor_parallel::model_parallel_manual_seed(t, seed, r);
    const Tensor before = Tensor::from({1, 8}, t.uniform(8));
    {
      auto g = t.fork();
      rows.push_back(Tensor::from({1, 8}, t.uniform(8)));
    }
    if (r == 0)
      o["default_before_fork"] = {before}, o["default_after_fork"] = {Tensor::from({1, 8}, t.uniform(8))};
  }
  o["model_parallel_in_fork"] = {cat(rows, 0), 0};
  return o;
}

}  // namespace

void register_lab02(std::vector<Scenario>& out) {
  out.push_back({.lab = "lab02",
                 .name = "vocab_embedding",
                 .summary = "VocabParallelEmbedding: masked lookups summed over TP (V=37 padded)",
                 .sp_variants = true,
                 .run = run_embedding,
                 .pattern = pattern_embedding,
                 .expected = expected_embedding});
  out.push_back(
      {.lab = "lab02",
       .name = "cross_entropy",
       .summary = "vocab-parallel cross entropy: 3 all-reduces forward, none backward, ignore_index",
       .run = [](RunContext& c) { return run_cross_entropy(c, 0.f); },
       .pattern = [](int tp, bool) { return pattern_cross_entropy(tp, 0.f); },
       .expected = [](uint64_t seed, int tp, bool) { return expected_cross_entropy(seed, tp, 0.f); }});
  out.push_back(
      {.lab = "lab02",
       .name = "cross_entropy_label_smoothing",
       .summary = "label smoothing α=0.1 over the GLOBAL vocabulary",
       .run = [](RunContext& c) { return run_cross_entropy(c, 0.1f); },
       .pattern = [](int tp, bool) { return pattern_cross_entropy(tp, 0.1f); },
       .expected = [](uint64_t seed, int tp, bool) { return expected_cross_entropy(seed, tp, 0.1f); }});
  out.push_back(
      {.lab = "lab02",
       .name = "transformer_layer",
       .summary = "a transformer layer split by heads (attention) and by ffn columns (MLP), dropout 0.1",
       .run = run_layer,
       .pattern = layer_pattern});
  out.push_back({.lab = "lab02",
                 .name = "rng_tracker",
                 .summary = "Megatron's RNG tracker: default stream shared, model-parallel stream per rank",
                 .run = run_rng,
                 .expected = expected_rng});
  out.push_back(gpt_step_scenario("lab02", false));
}

}  // namespace tpsp::checkers
