// lab03 scenarios, shared by the ranks and the grader: the sequence-parallel mappings and the
// gradient reduction of sequence-parallel parameters on integer tensors (exact in any order); the
// SP transformer layer and its activation memory are in checkers/layer/.
#pragma once

#include <string>

#include "checkers/inputs.h"
#include "checkers/lab01/lab01.h"

namespace tpsp::checkers::lab03 {

constexpr int64_t S = 12, B = 2, H = 24;
constexpr uint64_t kSbh = S * B * H * 4;

/// Rank r's own integer [s, b, h] tensor named `name`.
inline Tensor rank_input(uint64_t seed, const std::string& name, int r) {
  return input_tensor({S, B, H}, seed, name + ".rank" + std::to_string(r), 1, true);
}
/// The replicated input x and the replicated output gradient dz, whole [s, b, h].
inline Tensor sp_x(uint64_t seed) {
  return input_tensor({S, B, H}, seed, "sp.x", 1, true);
}
inline Tensor sp_dz(uint64_t seed) {
  return input_tensor({S, B, H}, seed, "sp.dz", 1, true);
}
/// Rank r's partial gradient [h] of "gamma", "beta" or "bias" in the gradient-reduction scenario.
inline Tensor sync_grad(uint64_t seed, const std::string& which, int r) {
  return input_tensor({H}, seed, "sync." + which + ".rank" + std::to_string(r), 1, true);
}

/// The linear layers' SP paths (layers_sp.cpp), run as lab01's variants are with SP on; listed once for
/// both halves (run.cpp and expected.cpp): each option is a branch of layers_sp.cpp that the plain
/// scenarios never take.
inline constexpr lab01::LinearVariant kSpLinearVariants[] = {
    {lab01::LinearLayer::column,
     "sp_column_linear",
     "ColumnParallelLinear under SP: all-gather of the [s/tp, b, h] input, the input gathered again for the "
     "weight gradient, reduce-scatter of dX",
     {}},
    {lab01::LinearLayer::row,
     "sp_row_linear",
     "RowParallelLinear under SP: reduce-scatter of the partial Y, all-gather of dY, the bias gradient of "
     "this "
     "rank's tokens",
     {}},
    {lab01::LinearLayer::column,
     "sp_column_linear_gather_output",
     "ColumnParallelLinear under SP with gather_output: Y's last dim gathered, dY split back",
     {.gather_output = true}},
    {lab01::LinearLayer::column,
     "sp_column_linear_skip_bias_add",
     "ColumnParallelLinear under SP with skip_bias_add: no bias in Y, db still computed",
     {.skip_bias_add = true}},
    {lab01::LinearLayer::column,
     "sp_column_linear_frozen_weight",
     "ColumnParallelLinear under SP with a frozen weight: no weight gradient, dX still reduce-scattered",
     {.frozen_weight = true}},
    {lab01::LinearLayer::row,
     "sp_row_linear_skip_bias_add",
     "RowParallelLinear under SP with skip_bias_add: no bias in Y, db still this rank's share",
     {.skip_bias_add = true}},
};

}  // namespace tpsp::checkers::lab03
