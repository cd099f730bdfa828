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
  const Tensor x = sp_x(seed), dz = sp_dz(seed);
  return {{"gather_forward", {x}},
          {"gather_backward", {sum_over_ranks(seed, "sp.dgather", tp), Placement::Shard(0)}},
          {"gather_whole_grad_backward", {dz, Placement::Shard(0)}},
          {"reduce_scatter_forward", {sum_over_ranks(seed, "sp.partial", tp), Placement::Shard(0)}},
          {"reduce_scatter_backward", {dz}},
          {"scatter_forward", {x, Placement::Shard(0)}},
          {"scatter_backward", {dz}}};
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

void add_scenarios(std::vector<Scenario>& out) {
  out.push_back({.lab = "lab03",
                 .name = "sp_mappings",
                 .summary = "gather_from_ / reduce_scatter_to_ / scatter_to_sequence_parallel_region",
                 .sp_only = true,
                 .expected = expected_sp_mappings,
                 .pattern = pattern_sp_mappings});
  out.push_back({.lab = "lab03",
                 .name = "sp_grad_sync",
                 .summary = "sum (not average) the sequence-parallel gradients over TP in one all-reduce",
                 .sp_only = true,
                 .expected = expected_sp_grad_sync,
                 .pattern = pattern_sp_grad_sync});
  // The linear layers' SP paths (layers_sp.cpp), graded as lab01's scenarios are, with SP on.
  out.push_back({.lab = "lab03",
                 .name = "sp_column_linear",
                 .summary = "ColumnParallelLinear under SP: all-gather of the [s/tp, b, h] input, the input "
                            "gathered again for the weight gradient, reduce-scatter of dX",
                 .sp_only = true,
                 .expected = [](uint64_t seed, int, bool) { return lab01::expected_column(seed, true, {}); },
                 .pattern = [](int tp, bool) { return lab01::pattern_column(tp, true, {}); }});
  out.push_back({.lab = "lab03",
                 .name = "sp_row_linear",
                 .summary = "RowParallelLinear under SP: reduce-scatter of the partial Y, all-gather of dY, "
                            "the bias gradient of this rank's tokens",
                 .sp_only = true,
                 .expected = [](uint64_t seed, int, bool) { return lab01::expected_row(seed, true, {}); },
                 .pattern = [](int tp, bool) { return lab01::pattern_row(tp, true, {}); }});
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
  out.push_back(gpt_step_scenario("lab03", SpRuns::on_only));
  out.push_back(packed_sequences_scenario("lab03", true));
}

}  // namespace

const LabScenarios kScenarios("lab03", add_scenarios);

}  // namespace tpsp::checkers
