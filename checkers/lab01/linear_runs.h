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
/// column → GELU → row, kPasses backward passes; outputs y, dx and both layers' gradients.
RankOutputs run_mlp(RunContext& ctx);

}  // namespace tpsp::checkers::lab01
