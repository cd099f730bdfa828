// lab01 in the grader: expected tensors from reference/linear.h (dense linear and MLP) or closed
// forms, and the calls of each scenario.
#include "checkers/lab01/lab01.h"
#include "checkers/lab01/linear_expected.h"
#include "checkers/scenario.h"
#include "engine/ops/elementwise.h"
#include "reference/linear.h"

namespace tpsp::checkers {

namespace {

using comm::OpKind;
using namespace lab01;

Tensor times(Tensor t, float k) {
  ops::scale_(t, k);
  return t;
}

/// A gradient accumulated over kPasses identical backward passes.
Expected accumulated(const Tensor& one_pass, Placement p) {
  return {.whole = times(one_pass, kPasses), .placement = p, .passes = kPasses};
}

/// Each call of `calls` repeated `k` times (one set per backward pass).
std::vector<ExpectedCall> repeated(const std::vector<ExpectedCall>& calls, int k) {
  std::vector<ExpectedCall> out;
  for (int i = 0; i < k; ++i) out.insert(out.end(), calls.begin(), calls.end());
  return out;
}

ExpectedOutputs expected_f_g(uint64_t seed, int tp, bool) {
  Tensor sum_dy({S, B, H}), sum_p({S, B, H});
  for (int r = 0; r < tp; ++r) {
    ops::add_(sum_dy, f_dy(seed, r));
    ops::add_(sum_p, g_partial(seed, r));
  }
  return {{"f_forward", {f_x(seed)}},
          {"f_backward", {sum_dy}},
          {"g_forward", {sum_p}},
          {"g_backward", {g_dz(seed)}}};
}

Pattern pattern_f_g(int tp, bool) {
  if (tp == 1) return {};
  const uint64_t sbh = S * B * H * kF32;
  return {{"f.backward", {{OpKind::all_reduce, sbh, "f's backward: all-reduce of the input gradient"}}},
          {"g.forward", {{OpKind::all_reduce, sbh, "g's forward: all-reduce of the partial output"}}}};
}

}  // namespace

namespace lab01 {

ExpectedOutputs expected_column(uint64_t seed, bool sp, const LinearCase& lc) {
  const Tensor x = col_x(seed, sp), w = col_w(seed), b = col_b(seed), dy = col_dy(seed, lc.gather_output);
  const reference::LinearGrads g = reference::linear_backward(dy, x, w, true);
  const Tensor bias = lc.skip_bias_add ? Tensor() : b;
  const Placement out_placement = lc.gather_output ? Placement::Replicate() : Placement::Shard(2);
  ExpectedOutputs out{{"y", {reference::linear_forward(x, w, bias), out_placement}},
                      {"y_second", {reference::linear_forward(col_x2(seed, sp), w, bias), out_placement}},
                      {"dx", {g.dx, sp ? Placement::Shard(0) : Placement::Replicate()}},
                      {"dbias", accumulated(g.db, Placement::Shard(0))}};
  if (!lc.frozen_weight) out["dweight"] = accumulated(g.dw, Placement::Shard(0));
  return out;
}

Pattern pattern_column(int tp, bool sp, const LinearCase& lc) {
  if (tp == 1) return {};
  const uint64_t sbh = S * B * H * kF32, sbf = S * B * F * kF32;
  Pattern p;
  std::vector<ExpectedCall> backward;
  if (sp) {
    p["forward"].push_back({OpKind::all_gather, sbh, "SP: all-gather of the sequence shards of X"});
    // A frozen weight has no gradient: X is not gathered again (Megatron's wgrad_compute).
    if (!lc.frozen_weight)
      backward.push_back({OpKind::all_gather, sbh, "SP: all-gather of X again for the weight gradient"});
    backward.push_back({OpKind::reduce_scatter, sbh, "SP: reduce-scatter of the partial dX"});
  } else {
    backward = {{OpKind::all_reduce, sbh, "f's backward: all-reduce of the partial dX"}};
  }
  if (lc.gather_output)
    p["forward"].push_back({OpKind::all_gather, sbf, "gather_output: all-gather of Y's last dim", 2});
  p["backward"] = repeated(backward, kPasses);
  p["forward.second"] = p["forward"];
  return p;
}

ExpectedOutputs expected_row(uint64_t seed, bool sp, const LinearCase& lc) {
  const Tensor x = row_x(seed, lc.input_is_parallel), w = row_w(seed), b = row_b(seed), dy = row_dy(seed, sp);
  const reference::LinearGrads g = reference::linear_backward(dy, x, w, true);
  const Tensor bias = lc.skip_bias_add ? Tensor() : b;
  const Placement out_placement = sp ? Placement::Shard(0) : Placement::Replicate();
  return {
      {"y", {reference::linear_forward(x, w, bias), out_placement}},
      {"y_second", {reference::linear_forward(row_x2(seed, lc.input_is_parallel), w, bias), out_placement}},
      {"dx", {g.dx, lc.input_is_parallel ? Placement::Shard(2) : Placement::Replicate()}},
      {"dweight", accumulated(g.dw, Placement::Shard(1))},
      // Under SP each rank's bias gradient covers its own tokens (summed over TP afterwards).
      {"dbias", accumulated(g.db, sp ? Placement::Partial() : Placement::Replicate())}};
}

Pattern pattern_row(int tp, bool sp, const LinearCase& lc) {
  if (tp == 1) return {};
  const uint64_t sbh = S * B * H * kF32, sbf = S * B * F * kF32;
  Pattern p;
  std::vector<ExpectedCall> backward;
  if (sp) {
    p["forward"] = {{OpKind::reduce_scatter, sbh, "SP's g: reduce-scatter of the partial Y"}};
    backward.push_back({OpKind::all_gather, sbh, "SP: all-gather of dY's sequence shards"});
  } else {
    p["forward"] = {{OpKind::all_reduce, sbh, "g: all-reduce of the partial Y"}};
  }
  if (!lc.input_is_parallel)
    backward.push_back({OpKind::all_gather, sbf, "scatter's backward: all-gather of dX's last dim", 2});
  if (!backward.empty()) p["backward"] = repeated(backward, kPasses);
  p["forward.second"] = p["forward"];
  return p;
}

ExpectedOutputs expected_row_refuses(int tp, bool sp) {
  const std::string local = std::to_string(F / tp), wide = std::to_string(F / tp + 1);
  const std::string layer = sp ? "RowParallelLinear.forward_sp" : "RowParallelLinear.forward";
  const std::string cut = " (the product used part of x and dropped the rest)";
  ExpectedOutputs out;
  expect_accepted(out, "x_of_local_in_features",
                  layer + " of x [" + std::to_string(S) + ", " + std::to_string(B) + ", " + local + "]");
  const std::string x_shape = "[" + std::to_string(S) + ", " + std::to_string(B) + ", " + wide + "]",
                    w_shape = "[" + std::to_string(H) + ", " + local + "]";
  expect_refusal_naming(
      out, "x_wider_than_local_in_features",
      layer + " raised ShapeError for x " + x_shape + " against a weight of " + local + " input columns",
      "it accepted an x wider than its weight" + cut, "the layer",
      "both shapes, x " + x_shape + " and the weight " + w_shape);
  if (!sp)
    expect_refusal(out, "whole_x_wider_than_in_features",
                   layer + " (input_is_parallel = false) raised ShapeError for a whole x of " +
                       std::to_string(F + tp) + " columns, chunks of " + wide + " against " + local,
                   "it accepted a whole x wider than tp·in/tp" + cut, "the layer");
  return out;
}

ExpectedOutputs expected_mlp(uint64_t seed, int, bool sp) {
  const reference::MLPParams prm{mlp_w1(seed), mlp_b1(seed), mlp_w2(seed), mlp_b2(seed)};
  reference::MLPSaved saved;
  const Tensor y = reference::mlp_forward(mlp_x(seed, sp), prm, saved);
  const reference::MLPGrads g = reference::mlp_backward(mlp_dy(seed, sp), prm, saved);
  const Placement seq = sp ? Placement::Shard(0) : Placement::Replicate();
  return {{"y", {y, seq}},
          {"dx", {g.dx, seq}},
          {"fc1.dweight", accumulated(g.dw1, Placement::Shard(0))},
          {"fc1.dbias", accumulated(g.db1, Placement::Shard(0))},
          {"fc2.dweight", accumulated(g.dw2, Placement::Shard(1))},
          {"fc2.dbias", accumulated(g.db2, sp ? Placement::Partial() : Placement::Replicate())}};
}

Pattern pattern_mlp(int tp, bool sp) {
  if (tp == 1) return {};
  const uint64_t sbh = S * B * H * kF32;
  if (sp)
    return {
        {"forward",
         {{OpKind::all_gather, sbh, "fc1 (SP): all-gather of X"},
          {OpKind::reduce_scatter, sbh, "fc2 (SP's g): reduce-scatter of the partial Y"}}},
        {"backward", repeated({{OpKind::all_gather, sbh, "fc2 (SP): all-gather of dY"},
                               {OpKind::all_gather, sbh, "fc1 (SP): all-gather of X for the weight gradient"},
                               {OpKind::reduce_scatter, sbh, "fc1 (SP): reduce-scatter of the partial dX"}},
                              kPasses)}};
  return {
      {"forward", {{OpKind::all_reduce, sbh, "fc2's g: all-reduce of the partial Y"}}},
      {"backward", repeated({{OpKind::all_reduce, sbh, "fc1's f: all-reduce of the partial dX"}}, kPasses)}};
}

}  // namespace lab01

namespace {

Scenario column(const char* name, const char* summary, LinearCase lc) {
  return {.lab = "lab01",
          .name = name,
          .summary = summary,
          .expected = [lc](uint64_t seed, int, bool sp) { return expected_column(seed, sp, lc); },
          .pattern = [lc](int tp, bool sp) { return pattern_column(tp, sp, lc); }};
}

Scenario row(const char* name, const char* summary, LinearCase lc) {
  return {.lab = "lab01",
          .name = name,
          .summary = summary,
          .expected = [lc](uint64_t seed, int, bool sp) { return expected_row(seed, sp, lc); },
          .pattern = [lc](int tp, bool sp) { return pattern_row(tp, sp, lc); }};
}

void add_scenarios(std::vector<Scenario>& out) {
  out.push_back(
      {.lab = "lab01",
       .name = "f_g",
       .summary = "f (copy_to_tensor_model_parallel_region) and g (reduce_from_…): forward and backward",
       .expected = expected_f_g,
       .pattern = pattern_f_g});
  // The SP runs of the linear layers and the MLP are lab03's (sp_column_linear, ...: layers_sp.cpp).
  for (const LinearVariant& v : kLinearVariants)
    out.push_back(v.layer == LinearLayer::column ? column(v.name, v.summary, v.lc)
                                                 : row(v.name, v.summary, v.lc));
  out.push_back({.lab = "lab01",
                 .name = "row_linear_refuses_wrong_in",
                 .summary = "RowParallelLinear refuses an x whose last dim does not match its weight",
                 .tp_sizes = {2, 3},
                 .expected = [](uint64_t, int tp, bool sp) { return expected_row_refuses(tp, sp); }});
  out.push_back({.lab = "lab01",
                 .name = "mlp",
                 .summary = "the TP MLP: column → GELU → row, two backward passes",
                 .expected = expected_mlp,
                 .pattern = pattern_mlp});
  // Without SP only: under SP the model runs no lab01 code (its layers take lab03's SP paths).
}

}  // namespace

const LabScenarios kScenarios("lab01", add_scenarios);

}  // namespace tpsp::checkers
