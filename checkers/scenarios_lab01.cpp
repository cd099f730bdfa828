// lab01 scenarios: f and g, ColumnParallelLinear, RowParallelLinear and the TP MLP
// (Shoeybi et al. 2019 §3, Fig. 3a). Sizes are not powers of two where they need not be:
// s=12, b=2, h=24, out/ffn=36 (all divisible by tp = 1, 2, 3, 4).
#include "checkers/scenario.h"
#include "engine/ops/elementwise.h"
#include "engine/tensor_parallel/layers.h"
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::checkers {

namespace {

using comm::OpKind;
using tensor_parallel::ColumnParallelLinear;
using tensor_parallel::LinearOptions;
using tensor_parallel::LinearSaved;
using tensor_parallel::RowParallelLinear;

constexpr int64_t S = 12, B = 2, H = 24, F = 36;
constexpr uint64_t kF32 = 4;

/// f and g on integer tensors (exact in any summation order). Each rank's backward input for f and
/// forward input for g is its own (rank-dependent) partial; the answers are their sums.
Outputs run_f_g(RunContext& ctx) {
  using namespace tensor_parallel;
  const Tensor x = input_tensor({S, B, H}, ctx.seed, "f.x", 1, true);
  const Tensor dy = input_tensor({S, B, H}, ctx.seed, "f.dy.rank" + std::to_string(ctx.rank()), 1, true);
  const Tensor p = input_tensor({S, B, H}, ctx.seed, "g.partial.rank" + std::to_string(ctx.rank()), 1, true);
  const Tensor dz = input_tensor({S, B, H}, ctx.seed, "g.dz", 1, true);
  Outputs out;
  ctx.begin_phase("f.forward");
  out["f_forward"] = {copy_to_tensor_model_parallel_region.forward(x, *ctx.tp, "check.f").clone()};
  ctx.begin_phase("f.backward");
  out["f_backward"] = {copy_to_tensor_model_parallel_region.backward(dy, *ctx.tp, "check.f").clone()};
  ctx.begin_phase("g.forward");
  out["g_forward"] = {reduce_from_tensor_model_parallel_region.forward(p, *ctx.tp, "check.g").clone()};
  ctx.begin_phase("g.backward");
  out["g_backward"] = {reduce_from_tensor_model_parallel_region.backward(dz, *ctx.tp, "check.g").clone()};
  return out;
}

Outputs expected_f_g(uint64_t seed, int tp, bool) {
  Tensor sum_dy({S, B, H}), sum_p({S, B, H});
  for (int r = 0; r < tp; ++r) {
    ops::add_(sum_dy, input_tensor({S, B, H}, seed, "f.dy.rank" + std::to_string(r), 1, true));
    ops::add_(sum_p, input_tensor({S, B, H}, seed, "g.partial.rank" + std::to_string(r), 1, true));
  }
  return {{"f_forward", {input_tensor({S, B, H}, seed, "f.x", 1, true)}},
          {"f_backward", {sum_dy}},
          {"g_forward", {sum_p}},
          {"g_backward", {input_tensor({S, B, H}, seed, "g.dz", 1, true)}}};
}

Pattern pattern_f_g(int tp, bool) {
  if (tp == 1) return {};
  const uint64_t sbh = S * B * H * kF32;
  return {{"f.backward", {{OpKind::all_reduce, sbh, "f's backward: all-reduce of the input gradient"}}},
          {"g.forward", {{OpKind::all_reduce, sbh, "g's forward: all-reduce of the partial output"}}}};
}

/// Y = X·Aᵀ + b, column-parallel, then backward with a given dY. gather_output optional.
Outputs run_column(RunContext& ctx, bool gather_output, bool frozen_weight = false) {
  const int n = ctx.size(), r = ctx.rank();
  const Tensor x = input_tensor({S, B, H}, ctx.seed, "col.x");
  const Tensor w = input_tensor({F, H}, ctx.seed, "col.w", 0.2f), b = input_tensor({F}, ctx.seed, "col.b");
  const Tensor dy = input_tensor({S, B, F}, ctx.seed, "col.dy");
  Tensor dw({F / n, H}), db({F / n});
  LinearOptions opt;
  opt.gather_output = gather_output;
  opt.sequence_parallel = ctx.sp;
  // A frozen weight has no gradient buffer; dX must still be summed over TP (L1).
  ColumnParallelLinear layer(chunk(w, 0, r, n), chunk(b, 0, r, n), frozen_weight ? Tensor() : dw, db, opt,
                             "check.column");
  LinearSaved saved;
  const Tensor x_in = ctx.sp ? chunk(x, 0, r, n) : x;
  ctx.begin_phase("forward");
  Tensor y = layer.forward(x_in, saved, *ctx.tp);
  ctx.begin_phase("backward");
  Tensor dx = layer.backward(gather_output ? dy : chunk(dy, 2, r, n), saved, *ctx.tp);
  Outputs out{{"y", {y.clone(), gather_output ? kReplicated : 2}},
              {"dx", {dx.clone(), ctx.sp ? 0 : kReplicated}},
              {"dbias", {db, 0}}};
  if (!frozen_weight) out["dweight"] = {dw, 0};
  return out;
}

Pattern pattern_column(int tp, bool sp, bool gather_output) {
  if (tp == 1) return {};
  const uint64_t sbh = S * B * H * kF32, sbf = S * B * F * kF32;
  Pattern p;
  if (sp) {
    p["forward"].push_back({OpKind::all_gather, sbh, "SP: all-gather of the sequence shards of X"});
    p["backward"].push_back({OpKind::all_gather, sbh, "SP: all-gather of X again for the weight gradient"});
    p["backward"].push_back({OpKind::reduce_scatter, sbh, "SP: reduce-scatter of the partial dX"});
  } else {
    p["backward"].push_back({OpKind::all_reduce, sbh, "f's backward: all-reduce of the partial dX"});
  }
  if (gather_output)
    p["forward"].push_back({OpKind::all_gather, sbf, "gather_output: all-gather of Y's last dim", 2});
  return p;
}

/// Y = X·Bᵀ + b, row-parallel with the input split on its last dim.
Outputs run_row(RunContext& ctx, bool skip_bias_add = false) {
  const int n = ctx.size(), r = ctx.rank();
  const Tensor x = input_tensor({S, B, F}, ctx.seed, "row.x");
  const Tensor w = input_tensor({H, F}, ctx.seed, "row.w", 0.2f), b = input_tensor({H}, ctx.seed, "row.b");
  const Tensor dy = input_tensor({S, B, H}, ctx.seed, "row.dy");
  Tensor dw({H, F / n}), db({H});
  LinearOptions opt;
  opt.sequence_parallel = ctx.sp;
  opt.skip_bias_add = skip_bias_add;  // the caller adds the bias (e.g. fused into the next op)
  RowParallelLinear layer(chunk(w, 1, r, n), b, dw, db, opt, "check.row");
  LinearSaved saved;
  ctx.begin_phase("forward");
  Tensor y = layer.forward(chunk(x, 2, r, n), saved, *ctx.tp);
  ctx.begin_phase("backward");
  Tensor dx = layer.backward(ctx.sp ? chunk(dy, 0, r, n) : dy, saved, *ctx.tp);
  // Under SP the bias gradient covers this rank's tokens only (summed over TP after backward).
  return {{"y", {y.clone(), ctx.sp ? 0 : kReplicated}},
          {"dx", {dx.clone(), 2}},
          {"dweight", {dw, 1}},
          {"dbias", {db, ctx.sp ? kPartial : kReplicated}}};
}

Pattern pattern_row(int tp, bool sp) {
  if (tp == 1) return {};
  const uint64_t sbh = S * B * H * kF32;
  if (sp)
    return {{"forward", {{OpKind::reduce_scatter, sbh, "SP's g: reduce-scatter of the partial Y"}}},
            {"backward", {{OpKind::all_gather, sbh, "SP: all-gather of dY's sequence shards"}}}};
  return {{"forward", {{OpKind::all_reduce, sbh, "g: all-reduce of the partial Y"}}}};
}

Pattern pattern_mlp_once(int tp, bool sp);

/// The TP MLP: column (h → ffn) → GELU → row (ffn → h); one all-reduce each way without SP.
Outputs run_mlp(RunContext& ctx) {
  const int n = ctx.size(), r = ctx.rank();
  const Tensor x = input_tensor({S, B, H}, ctx.seed, "mlp.x");
  const Tensor w1 = input_tensor({F, H}, ctx.seed, "mlp.w1", 0.2f),
               b1 = input_tensor({F}, ctx.seed, "mlp.b1");
  const Tensor w2 = input_tensor({H, F}, ctx.seed, "mlp.w2", 0.2f),
               b2 = input_tensor({H}, ctx.seed, "mlp.b2");
  const Tensor dy = input_tensor({S, B, H}, ctx.seed, "mlp.dy");
  Tensor dw1({F / n, H}), db1({F / n}), dw2({H, F / n}), db2({H});
  LinearOptions opt;
  opt.sequence_parallel = ctx.sp;
  ColumnParallelLinear fc1(chunk(w1, 0, r, n), chunk(b1, 0, r, n), dw1, db1, opt, "check.mlp.fc1");
  RowParallelLinear fc2(chunk(w2, 1, r, n), b2, dw2, db2, opt, "check.mlp.fc2");
  LinearSaved s1, s2;
  ctx.begin_phase("forward");
  const Tensor h1 = fc1.forward(ctx.sp ? chunk(x, 0, r, n) : x, s1, *ctx.tp);
  const Tensor y = fc2.forward(ops::gelu_forward(h1), s2, *ctx.tp);
  ctx.begin_phase("backward");
  // Two backward passes (gradient accumulation): the weight gradients must be added to, not overwritten.
  Tensor dx;
  for (int pass = 0; pass < 2; ++pass) {
    const Tensor dact = fc2.backward(ctx.sp ? chunk(dy, 0, r, n) : dy, s2, *ctx.tp);
    dx = fc1.backward(ops::gelu_backward(dact, h1), s1, *ctx.tp);
  }
  const int seq = ctx.sp ? 0 : kReplicated;
  return {{"y", {y.clone(), seq}},   {"dx", {dx.clone(), seq}},
          {"fc1.dweight", {dw1, 0}}, {"fc1.dbias", {db1, 0}},
          {"fc2.dweight", {dw2, 1}}, {"fc2.dbias", {db2, ctx.sp ? kPartial : kReplicated}}};
}

Pattern pattern_mlp(int tp, bool sp) {
  if (tp == 1) return {};
  Pattern p = pattern_mlp_once(tp, sp);
  const std::vector<ExpectedCall> once = p["backward"];
  p["backward"].insert(p["backward"].end(), once.begin(), once.end());  // two backward passes
  return p;
}

/// The MLP's calls for one forward and one backward.
Pattern pattern_mlp_once(int, bool sp) {
  const uint64_t sbh = S * B * H * kF32;
  if (sp)
    return {{"forward",
             {{OpKind::all_gather, sbh, "fc1 (SP): all-gather of X"},
              {OpKind::reduce_scatter, sbh, "fc2 (SP's g): reduce-scatter of the partial Y"}}},
            {"backward",
             {{OpKind::all_gather, sbh, "fc2 (SP): all-gather of dY"},
              {OpKind::all_gather, sbh, "fc1 (SP): all-gather of X for the weight gradient"},
              {OpKind::reduce_scatter, sbh, "fc1 (SP): reduce-scatter of the partial dX"}}}};
  return {{"forward", {{OpKind::all_reduce, sbh, "fc2's g: all-reduce of the partial Y"}}},
          {"backward", {{OpKind::all_reduce, sbh, "fc1's f: all-reduce of the partial dX"}}}};
}

}  // namespace

void register_lab01(std::vector<Scenario>& out) {
  out.push_back(
      {.lab = "lab01",
       .name = "f_g",
       .summary = "f (copy_to_tensor_model_parallel_region) and g (reduce_from_…): forward and backward",
       .run = run_f_g,
       .pattern = pattern_f_g,
       .expected = expected_f_g});
  out.push_back({.lab = "lab01",
                 .name = "column_linear",
                 .summary = "ColumnParallelLinear forward/backward (output split on its last dim)",
                 .sp_variants = true,
                 .run = [](RunContext& c) { return run_column(c, false); },
                 .pattern = [](int tp, bool sp) { return pattern_column(tp, sp, false); }});
  out.push_back({.lab = "lab01",
                 .name = "column_linear_gather_output",
                 .summary = "ColumnParallelLinear with gather_output=true",
                 .run = [](RunContext& c) { return run_column(c, true); },
                 .pattern = [](int tp, bool sp) { return pattern_column(tp, sp, true); }});
  out.push_back({.lab = "lab01",
                 .name = "row_linear",
                 .summary = "RowParallelLinear forward/backward (input split on its last dim)",
                 .sp_variants = true,
                 .run = [](RunContext& c) { return run_row(c); },
                 .pattern = pattern_row});
  out.push_back({.lab = "lab01",
                 .name = "row_linear_skip_bias_add",
                 .summary = "RowParallelLinear with skip_bias_add=true: the output has no bias, the bias "
                            "still gets its gradient",
                 .run = [](RunContext& c) { return run_row(c, true); },
                 .pattern = pattern_row});
  out.push_back({.lab = "lab01",
                 .name = "column_linear_frozen_weight",
                 .summary = "ColumnParallelLinear with a frozen weight: dX is still summed over TP",
                 .run = [](RunContext& c) { return run_column(c, false, true); },
                 .pattern = [](int tp, bool sp) { return pattern_column(tp, sp, false); }});
  out.push_back({.lab = "lab01",
                 .name = "mlp",
                 .summary = "the TP MLP: column → GELU → row",
                 .sp_variants = true,
                 .run = run_mlp,
                 .pattern = pattern_mlp});
  out.push_back(gpt_step_scenario("lab01", false));
}

}  // namespace tpsp::checkers
