// lab04's prediction step (./check lab04 --predict; checkers/predict/predict.h): column_overlap's calls.
// tests/predict/test_steps_match_recorder.cpp runs it with the engine's solution and requires the
// recorder's calls to equal these.
#include "checkers/predict/step_helpers.h"

namespace tpsp::checkers::predict {

using comm::OpKind;
using comm::ReduceOp;

// lab04: ColumnParallelLinear h→4h with tp_comm_overlap and SP: forward all_gather_matmul's ring,
// backward the async all-gather (hidden by dgrad) and reduce-scatter (hidden by wgrad).
Step lab04_step() {
  const uint64_t shard = kSbh / TP;
  Step s{.lab = "lab04",
         .title =
             "one step of an overlapped ColumnParallelLinear 256→1024 (tp_comm_overlap, SP): each rank "
             "holds X's shard [256, 2, 256], forward then backward, tp=2, f32",
         .phases = {"forward", "backward"},
         .group_size = TP,
         .sizes = mlp_sizes()};
  const std::string t = "X's shard " + tensor({S / TP, B, H}, shard);
  s.calls = {
      {call("forward", OpKind::send, "tp", shard, -1, 1), t,
       "all_gather_matmul's ring, step 1 of 2: send the shard you hold to rank r+1 = 1 while multiplying it"},
      {call("forward", OpKind::recv, "tp", shard, -1, 1), t,
       "all_gather_matmul's ring, step 1 of 2: receive rank r−1's shard (rank 1 at tp=2) into a fresh "
       "buffer, "
       "multiplied at step 2 (the last step sends nothing)"},
      {call("backward", OpKind::all_gather, "tp", kSbh, 0),
       "its output, X gathered whole, " + tensor({S, B, H}, kSbh),
       "the weight gradient's input, all_gather_async issued BEFORE the dgrad GEMM dX = dY·A, which does not "
       "need it"},
      {call("backward", OpKind::reduce_scatter, "tp", kSbh, 0), "the partial dX " + tensor({S, B, H}, kSbh),
       "reduce_scatter_async of dX issued BEFORE the weight-gradient GEMM dA = dYᵀ·X and waited after it"}};
  s.hints = {
      {"forward", OpKind::all_gather,
       "with tp_comm_overlap the forward all-gather is the ring of send/recv inside all_gather_matmul: "
       "no all_gather call"},
      {"", OpKind::all_reduce, "under SP the column layer never all-reduces: dX is reduce-scattered"}};
  return s;
}

}  // namespace tpsp::checkers::predict
