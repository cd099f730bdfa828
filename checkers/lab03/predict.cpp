// lab03's prediction step (./check lab03 --predict; checkers/predict/predict.h): the MLP under SP and
// sp_grad_sync. tests/predict/test_steps_match_recorder.cpp runs it with the engine's solution and requires
// the recorder's calls to equal these.
#include "checkers/predict/step_helpers.h"

namespace tpsp::checkers::predict {

using comm::OpKind;
using comm::ReduceOp;

// lab03: the lab01 MLP with sequence parallelism, then the gradient sum of fc2's (replicated) bias.
Step lab03_step() {
  Step s{.lab = "lab03",
         .title =
             "one step of the TP MLP with sequence parallelism: each rank holds X's shard [256, 2, 256] "
             "(s/tp rows); fc1 = ColumnParallelLinear 256→1024, GeLU, fc2 = RowParallelLinear 1024→256, "
             "forward, backward, then finalize_grads (allreduce_sequence_parallel_grads of fc2's bias "
             "gradient); tp=2, f32",
         .phases = {"forward", "backward", "finalize_grads"},
         .group_size = TP,
         .sizes = mlp_sizes()};
  const std::string whole = tensor({S, B, H}, kSbh);
  s.calls = {
      {call("forward", OpKind::all_gather, "tp", kSbh, 0), "its output, X gathered whole, " + whole,
       "fc1's gather_from_sequence_parallel_region (in place of f): each rank holds s/tp = 256 rows of X, "
       "and the column-parallel GEMM needs every token"},
      {call("forward", OpKind::reduce_scatter, "tp", kSbh, 0), "fc2's partial output " + whole,
       "fc2's reduce_scatter_to_sequence_parallel_region (in place of g's all-reduce): the ranks' partial "
       "outputs are summed and each keeps its 256 rows, [256, 2, 256]"},
      {call("backward", OpKind::all_gather, "tp", kSbh, 0), "its output, dY gathered whole, " + whole,
       "fc2's backward: the reduce-scatter's backward is an all-gather of dY's sequence shards (the pair is "
       "conjugate)"},
      {call("backward", OpKind::all_gather, "tp", kSbh, 0), "its output, X gathered whole again, " + whole,
       "fc1's weight gradient dA_r = dY_rᵀ·X needs the whole X, and only the shard was saved: it is gathered "
       "again (Megatron's LinearWithGradAccumulationAndAsyncCommunication)"},
      {call("backward", OpKind::reduce_scatter, "tp", kSbh, 0), "the partial input gradient dX " + whole,
       "fc1's backward: the all-gather's backward is a reduce-scatter, summing the ranks' partial dX_r and "
       "leaving each its 256 rows"},
      {call("finalize_grads", OpKind::all_reduce, "tp", H * kF32),
       "fc2's bias gradient " + tensor({H}, H * kF32),
       "fc2's bias is replicated, but under SP each rank's db = Σ dY covers only its own 256 tokens: "
       "allreduce_sequence_parallel_grads SUMS it over TP (not an average)"}};
  s.hints = {{"forward", OpKind::all_reduce,
              "with SP there is no all-reduce in forward: g's all-reduce becomes a reduce-scatter and f an "
              "all-gather"},
             {"backward", OpKind::all_reduce,
              "with SP there is no all-reduce in backward: f's backward becomes a reduce-scatter"}};
  return s;
}

}  // namespace tpsp::checkers::predict
