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

/// Rank r's own integer [s, b, h] tensor named `name` (checkers/inputs.h: no other rank gets it).
inline Tensor rank_input(const InputDraw& d, const std::string& name, int r) {
  return d.of_rank({name, {S, B, H}, 1, true}, r);
}
/// The input x and the output gradient dz, integer [s, b, h]: replicated (every rank's, whole), or
/// sequence-parallel (`sharded`: a rank holds its s/tp rows; the grader gets the whole it comes from).
inline Tensor sp_x(const InputDraw& d, bool sharded) {
  return (sharded ? d.split(0) : d)({"sp.x", {S, B, H}, 1, true});
}
inline Tensor sp_dz(const InputDraw& d, bool sharded) {
  return (sharded ? d.split(0) : d)({"sp.dz", {S, B, H}, 1, true});
}
/// Rank r's own partial gradient [h] of "gamma", "beta" or "bias" in the gradient-reduction scenario.
inline Tensor sync_grad(const InputDraw& d, const std::string& which, int r) {
  return d.of_rank({"sync." + which, {H}, 1, true}, r);
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
