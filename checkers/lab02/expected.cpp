// lab02 in the grader: the embedding and the cross entropy from the dense ops of reference/, the
// tracker's draws in closed form (random::uniform on the tracker's stream), the layer from
// checkers/layer/expected.h.
#include "checkers/layer/expected.h"

#include "checkers/lab02/lab02.h"
#include "checkers/scenario.h"
#include "engine/ops/cross_entropy.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/random/philox.h"
#include "engine/tensor_parallel/random.h"

namespace tpsp::checkers {

namespace {

using comm::OpKind;
using comm::ReduceOp;
using namespace lab02;

ExpectedOutputs expected_embedding(uint64_t seed, int tp, bool sp) {
  const TokenBatch ids = emb_ids(seed);
  const Tensor table = wte(seed, padded_to(V, tp)).slice0(0, V).clone();  // as the ranks hold it, real rows
  Tensor dw = ops::embedding_backward(emb_dout(seed, sp), ids, V);
  ops::scale_(dw, kPasses);
  return {{"out", {ops::embedding_forward(ids, table), sp ? Placement::Shard(0) : Placement::Replicate()}},
          {"dweight",
           {.whole = pad_dim(dw, 0, padded_to(V, tp)),  // padded rows: zero gradient
            .placement = Placement::Shard(0),
            .passes = kPasses}}};
}

Pattern pattern_embedding(int tp, bool sp) {
  if (tp == 1) return {};
  const uint64_t sbh = S * B * H * kF32;
  if (sp)
    return {{"forward", {{OpKind::reduce_scatter, sbh, "reduce-scatter of the partial lookups"}}},
            {"backward",
             {{OpKind::all_gather, sbh, "all-gather of the output gradient's shards (backward pass 1)"},
              {OpKind::all_gather, sbh, "all-gather of the output gradient's shards (backward pass 2)"}}}};
  return {{"forward", {{OpKind::all_reduce, sbh, "g: all-reduce of the partial lookups"}}}};
}

ExpectedOutputs expected_cross_entropy(uint64_t seed, int tp, const CECase& cc) {
  // The real vocabulary's columns of the logits the ranks hold (padded for tp).
  const Tensor logits = ce_logits(seed, padded_to(V, tp), cc.scale, 0).narrow_copy(1, 0, V);
  const std::vector<int64_t> targets = ce_case_targets(seed, cc);
  const ops::CrossEntropyOut res = ops::cross_entropy_forward(logits, targets, cc.alpha);
  const Tensor dlogits = ops::cross_entropy_backward(logits, targets, kDLoss, cc.alpha);
  return {{"losses", {res.losses}},
          {"loss", {Tensor::from({1}, {res.loss})}},
          {"dlogits", {pad_dim(dlogits, 1, padded_to(V, tp)), Placement::Shard(1)}}};  // padded columns: 0
}

Pattern pattern_cross_entropy(int tp, float alpha) {
  if (tp == 1) return {};
  const uint64_t rows = S * B * kF32;
  return {{"forward",
           {{.op = OpKind::all_reduce,
             .tensor_bytes = rows,
             .what = "max over the vocabulary",
             .reduce = ReduceOp::max},
            {OpKind::all_reduce, rows, "the target's logit"},
            {OpKind::all_reduce, alpha > 0 ? 2 * rows : rows,
             alpha > 0 ? "Σexp and Σlogits (label smoothing), fused" : "Σexp over the vocabulary"}}}};
}

Expected flag(const std::string& meaning) {
  return {.whole = Tensor::from({1}, {1.f}), .meaning = meaning};
}

ExpectedOutputs expected_cross_entropy_bad_inputs(uint64_t, int tp, bool) {
  ExpectedOutputs out;
  expect_accepted(out, "targets_in_range",
                  "the cross entropy of this rank's logits with targets in [0, V) or −100");
  expect_refusal(out, "target_equal_to_V", "a target equal to V=37 raised ShapeError", "it was accepted",
                 "the cross entropy");
  expect_refusal(out, "target_minus_1", "a target of −1 (not ignore_index −100) raised ShapeError",
                 "it was accepted", "the cross entropy");
  if (tp > 1)
    expect_refusal(
        out, "full_vocabulary_logits",
        "logits with the whole padded vocabulary as last dim (instead of this rank's V/tp columns) "
        "raised ShapeError",
        "they were accepted (a wrong loss: +ln tp on some rows, a wrong gradient)", "the cross entropy");
  return out;
}

/// Draws [1, kDraw] of the tracker's stream for `seed` starting at `offset` (the tracker's contract).
Tensor draws(uint64_t seed, uint64_t offset) {
  Tensor t({1, kDraw});
  for (int64_t i = 0; i < kDraw; ++i)
    t.at(i) = random::uniform(seed, tensor_parallel::kRngTrackerStream, offset + static_cast<uint64_t>(i));
  return t;
}

/// The model-parallel draws of every rank at `offset`, stacked in rank order [tp, kDraw].
Tensor mp_draws(uint64_t seed, int tp, uint64_t offset) {
  std::vector<Tensor> rows;
  for (int r = 0; r < tp; ++r)
    rows.push_back(
        draws(seed + tensor_parallel::kModelParallelSeedOffset + static_cast<uint64_t>(r), offset));
  return cat(rows, 0);
}

ExpectedOutputs expected_rng(uint64_t check_seed, int tp, bool) {
  const uint64_t seed = tracker_seed(model_seed_of(check_seed));
  return {{"default_before_fork", {draws(seed, 0)}},
          {"model_parallel_in_fork", {mp_draws(seed, tp, 0), Placement::Shard(0)}},
          {"default_after_fork", {draws(seed, kDraw)}}};
}

ExpectedOutputs expected_rng_nested(uint64_t check_seed, int tp, bool) {
  const uint64_t seed = tracker_seed(model_seed_of(check_seed));
  return {{"mp_first", {mp_draws(seed, tp, 0), Placement::Shard(0)}},
          {"dp_inside_mp", {draws(seed, 0)}},
          {"mp_after_inner_fork", {mp_draws(seed, tp, kDraw), Placement::Shard(0)}},
          {"default_after_forks", {draws(seed, 0)}},
          {"dp_again", {draws(seed, kDraw)}}};
}

ExpectedOutputs expected_rng_contract(uint64_t check_seed, int tp, bool) {
  const uint64_t seed = tracker_seed(model_seed_of(check_seed));
  std::vector<Tensor> rows;
  for (int r = 0; r < tp; ++r) {
    const uint64_t mp_seed = seed + tensor_parallel::kModelParallelSeedOffset + static_cast<uint64_t>(r);
    rows.push_back(cat({draws(mp_seed, 0), draws(mp_seed, kDraw), draws(mp_seed, 2 * kDraw)}, 1));
  }
  return {
      {"refuses_fork_of_unknown_name",
       flag("1 = fork('never-added') raised ShapeError; 0 = it forked a state "
            "that was never added")},
      {"names_unknown_fork_name",
       flag("1 = that ShapeError's message names 'never-added'; 0 = it did not (or nothing was refused)")},
      {"accepts_seed_of_a_refused_add",
       flag(
           "1 = after add('model-parallel-rng', s) was refused (the name exists), add('fresh', s) succeeded; "
           "0 = the refused call had recorded s anyway (a refused add must leave the tracker unchanged)")},
      {"mp_fork_of_current_continues", {cat(rows, 0), Placement::Shard(0)}},
      {"mp_after_reseed", {mp_draws(seed + 1, tp, 0), Placement::Shard(0)}},
      {"default_after_reseed", {draws(seed + 1, 0)}}};
}

Scenario cross_entropy(const char* name, const char* summary, CECase cc) {
  return {.lab = "lab02",
          .name = name,
          .summary = summary,
          .host_code = true,
          .expected = [cc](uint64_t seed, int tp, bool) { return expected_cross_entropy(seed, tp, cc); },
          .pattern = [cc](int tp, bool) { return pattern_cross_entropy(tp, cc.alpha); }};
}

void add_scenarios(std::vector<Scenario>& out) {
  out.push_back(vocab_embedding_scenario("lab02", SpRuns::off_only));
  out.push_back(
      cross_entropy("cross_entropy",
                    "vocab-parallel cross entropy: 3 all-reduces forward, none backward, ignore_index", {}));
  out.push_back(cross_entropy("cross_entropy_label_smoothing",
                              "label smoothing α=0.1 over the GLOBAL vocabulary", {.alpha = 0.1f}));
  out.push_back(cross_entropy("cross_entropy_large_logits",
                              "logits ×1000: the loss stays finite only if the global max is subtracted",
                              {.scale = 1000.f}));
  out.push_back(cross_entropy("cross_entropy_all_ignored",
                              "every target is ignore_index: loss 0 and a zero gradient, not NaN",
                              {.all_ignored = true}));
  out.push_back({.lab = "lab02",
                 .name = "cross_entropy_bad_inputs",
                 .summary = "refuse targets outside [0, V) and logits that are not this rank's V/tp columns",
                 .host_code = true,
                 .expected = expected_cross_entropy_bad_inputs});
  out.push_back(
      {.lab = "lab02",
       .name = "transformer_layer",
       .summary = "a transformer layer split by heads and ffn columns, dropout 0.1, two backward passes",
       .expected = [](uint64_t seed, int, bool sp) { return layer::expected_layer(seed, sp); },
       .pattern = layer::layer_pattern});
  out.push_back(
      {.lab = "lab02",
       .name = "transformer_layer_checks_seq",
       .summary =
           "the layer refuses an input whose rows disagree with LayerContext::seq, and takes one that agrees",
       .expected = [](uint64_t, int, bool) {
         ExpectedOutputs out{
             {"refuses_input_rows_that_disagree_with_ctx_seq",
              flag("1 = TransformerLayer::forward raised ShapeError for an input of s−1 rows while "
                   "LayerContext::seq says s=12; 0 = it computed on the wrong number of tokens")}};
         expect_accepted(out, "input_rows_of_ctx_seq", "TransformerLayer::forward of an input of s=12 rows");
         return out;
       }});
  out.push_back({.lab = "lab02",
                 .name = "rng_tracker",
                 .summary = "Megatron's RNG tracker: default stream shared, model-parallel stream per rank",
                 .expected = expected_rng});
  out.push_back(
      {.lab = "lab02",
       .name = "rng_tracker_nested_forks",
       .summary = "nested forks save and restore the outer stream; a named state resumes where it stopped",
       .expected = expected_rng_nested});
  out.push_back(
      {.lab = "lab02",
       .name = "rng_tracker_refusals",
       .summary = "add() refuses a name that exists and a seed already added",
       .expected = [](uint64_t, int, bool) {
         return ExpectedOutputs{
             {"refuses_duplicate_name",
              flag("1 = add('model-parallel-rng', …) after model_parallel_manual_seed raised "
                   "ShapeError; 0 = the state was silently replaced")},
             {"names_duplicate_name",
              flag("1 = that ShapeError's message names the state 'model-parallel-rng' (the contract's "
                   "'naming it'); 0 = it did not (or nothing was refused)")},
             {"refuses_duplicate_seed",
              flag("1 = add('another-rng', seed) with the data-parallel seed raised ShapeError; 0 = "
                   "two states now draw the same numbers")},
             {"names_duplicate_seed",
              flag("1 = that ShapeError's message names the seed; 0 = it did not (or nothing was refused)")},
             {"refuses_seed_inside_a_fork",
              flag("1 = model_parallel_manual_seed inside fork() raised ShapeError (the header's "
                   "contract; reset() refuses there); 0 = the tracker was reseeded under a live fork")}};
       }});
  out.push_back({.lab = "lab02",
                 .name = "rng_tracker_contract",
                 .summary =
                     "fork refuses unknown names, refused adds change nothing, forking the current state "
                     "continues it, reseeding resets",
                 .expected = expected_rng_contract});
  // The whole layer, the model step and packing with SP are lab03's (sp_transformer_layer, gpt_step,
  // packed_sequences there): they run lab03's code, and a lab's runs need only its own and earlier labs'.
  out.push_back(gpt_step_scenario("lab02", SpRuns::off_only));
  out.push_back(packed_sequences_scenario("lab02", SpRuns::off_only));
}

}  // namespace

Scenario vocab_embedding_scenario(const std::string& lab, SpRuns sp) {
  const bool with_sp = sp == SpRuns::on_only;
  return {.lab = lab,
          .name = with_sp ? "sp_vocab_embedding" : "vocab_embedding",
          .summary = with_sp ? "VocabParallelEmbedding under SP: the partial lookups reduce-scattered to "
                               "[s/tp, b, h] (V=37 padded), two backward passes"
                             : "VocabParallelEmbedding: masked lookups summed over TP (V=37 padded), two "
                               "backward passes",
          .sp_variants = sp == SpRuns::off_and_on,
          .sp_only = with_sp,
          .expected = expected_embedding,
          .pattern = pattern_embedding};
}

const LabScenarios kScenarios("lab02", add_scenarios);

}  // namespace tpsp::checkers
