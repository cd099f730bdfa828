// Dropless all-to-all token dispatch and combine with expert tensor parallelism, in the steps of
// Megatron-LM's MoEAlltoAllTokenDispatcher (megatron/core/transformer/moe/token_dispatcher.py):
//   dispatch: permute this rank's T·k choices by expert → exchange the counts (all_gather over tp_ep)
//             → all_to_all with split sizes over EP → (ETP > 1) all_gather_v over ETP → sort the
//             received chunks by local expert
//   combine:  unsort → (ETP > 1) reduce_scatter_v of the experts' row-parallel partial sums over ETP →
//             all_to_all back over EP → unpermute: y_t = Σ_j probs[t, j]·row(t, j)
// Each step's backward is the mirror step (an all_to_all with the splits swapped; all_gather_v ↔
// reduce_scatter_v). Rows are tokens of hidden size h; x here is this rank's tokens [T, h] (under
// sequence parallelism its sequence shard, flattened).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/moe/expert_parallel_state.h"
#include "engine/moe/router.h"

namespace tpsp::moe {

/// What dispatch decided from the routing and the exchanged counts; combine and both backwards reuse it.
struct DispatchPlan {
  int64_t tokens = 0, topk = 0, num_experts = 0;
  int64_t first_local = 0, num_local = 0;  ///< this rank's experts [first, first + num)
  /// [T·k]: permuted row i is choice order[i] = t·k + j; choices sorted by expert, then by token.
  std::vector<int64_t> order;
  /// counts[p·E + e]: choices of tp_ep rank p (= ep_rank·ETP + etp_rank) for expert e.
  std::vector<int64_t> counts;
  std::vector<int64_t> input_splits;   ///< [EP] rows this rank sends each EP rank
  std::vector<int64_t> output_splits;  ///< [EP] rows this rank receives from each EP rank
  std::vector<int64_t> etp_rows;       ///< [ETP] rows each ETP rank received over EP (all_gather_v counts)
  /// Rows of each received chunk, in received order: ETP rank q, EP source i, local expert e.
  std::vector<int64_t> chunks;
  std::vector<int64_t> rows_per_expert;  ///< [num_local] rows each local expert computes
};

/// Exchanges the routing's counts over tp_ep (one all_gather, label "<label>.counts") and plans the
/// exchanges. ShapeError "num_moe_experts=6 is not divisible by expert_model_parallel_size=4".
DispatchPlan plan_dispatch(const Routing& routing, ExpertParallelState& eps, const std::string& label);

/// x [T, h] → the local experts' rows [Σ rows_per_expert, h], grouped by local expert (labels
/// "<label>.dispatch", "<label>.etp_all_gather").
Tensor dispatch(const Tensor& x, const DispatchPlan& plan, ExpertParallelState& eps,
                const std::string& label);

/// The experts' outputs [Σ rows_per_expert, h] (ETP partial sums) → every choice's row back on its
/// rank, in permuted order [T·k, h] (labels "<label>.etp_reduce_scatter", "<label>.combine"). Unweighted:
/// unpermute() applies the router's probabilities.
Tensor combine_rows(const Tensor& expert_out, const DispatchPlan& plan, ExpertParallelState& eps,
                    const std::string& label);

/// y [T, h] = Σ_j probs[t, j]·rows[i] over the permuted rows i of token t (rows [T·k, h], probs [T, k]).
Tensor unpermute(const Tensor& rows, const Tensor& probs, const DispatchPlan& plan);

/// Backward of unpermute: d rows [T·k, h] = probs·dy, and dprobs [T, k] = rows·dy (into `dprobs`).
Tensor unpermute_backward(const Tensor& dy, const Tensor& rows, const Tensor& probs, const DispatchPlan& plan,
                          Tensor& dprobs);

/// Backward of combine_rows: d rows [T·k, h] → d expert outputs [Σ rows_per_expert, h] (the dispatch
/// path: all_to_all over EP, all_gather_v over ETP, sort).
Tensor combine_rows_backward(const Tensor& d_rows, const DispatchPlan& plan, ExpertParallelState& eps,
                             const std::string& label);

/// Backward of dispatch: d expert inputs [Σ rows_per_expert, h] (ETP partial sums) → dx [T, h], each
/// token's k choices summed (the combine path: unsort, reduce_scatter_v, all_to_all back).
Tensor dispatch_backward(const Tensor& d_rows, const DispatchPlan& plan, ExpertParallelState& eps,
                         const std::string& label);

}  // namespace tpsp::moe
