// Expected outputs and calls of the linear-layer scenarios (checkers/lab01/expected.cpp), from
// reference/linear.h: lab01 grades them without SP, lab03 with SP (sp_column_linear, sp_row_linear,
// sp_mlp).
#pragma once

#include "checkers/lab01/lab01.h"
#include "checkers/scenario.h"

namespace tpsp::checkers::lab01 {

/// y [s, b, out] (rank r: chunk r of dim 2, or replicated with gather_output), dx (rows r under
/// SP), dweight and dbias accumulated over kPasses.
ExpectedOutputs expected_column(uint64_t seed, bool sp, const LinearCase& lc);
/// tp > 1: backward per pass 1 all-reduce of dX, or under SP forward 1 all-gather and backward per
/// pass 1 all-gather (X again) + 1 reduce-scatter, all of s·b·h·4 bytes.
Pattern pattern_column(int tp, bool sp, const LinearCase& lc);
/// y (rows r under SP), dx (chunk r of dim 2 with input_is_parallel), dweight, dbias (a partial
/// sum under SP).
ExpectedOutputs expected_row(uint64_t seed, bool sp, const LinearCase& lc);
/// tp > 1: forward 1 all-reduce, or under SP 1 reduce-scatter and backward per pass 1 all-gather.
Pattern pattern_row(int tp, bool sp, const LinearCase& lc);
/// run_row_refuses' flags (checkers/lab01/linear_runs.h): every refusal 1, no call before it.
ExpectedOutputs expected_row_refuses(int tp, bool sp);
/// The MLP's y, dx and both layers' gradients.
ExpectedOutputs expected_mlp(uint64_t seed, int tp, bool sp);
Pattern pattern_mlp(int tp, bool sp);

}  // namespace tpsp::checkers::lab01
