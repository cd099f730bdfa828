// lab01's prediction step (./check lab01 --predict; checkers/predict/predict.h): the calls of the TP MLP (its
// mlp scenario). tests/predict/test_steps_match_recorder.cpp runs it with the engine's solution and requires
// the recorder's calls to equal these.
#include "checkers/predict/step_helpers.h"

namespace tpsp::checkers::predict {

using comm::OpKind;
using comm::ReduceOp;

// lab01: the TP MLP without SP: f → fc1 (ColumnParallelLinear h→4h) → GeLU → fc2 (RowParallelLinear
// 4h→h) → g, one forward and one backward.
Step lab01_step() {
  Step s{.lab = "lab01",
         .title =
             "one step of the TP MLP: X [512, 2, 256] → f → fc1 = ColumnParallelLinear 256→1024 → GeLU → "
             "fc2 = RowParallelLinear 1024→256 → g, forward then backward, tp=2, no SP, f32",
         .phases = {"forward", "backward"},
         .group_size = TP,
         .sizes = mlp_sizes()};
  s.calls = {
      {call("forward", OpKind::all_reduce, "tp", kSbh), "the output Y " + tensor({S, B, H}, kSbh),
       "g = reduce_from_tensor_model_parallel_region after fc2: each rank's Y_r = GeLU(X·A_rᵀ)·B_rᵀ sums "
       "only "
       "its 512 of the 1024 inner columns, a partial sum; the all-reduce adds the ranks' partial outputs"},
      {call("backward", OpKind::all_reduce, "tp", kSbh), "the input gradient dX " + tensor({S, B, H}, kSbh),
       "f = copy_to_tensor_model_parallel_region before fc1: each rank's dX_r = dY_r·A_r covers only its 512 "
       "output columns of fc1, a partial sum; f's backward all-reduces it"}};
  s.hints = {
      {"forward", OpKind::all_reduce,
       "the forward has one all-reduce, g's after fc2: f before fc1 is the identity in forward (every rank "
       "already holds the whole X)"},
      {"backward", OpKind::all_reduce,
       "the backward has one all-reduce, f's: g's backward passes dY on unchanged (it is already whole on "
       "every rank), and each rank's weight gradients are gradients of its own shard, with no communication"},
      {"", OpKind::all_gather,
       "without SP nothing is gathered: fc1's output stays split on its last dim (gather_output=false) and "
       "fc2 takes it split (input_is_parallel=true)"},
      {"", OpKind::reduce_scatter, "a reduce-scatter appears only with sequence parallelism (lab03)"}};
  return s;
}

}  // namespace tpsp::checkers::predict
