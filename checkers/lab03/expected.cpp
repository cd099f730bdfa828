// lab03 in the grader: closed forms for the mappings and the gradient reduction (sums of the ranks'
// integer inputs), the SP linear layers and MLP from reference/linear.h (checkers/lab01/
// linear_expected.h), the SP layer from reference/ (checkers/layer/expected.h).
#include "checkers/layer/expected.h"

#include "checkers/lab01/linear_expected.h"
#include "checkers/lab03/lab03.h"
#include "checkers/scenario.h"
#include "engine/ops/elementwise.h"

namespace tpsp::checkers {

namespace {

using comm::OpKind;
using namespace lab03;

Tensor sum_over_ranks(uint64_t seed, const std::string& name, int tp) {
  Tensor sum({S, B, H});
  for (int r = 0; r < tp; ++r) ops::add_(sum, rank_input(seed, name, r));
  return sum;
}

ExpectedOutputs expected_sp_mappings(uint64_t seed, int tp, bool) {
  const Tensor x = sp_x(seed, false), dz = sp_dz(seed, false);
  const Tensor x_shards = sp_x(seed, true), dz_shards = sp_dz(seed, true);
  return {{"gather_forward", {x_shards}},
          {"gather_backward", {sum_over_ranks(seed, "sp.dgather", tp), Placement::Shard(0)}},
          {"gather_whole_grad_backward", {dz, Placement::Shard(0)}},
          {"reduce_scatter_forward", {sum_over_ranks(seed, "sp.partial", tp), Placement::Shard(0)}},
          {"reduce_scatter_backward", {dz_shards}},
          {"scatter_forward", {x, Placement::Shard(0)}},
          {"scatter_backward", {dz_shards}}};
}

Pattern pattern_sp_mappings(int tp, bool) {
  if (tp == 1) return {};
  return {
      {"gather.forward", {{OpKind::all_gather, kSbh, "all-gather of the sequence shards"}}},
      {"gather.backward", {{OpKind::reduce_scatter, kSbh, "reduce-scatter of the partial gradient"}}},
      // tensor_parallel_output_grad=false: the gradient is already whole; split it, no communication.
      {"reduce_scatter.forward", {{OpKind::reduce_scatter, kSbh, "reduce-scatter of the partial output"}}},
      {"reduce_scatter.backward", {{OpKind::all_gather, kSbh, "all-gather of the gradient shards"}}},
      {"scatter.backward", {{OpKind::all_gather, kSbh, "all-gather: every rank needs the full gradient"}}}};
}

ExpectedOutputs expected_sp_grad_sync(uint64_t seed, int tp, bool) {
  ExpectedOutputs out;
  for (const auto& [key, name] :
       {std::pair{"layernorm.dgamma", "gamma"}, {"layernorm.dbeta", "beta"}, {"row_bias.dbias", "bias"}}) {
    Tensor sum({H});
    for (int r = 0; r < tp; ++r) ops::add_(sum, sync_grad(seed, name, r));
    out[key] = {sum};
  }
  return out;
}

Pattern pattern_sp_grad_sync(int tp, bool) {
  if (tp == 1) return {};
  return {{"grad_sync",
           {{OpKind::all_reduce, 3 * H * 4, "one coalesced all-reduce (sum) of the three gradients"}}}};
}

/// Under SP rank r's row-parallel bias gradient is Σ of dY over its own tokens (rows [r·s/tp,
/// (r+1)·s/tp) of dim 0, every b): [tp, H], row r rank r's share, accumulated over kPasses.
Expected dbias_shares(uint64_t seed, int tp) {
  const Tensor dy = lab01::row_dy(seed, true);
  const float* d = dy.data();
  const int64_t rows = lab01::S / tp;
  std::vector<float> share(static_cast<std::size_t>(tp * lab01::H), 0.0f);
  for (int64_t s = 0; s < lab01::S; ++s)
    for (int64_t b = 0; b < lab01::B; ++b)
      for (int64_t h = 0; h < lab01::H; ++h)
        share[static_cast<std::size_t>((s / rows) * lab01::H + h)] +=
            lab01::kPasses * d[(s * lab01::B + b) * lab01::H + h];
  return {.whole = Tensor::from({tp, lab01::H}, share),
          .placement = Placement::Shard(0),
          .passes = lab01::kPasses,
          .meaning =
              "this rank's bias gradient under SP: dY summed over its own s/tp tokens only (the sum "
              "over the ranks is the gradient sync's)"};
}

/// expected_row under SP with each rank's dbias share.
ExpectedOutputs expected_sp_row(uint64_t seed, int tp, const lab01::LinearCase& lc) {
  ExpectedOutputs e = lab01::expected_row(seed, true, lc);
  e["dbias_share"] = dbias_shares(seed, tp);
  return e;
}

/// A scenario of lab03 that runs lab01's column or row case `lc` with SP.
Scenario sp_linear_option(const std::string& name, const std::string& summary, bool column,
                          const lab01::LinearCase& lc) {
  Scenario sc{.lab = "lab03", .name = name, .summary = summary, .sp_only = true};
  if (column) {
    sc.expected = [lc](uint64_t seed, int, bool) { return lab01::expected_column(seed, true, lc); };
    sc.pattern = [lc](int tp, bool) { return lab01::pattern_column(tp, true, lc); };
  } else {
    sc.expected = [lc](uint64_t seed, int tp, bool) { return expected_sp_row(seed, tp, lc); };
    sc.pattern = [lc](int tp, bool) { return lab01::pattern_row(tp, true, lc); };
  }
  return sc;
}

void add_scenarios(std::vector<Scenario>& out) {
  out.push_back({.lab = "lab03",
                 .name = "sp_mappings",
                 .summary = "gather_from_ / reduce_scatter_to_ / scatter_to_sequence_parallel_region",
                 .sp_only = true,
                 .expected = expected_sp_mappings,
                 .pattern = pattern_sp_mappings});
  out.push_back(
      {.lab = "lab03",
       .name = "sp_refuses_uneven_s",
       .summary = "scatter_to_ and reduce_scatter_to_sequence_parallel_region refuse s not divisible by tp",
       .tp_sizes = {2, 3},
       .sp_only = true,
       .expected = [](uint64_t, int tp, bool) {
         const std::string s = "s=" + std::to_string(2 * tp + 1) + " rows at tp=" + std::to_string(tp);
         const std::string lost =
             "it accepted a sequence it cannot split into tp chunks (rows were "
             "dropped, or ranks hold chunks of different sizes)";
         ExpectedOutputs out;
         const std::string even = " of s=" + std::to_string(2 * tp) + " rows at tp=" + std::to_string(tp);
         expect_accepted(out, "scatter_of_2tp_rows", "scatter_to_sequence_parallel_region.forward" + even);
         expect_accepted(out, "reduce_scatter_of_2tp_rows",
                         "reduce_scatter_to_sequence_parallel_region.forward" + even);
         expect_refusal(out, "scatter_of_uneven_s",
                        "scatter_to_sequence_parallel_region.forward raised ShapeError for " + s, lost,
                        "the scatter");
         expect_refusal(out, "reduce_scatter_of_uneven_s",
                        "reduce_scatter_to_sequence_parallel_region.forward raised ShapeError for " + s, lost,
                        "the reduce-scatter");
         return out;
       }});
  out.push_back({.lab = "lab03",
                 .name = "sp_grad_sync",
                 .summary = "sum (not average) the sequence-parallel gradients over TP in one all-reduce",
                 .sp_only = true,
                 .expected = expected_sp_grad_sync,
                 .pattern = pattern_sp_grad_sync});
  // The linear layers' SP paths (layers_sp.cpp), graded as lab01's scenarios are, with SP on.
  for (const lab01::LinearVariant& v : kSpLinearVariants)
    out.push_back(sp_linear_option(v.name, v.summary, v.layer == lab01::LinearLayer::column, v.lc));
  out.push_back(
      {.lab = "lab03",
       .name = "sp_row_linear_refuses_wrong_in",
       .summary = "RowParallelLinear under SP refuses an x whose last dim does not match its weight",
       .tp_sizes = {2, 3},
       .sp_only = true,
       .expected = [](uint64_t, int tp, bool sp) { return lab01::expected_row_refuses(tp, sp); }});
  out.push_back({.lab = "lab03",
                 .name = "sp_mlp",
                 .summary = "the MLP under SP: column → GELU → row on [s/tp, b, h], two backward passes",
                 .sp_only = true,
                 .expected = [](uint64_t seed, int tp, bool) { return lab01::expected_mlp(seed, tp, true); },
                 .pattern = [](int tp, bool) { return lab01::pattern_mlp(tp, true); }});
  out.push_back(
      {.lab = "lab03",
       .name = "sp_transformer_layer",
       .summary = "a transformer layer with sequence parallelism, two backward passes, gradients summed",
       .sp_only = true,
       .expected = [](uint64_t seed, int, bool) { return layer::expected_layer(seed, true); },
       .pattern = [](int tp, bool) { return layer::layer_pattern(tp, true); }});
  out.push_back(
      {.lab = "lab03",
       .name = "sp_activation_memory",
       .summary = "SP keeps 1/tp of the [s, b, h] activations per rank",
       .sp_only = true,
       .expected =
           [](uint64_t, int tp, bool) {
             return ExpectedOutputs{
                 {"activation_bytes",
                  {.whole = Tensor::from({1}, {static_cast<float>(layer::layer_activation_bytes(tp, true))}),
                   .meaning = "bytes of activations one rank keeps for backward (LayerSaved::bytes())"}}};
           },
       .pattern =
           [](int tp, bool) {
             Pattern p = layer::layer_pattern(tp, true);
             return Pattern{{"forward", p["forward"]}};
           }});
  out.push_back(vocab_embedding_scenario("lab03", SpRuns::on_only));
  out.push_back(gpt_step_scenario("lab03", SpRuns::on_only));
  out.push_back(packed_sequences_scenario("lab03", SpRuns::on_only));
}

}  // namespace

const LabScenarios kScenarios("lab03", add_scenarios);

}  // namespace tpsp::checkers
