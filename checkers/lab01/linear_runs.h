// Rank functions of the linear-layer scenarios (checkers/lab01/run.cpp): lab01 runs them without SP,
// lab03 with SP (sp_column_linear, sp_row_linear, sp_mlp: layers_sp.cpp).
#pragma once

#include "checkers/lab01/lab01.h"
#include "checkers/run_context.h"

namespace tpsp::checkers::lab01 {

/// ColumnParallelLinear: one forward, kPasses backward passes, a second forward on new inputs.
/// Outputs y, y_second, dx, dbias and (unless frozen) dweight; under ctx.sp x is [s/tp, b, h].
RankOutputs run_column(RunContext& ctx, const LinearCase& lc);
/// RowParallelLinear, the same phases; under ctx.sp y and dy are [s/tp, b, h].
RankOutputs run_row(RunContext& ctx, const LinearCase& lc);
/// RowParallelLinear's contract: an x whose last dim does not match the weight is a ShapeError before
/// any communication. Outputs check_refusal's flags for "x_wider_than_local_in_features" (x of F/tp + 1
/// columns, input_is_parallel) and, without SP, "whole_x_wider_than_in_features" (x of F + tp columns,
/// split by the layer into chunks of F/tp + 1). With `overlap` the layer has tp_comm_overlap on (lab04's
/// forward_overlap takes on the same contract).
RankOutputs run_row_refuses(RunContext& ctx, bool overlap = false);
/// column → GELU → row, kPasses backward passes; outputs y, dx and both layers' gradients.
RankOutputs run_mlp(RunContext& ctx);

}  // namespace tpsp::checkers::lab01
