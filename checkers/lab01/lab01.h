// lab01 scenarios, shared by the ranks and the grader: f and g, ColumnParallelLinear,
// RowParallelLinear and the TP MLP (Shoeybi et al. 2019 §3, Fig. 3a). Sizes are not powers of two
// where they need not be: s=12, b=2, h=24, out/ffn=36 (all divisible by tp = 1, 2, 3, 4).
#pragma once

#include <string>

#include "checkers/inputs.h"

namespace tpsp::checkers::lab01 {

constexpr int64_t S = 12, B = 2, H = 24, F = 36;
constexpr uint64_t kF32 = 4;
/// Backward passes of the layer scenarios: gradients must be ACCUMULATED over them (Megatron
/// accumulates into .grad / main_grad over micro-batches), so the expected weight and bias
/// gradients are `kPasses` times one pass's.
constexpr int kPasses = 2;

/// The variants of the linear-layer scenarios.
struct LinearCase {
  bool gather_output = false;  ///< ColumnParallelLinear: all-gather Y's last dim
  bool skip_bias_add = false;  ///< the layer leaves the bias to the caller (its gradient is still computed)
  bool frozen_weight = false;  ///< ColumnParallelLinear: no weight gradient buffer (dX still summed)
  bool input_is_parallel = true;  ///< RowParallelLinear: false = the layer splits a replicated input itself
};

/// Which layer a linear-layer scenario runs.
enum class LinearLayer { column, row };

/// One variant of the linear-layer scenarios, listed once for both halves of the checker: run.cpp
/// registers its rank function (run_column or run_row with `lc`) and expected.cpp its scenario
/// (expected_column or expected_row, and the pattern) under the same name.
struct LinearVariant {
  LinearLayer layer;
  const char* name;     ///< the scenario's name within its lab
  const char* summary;  ///< ./check --list's line
  LinearCase lc;
};

/// lab01's variants, without SP (lab03.h kSpLinearVariants runs them with SP).
inline constexpr LinearVariant kLinearVariants[] = {
    {LinearLayer::column,
     "column_linear",
     "ColumnParallelLinear forward, two backward passes (gradients accumulate)",
     {}},
    {LinearLayer::column,
     "column_linear_gather_output",
     "ColumnParallelLinear with gather_output=true",
     {.gather_output = true}},
    {LinearLayer::column,
     "column_linear_skip_bias_add",
     "ColumnParallelLinear with skip_bias_add=true: the output has no bias, the bias still gets its gradient",
     {.skip_bias_add = true}},
    {LinearLayer::column,
     "column_linear_frozen_weight",
     "ColumnParallelLinear with a frozen weight: dX is still summed over TP",
     {.frozen_weight = true}},
    {LinearLayer::row,
     "row_linear",
     "RowParallelLinear forward, two backward passes (input split on its last dim)",
     {}},
    {LinearLayer::row,
     "row_linear_skip_bias_add",
     "RowParallelLinear with skip_bias_add=true: the output has no bias, the bias still gets its gradient",
     {.skip_bias_add = true}},
    {LinearLayer::row,
     "row_linear_input_not_parallel",
     "RowParallelLinear with input_is_parallel=false: the layer splits a replicated input "
     "(scatter_to_tensor_model_parallel_region)",
     {.input_is_parallel = false}},
};

// The inputs, as each rank holds them (checkers/inputs.h): the grader gets the whole tensors from a
// seed (`col_w(seed)`), a rank its part (`col_w(ctx.in)`: its chunk of col.w's rows). An input that a
// layout holds split (x under SP, a weight's shard) is split here for both sides alike.
/// X: whole, or split along s under SP.
inline Tensor col_x(const InputDraw& d, bool sp) {
  return (sp ? d.split(0) : d)({"col.x", {S, B, H}});
}
/// A (out × in): each rank holds its rows.
inline Tensor col_w(const InputDraw& d) {
  return d.split(0)({"col.w", {F, H}, 0.2f});
}
inline Tensor col_b(const InputDraw& d) {
  return d.split(0)({"col.b", {F}});
}
/// Inputs of a second forward call (after the backward passes): its result must not change the first's.
inline Tensor col_x2(const InputDraw& d, bool sp) {
  return (sp ? d.split(0) : d)({"col.x2", {S, B, H}});
}
/// dY: whole after a gathered output, else each rank's chunk of the out features.
inline Tensor col_dy(const InputDraw& d, bool gather_output) {
  return (gather_output ? d : d.split(2))({"col.dy", {S, B, F}});
}
/// Row-parallel X: split along its last dim when the input is parallel, else whole.
inline Tensor row_x(const InputDraw& d, bool input_is_parallel) {
  return (input_is_parallel ? d.split(2) : d)({"row.x", {S, B, F}});
}
inline Tensor row_x2(const InputDraw& d, bool input_is_parallel) {
  return (input_is_parallel ? d.split(2) : d)({"row.x2", {S, B, F}});
}
/// B (out × in): each rank holds its columns; the bias is whole.
inline Tensor row_w(const InputDraw& d) {
  return d.split(1)({"row.w", {H, F}, 0.2f});
}
inline Tensor row_b(const InputDraw& d) {
  return d({"row.b", {H}});
}
/// dY of the row layer: whole, or split along s under SP.
inline Tensor row_dy(const InputDraw& d, bool sp) {
  return (sp ? d.split(0) : d)({"row.dy", {S, B, H}});
}
inline Tensor mlp_x(const InputDraw& d, bool sp) {
  return (sp ? d.split(0) : d)({"mlp.x", {S, B, H}});
}
inline Tensor mlp_w1(const InputDraw& d) {
  return d.split(0)({"mlp.w1", {F, H}, 0.2f});
}
inline Tensor mlp_b1(const InputDraw& d) {
  return d.split(0)({"mlp.b1", {F}});
}
inline Tensor mlp_w2(const InputDraw& d) {
  return d.split(1)({"mlp.w2", {H, F}, 0.2f});
}
inline Tensor mlp_b2(const InputDraw& d) {
  return d({"mlp.b2", {H}});
}
inline Tensor mlp_dy(const InputDraw& d, bool sp) {
  return (sp ? d.split(0) : d)({"mlp.dy", {S, B, H}});
}
/// f and g on integers: f's input, rank r's backward partial, rank r's forward partial of g, g's dZ.
/// The partials are each rank's own: no rank can compute the sums without the all-reduce.
inline Tensor f_x(const InputDraw& d) {
  return d({"f.x", {S, B, H}, 1, true});
}
inline Tensor f_dy(const InputDraw& d, int r) {
  return d.of_rank({"f.dy", {S, B, H}, 1, true}, r);
}
inline Tensor g_partial(const InputDraw& d, int r) {
  return d.of_rank({"g.partial", {S, B, H}, 1, true}, r);
}
inline Tensor g_dz(const InputDraw& d) {
  return d({"g.dz", {S, B, H}, 1, true});
}

}  // namespace tpsp::checkers::lab01
