// lab01 on the ranks: the learner's f/g, ColumnParallelLinear, RowParallelLinear and the TP MLP. The
// layer runs also serve lab03's SP scenarios (linear_runs.h).
#include "checkers/lab01/lab01.h"
#include "checkers/lab01/linear_runs.h"
#include "checkers/run_context.h"
#include "engine/ops/elementwise.h"
#include "engine/tensor_parallel/layers.h"
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::checkers {

namespace {

using namespace lab01;
using tensor_parallel::ColumnParallelLinear;
using tensor_parallel::LinearOptions;
using tensor_parallel::LinearSaved;
using tensor_parallel::RowParallelLinear;

/// f and g on integer tensors: each rank's backward input of f and forward input of g is its own
/// partial; the answers are their sums.
RankOutputs run_f_g(RunContext& ctx) {
  using namespace tensor_parallel;
  comm::ProcessGroup& tp = *ctx.tp;
  const Tensor x = ctx.on_device(f_x(ctx.in)), dy = ctx.on_device(f_dy(ctx.in, ctx.rank())),
               p = ctx.on_device(g_partial(ctx.in, ctx.rank())), dz = ctx.on_device(g_dz(ctx.in));
  RankOutputs out;
  ctx.begin_phase("f.forward");
  out["f_forward"] = guarded("f forward", {{"x", &x}}, [&] {
                       return copy_to_tensor_model_parallel_region.forward(x, tp, "check.f");
                     }).clone();
  ctx.begin_phase("f.backward");
  out["f_backward"] = guarded("f backward", {{"dy", &dy}}, [&] {
                        return copy_to_tensor_model_parallel_region.backward(dy, tp, "check.f");
                      }).clone();
  ctx.begin_phase("g.forward");
  out["g_forward"] = guarded("g forward", {{"x", &p}}, [&] {
                       return reduce_from_tensor_model_parallel_region.forward(p, tp, "check.g");
                     }).clone();
  ctx.begin_phase("g.backward");
  out["g_backward"] = guarded("g backward", {{"dy", &dz}}, [&] {
                        return reduce_from_tensor_model_parallel_region.backward(dz, tp, "check.g");
                      }).clone();
  return out;
}

}  // namespace

namespace lab01 {

/// Y = X·Aᵀ + b column-parallel, then kPasses backward passes with the same dY.
RankOutputs run_column(RunContext& ctx, const LinearCase& lc) {
  const int n = ctx.size();
  Tensor dw({F / n, H}, DType::f32, ctx.device), db({F / n}, DType::f32, ctx.device);
  LinearOptions opt;
  opt.gather_output = lc.gather_output;
  opt.skip_bias_add = lc.skip_bias_add;
  opt.sequence_parallel = ctx.sp;
  ColumnParallelLinear layer(ctx.on_device(col_w(ctx.in)), ctx.on_device(col_b(ctx.in)),
                             lc.frozen_weight ? Tensor() : dw, db, opt, "check.column");
  LinearSaved saved;
  // Every input is asked for before the first call (the relay's answers then never wait behind the calls).
  const Tensor x_in = ctx.on_device(col_x(ctx.in, ctx.sp));
  const Tensor dy_in = ctx.on_device(col_dy(ctx.in, lc.gather_output));
  const Tensor x2_in = ctx.on_device(col_x2(ctx.in, ctx.sp));
  ctx.begin_phase("forward");
  const Tensor y = guarded("ColumnParallelLinear.forward", {{"x", &x_in}},
                           [&] { return layer.forward(x_in, saved, *ctx.tp); });
  ctx.begin_phase("backward");
  Tensor dx;
  for (int pass = 0; pass < kPasses; ++pass)
    dx = guarded("ColumnParallelLinear.backward", {{"dy", &dy_in}},
                 [&] { return layer.backward(dy_in, saved, *ctx.tp); });
  // A second forward: the tensors returned before (y, dx) must not change (no reused output buffer).
  ctx.begin_phase("forward.second");
  LinearSaved saved2;
  const Tensor y2 = layer.forward(x2_in, saved2, *ctx.tp);
  RankOutputs out{{"y", y}, {"y_second", y2}, {"dx", dx}, {"dbias", db}};
  if (!lc.frozen_weight) out["dweight"] = dw;
  return out;
}

/// Y = X·Bᵀ + b row-parallel (input split on its last dim, or split by the layer), kPasses backward.
RankOutputs run_row(RunContext& ctx, const LinearCase& lc) {
  const int n = ctx.size();
  Tensor dw({H, F / n}, DType::f32, ctx.device), db({H}, DType::f32, ctx.device);
  LinearOptions opt;
  opt.sequence_parallel = ctx.sp;
  opt.skip_bias_add = lc.skip_bias_add;
  opt.input_is_parallel = lc.input_is_parallel;
  RowParallelLinear layer(ctx.on_device(row_w(ctx.in)), ctx.on_device(row_b(ctx.in)), dw, db, opt,
                          "check.row");
  LinearSaved saved;
  const Tensor x_in = ctx.on_device(row_x(ctx.in, lc.input_is_parallel));
  const Tensor dy_in = ctx.on_device(row_dy(ctx.in, ctx.sp));
  const Tensor x2_in = ctx.on_device(row_x2(ctx.in, lc.input_is_parallel));
  ctx.begin_phase("forward");
  const Tensor y = guarded("RowParallelLinear.forward", {{"x", &x_in}},
                           [&] { return layer.forward(x_in, saved, *ctx.tp); });
  ctx.begin_phase("backward");
  Tensor dx;
  for (int pass = 0; pass < kPasses; ++pass)
    dx = guarded("RowParallelLinear.backward", {{"dy", &dy_in}},
                 [&] { return layer.backward(dy_in, saved, *ctx.tp); });
  // A second forward: the tensors returned before (y, dx) must not change (no reused output buffer).
  ctx.begin_phase("forward.second");
  LinearSaved saved2;
  const Tensor y2 = layer.forward(x2_in, saved2, *ctx.tp);
  return {{"y", y}, {"y_second", y2}, {"dx", dx}, {"dweight", dw}, {"dbias", db}};
}

RankOutputs run_row_refuses(RunContext& ctx, bool overlap) {
  const int n = ctx.size();
  Tensor dw({H, F / n}, DType::f32, ctx.device), db({H}, DType::f32, ctx.device);
  const auto layer = [&](bool input_is_parallel) {
    LinearOptions opt;
    opt.sequence_parallel = ctx.sp;
    opt.input_is_parallel = input_is_parallel;
    opt.tp_comm_overlap = overlap;
    return RowParallelLinear(ctx.on_device(row_w(ctx.in)), ctx.on_device(row_b(ctx.in)), dw, db, opt,
                             "check.row");
  };
  const Tensor wide = ctx.on_device(input_tensor({S, B, F / n + 1}, ctx.in, "row.wide"));
  const Tensor fits = ctx.on_device(input_tensor({S, B, F / n}, ctx.in, "row.fits"));
  const RowParallelLinear parallel_in = layer(true);
  ctx.begin_phase("refuse");
  RankOutputs out;
  LinearSaved saved;
  check_accepts(ctx, out, "x_of_local_in_features", [&] { parallel_in.forward(fits, saved, *ctx.tp); });
  // "ShapeError naming both shapes": x's and the local weight's.
  check_refusal_naming(ctx, out, "x_wider_than_local_in_features",
                       {shape_str(wide.shape()), shape_str({H, F / n})},
                       [&] { parallel_in.forward(wide, saved, *ctx.tp); });
  if (!ctx.sp) {
    const RowParallelLinear whole_in = layer(false);
    const Tensor whole = ctx.on_device(input_tensor({S, B, F + n}, ctx.in, "row.whole_wide"));
    check_refusal(ctx, out, "whole_x_wider_than_in_features",
                  [&] { whole_in.forward(whole, saved, *ctx.tp); });
  }
  return out;
}

/// The TP MLP: column (h → ffn) → GELU → row (ffn → h), kPasses backward passes.
RankOutputs run_mlp(RunContext& ctx) {
  const int n = ctx.size();
  const Device d = ctx.device;
  Tensor dw1({F / n, H}, DType::f32, d), db1({F / n}, DType::f32, d), dw2({H, F / n}, DType::f32, d),
      db2({H}, DType::f32, d);
  LinearOptions opt;
  opt.sequence_parallel = ctx.sp;
  ColumnParallelLinear fc1(ctx.on_device(mlp_w1(ctx.in)), ctx.on_device(mlp_b1(ctx.in)), dw1, db1, opt,
                           "check.mlp.fc1");
  RowParallelLinear fc2(ctx.on_device(mlp_w2(ctx.in)), ctx.on_device(mlp_b2(ctx.in)), dw2, db2, opt,
                        "check.mlp.fc2");
  LinearSaved s1, s2;
  const Tensor x_in = ctx.on_device(mlp_x(ctx.in, ctx.sp));
  const Tensor dy_in = ctx.on_device(mlp_dy(ctx.in, ctx.sp));
  ctx.begin_phase("forward");
  const Tensor h1 = fc1.forward(x_in, s1, *ctx.tp);
  const Tensor y = fc2.forward(ops::gelu_forward(h1), s2, *ctx.tp);
  ctx.begin_phase("backward");
  Tensor dx;
  for (int pass = 0; pass < kPasses; ++pass) {
    const Tensor dact = fc2.backward(dy_in, s2, *ctx.tp);
    dx = fc1.backward(ops::gelu_backward(dact, h1), s1, *ctx.tp);
  }
  return {{"y", y.clone()},   {"dx", dx.clone()},   {"fc1.dweight", dw1},
          {"fc1.dbias", db1}, {"fc2.dweight", dw2}, {"fc2.dbias", db2}};
}

}  // namespace lab01

namespace {

void add_runs(std::map<std::string, RunFn>& out) {
  out["lab01/f_g"] = run_f_g;
  for (const LinearVariant& v : kLinearVariants)
    out["lab01/" + std::string(v.name)] = [v](RunContext& c) {
      return v.layer == LinearLayer::column ? run_column(c, v.lc) : run_row(c, v.lc);
    };
  out["lab01/row_linear_refuses_wrong_in"] = [](RunContext& c) { return run_row_refuses(c); };
  out["lab01/mlp"] = run_mlp;
}

}  // namespace

const LabRuns kRuns(add_runs);

}  // namespace tpsp::checkers
