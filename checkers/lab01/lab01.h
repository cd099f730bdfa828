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

// Whole inputs, drawn from (seed, name).
inline Tensor col_x(uint64_t s) {
  return input_tensor({S, B, H}, s, "col.x");
}
inline Tensor col_w(uint64_t s) {
  return input_tensor({F, H}, s, "col.w", 0.2f);
}
inline Tensor col_b(uint64_t s) {
  return input_tensor({F}, s, "col.b");
}
/// Inputs of a second forward call (after the backward passes): its result must not change the first's.
inline Tensor col_x2(uint64_t s) {
  return input_tensor({S, B, H}, s, "col.x2");
}
inline Tensor row_x2(uint64_t s) {
  return input_tensor({S, B, F}, s, "row.x2");
}
inline Tensor col_dy(uint64_t s) {
  return input_tensor({S, B, F}, s, "col.dy");
}
inline Tensor row_x(uint64_t s) {
  return input_tensor({S, B, F}, s, "row.x");
}
inline Tensor row_w(uint64_t s) {
  return input_tensor({H, F}, s, "row.w", 0.2f);
}
inline Tensor row_b(uint64_t s) {
  return input_tensor({H}, s, "row.b");
}
inline Tensor row_dy(uint64_t s) {
  return input_tensor({S, B, H}, s, "row.dy");
}
inline Tensor mlp_x(uint64_t s) {
  return input_tensor({S, B, H}, s, "mlp.x");
}
inline Tensor mlp_w1(uint64_t s) {
  return input_tensor({F, H}, s, "mlp.w1", 0.2f);
}
inline Tensor mlp_b1(uint64_t s) {
  return input_tensor({F}, s, "mlp.b1");
}
inline Tensor mlp_w2(uint64_t s) {
  return input_tensor({H, F}, s, "mlp.w2", 0.2f);
}
inline Tensor mlp_b2(uint64_t s) {
  return input_tensor({H}, s, "mlp.b2");
}
inline Tensor mlp_dy(uint64_t s) {
  return input_tensor({S, B, H}, s, "mlp.dy");
}
/// f and g on integers: f's input, rank r's backward partial, rank r's forward partial of g, g's dZ.
inline Tensor f_x(uint64_t s) {
  return input_tensor({S, B, H}, s, "f.x", 1, true);
}
inline Tensor f_dy(uint64_t s, int r) {
  return input_tensor({S, B, H}, s, "f.dy.rank" + std::to_string(r), 1, true);
}
inline Tensor g_partial(uint64_t s, int r) {
  return input_tensor({S, B, H}, s, "g.partial.rank" + std::to_string(r), 1, true);
}
inline Tensor g_dz(uint64_t s) {
  return input_tensor({S, B, H}, s, "g.dz", 1, true);
}

}  // namespace tpsp::checkers::lab01
