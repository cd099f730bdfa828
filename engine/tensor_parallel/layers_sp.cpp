// ColumnParallelLinear and RowParallelLinear under sequence parallelism (see layers.h): the layers'
// inputs and outputs outside the TP region are [s/tp, b, h] shards of the sequence, so f and g
// become an all-gather entering the region and a reduce-scatter leaving it (Korthikanti et al. 2022
// §4.2.2, Fig. 5). Backward gathers the saved input shard AGAIN for the weight gradient instead of
// keeping the gathered whole from forward (Megatron-LM layers.py
// LinearWithGradAccumulationAndAsyncCommunication, sequence_parallel branch): activation memory
// stays at 1/tp for one more all-gather per backward.
// layers.cpp (lab01) dispatches here when LinearOptions::sequence_parallel is set and
// tp_comm_overlap is not (with it, layers_overlap.cpp, lab04, does both). VocabParallelEmbedding's SP
// path is here too (vocab_embedding.cpp, lab02, dispatches): its g becomes a reduce-scatter.
// lab03 replaces this translation unit.
#include "engine/error.h"
#include "engine/lab_todo.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/ops/matmul.h"
#include "engine/tensor_parallel/layers.h"
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::tensor_parallel {

Tensor ColumnParallelLinear::forward_sp(const Tensor& x, LinearSaved& saved, ProcessGroup& tp) const {
  // TODO(lab03 ColumnParallelLinear SP forward): x [s/tp, b, in], rows [r·s/tp, (r+1)·s/tp) of the
  // whole X → Y_r = X·A_rᵀ + b_r over the WHOLE sequence, [s, b, out/tp] (bias as in lab01: none when
  // undefined or skip_bias_add; gather_output as in lab01). Communication on tp: exactly one
  // all-gather along dim 0 of s·b·in·4 bytes (plus lab01's gather_output all-gather when set); none
  // at tp = 1. Afterwards saved.input is the [s/tp, b, in] shard — never the gathered [s, b, in],
  // which would keep tp× the activation memory. x is const and never written.
  // BEGIN SOLUTION
  saved.input = x;
  const Tensor total = gather_from_sequence_parallel_region.forward(x, tp, name_ + ".ag");
  Tensor y = ops::matmul_forward(total, weight_);
  if (bias_.defined() && !opt_.skip_bias_add) ops::bias_add_forward(y, bias_);
  if (opt_.gather_output)
    y = gather_from_tensor_model_parallel_region.forward(y, tp, name_ + ".gather_output");
  return y;
  // END SOLUTION
}

Tensor ColumnParallelLinear::backward_sp(const Tensor& dy_in, const LinearSaved& saved, ProcessGroup& tp) {
  // TODO(lab03 ColumnParallelLinear SP backward): dy shaped like SP forward's output ([s, b, out/tp])
  // → dX [s/tp, b, in]: rows [r·s/tp, (r+1)·s/tp) of the whole Σ_r dY_r·A_r. After the call
  // dweight_ += dY_rᵀ·X with X the WHOLE [s, b, in] input, and dbias_ += Σ dY_r over s and b (ADDED;
  // undefined buffers skipped; a frozen weight still returns dX). Communication on tp, per call:
  // exactly one all-gather along dim 0 (s·b·in·4 bytes: saved.input, the shard, gathered again; none
  // for a frozen weight, whose gradient is not computed) and one reduce-scatter (sum) along dim 0
  // (s·b·in·4 bytes); no all-reduce; none at tp = 1.
  // BEGIN SOLUTION
  const Tensor dy = opt_.gather_output ? gather_from_tensor_model_parallel_region.backward(
                                             dy_in, tp, name_ + ".gather_output")
                                       : dy_in;
  // The whole input for the weight gradient, gathered again (forward kept only the shard); a frozen
  // weight has no gradient, so nothing is gathered (Megatron's wgrad_compute).
  if (dweight_.defined()) {
    const Tensor total = _gather_along_first_dim(saved.input, tp, name_ + ".ag_wgrad");
    ops::matmul_wgrad(dy, total, dweight_);
  }
  if (bias_.defined() && dbias_.defined()) ops::add_(dbias_, ops::bias_add_backward(dy));
  const Tensor dx = ops::matmul_dgrad(dy, weight_);
  return gather_from_sequence_parallel_region.backward(dx, tp, name_ + ".ag");
  // END SOLUTION
}

Tensor RowParallelLinear::forward_sp(const Tensor& x, LinearSaved& saved, ProcessGroup& tp) const {
  // TODO(lab03 RowParallelLinear SP forward): x [s, b, in/tp] (input_is_parallel, which the
  // constructor enforces under SP) → Y = X·Bᵀ + b, this rank's rows [s/tp, b, out]
  // ([r·s/tp, (r+1)·s/tp) of the whole product), the full bias added exactly once per row (none when
  // undefined or skip_bias_add). Communication on tp: exactly one reduce-scatter (sum) along dim 0
  // of s·b·out·4 bytes — not an all-reduce; none at tp = 1. A last dim that does not match the
  // weight is a ShapeError naming both shapes, before any communication; afterwards saved.input is x.
  // BEGIN SOLUTION
  TPSP_CHECK(x.size(-1) == weight_.size(1), name_, ": input last dim ", x.size(-1), " != local in_features ",
             weight_.size(1), " (input ", shape_str(x.shape()), ", weight ", shape_str(weight_.shape()), ")");
  saved.input = x;
  const Tensor partial = ops::matmul_forward(x, weight_);
  Tensor y = reduce_scatter_to_sequence_parallel_region.forward(partial, tp, name_ + ".rs");
  if (bias_.defined() && !opt_.skip_bias_add) ops::bias_add_forward(y, bias_);
  return y;
  // END SOLUTION
}

Tensor RowParallelLinear::backward_sp(const Tensor& dy, const LinearSaved& saved, ProcessGroup& tp) {
  // TODO(lab03 RowParallelLinear SP backward): dy [s/tp, b, out], this rank's rows → dX [s, b, in/tp]
  // = dY·B_r over the WHOLE sequence. After the call dweight_ += dYᵀ·X_r with the whole dY, and
  // dbias_ += Σ dY over THIS rank's s/tp rows only (a partial sum: allreduce_sequence_parallel_grads
  // sums it over TP later); both ADDED, undefined buffers skipped. Communication on tp: exactly one
  // all-gather along dim 0 of s·b·out·4 bytes; none at tp = 1.
  // BEGIN SOLUTION
  if (bias_.defined() && dbias_.defined()) ops::add_(dbias_, ops::bias_add_backward(dy));
  const Tensor dy_total = reduce_scatter_to_sequence_parallel_region.backward(dy, tp, name_ + ".rs");
  if (dweight_.defined()) ops::matmul_wgrad(dy_total, saved.input, dweight_);
  return ops::matmul_dgrad(dy_total, weight_);
  // END SOLUTION
}

Tensor VocabParallelEmbedding::forward_sp(const TokenBatch& ids, ProcessGroup& tp) const {
  // TODO(lab03 VocabParallelEmbedding SP forward): ids [b, s] (global ids in [0, V)); weight_ [V_pad/tp, h]
  // is rank r's rows of the table, from vocab_start(tp) (lab02's lookup). Return this rank's rows
  // [r·s/tp, (r+1)·s/tp) of the single-process lookup, [s/tp, b, h]. Communication on tp: exactly one
  // reduce-scatter (sum) along dim 0 of the [s, b, h] partial lookups — not an all-reduce followed by a
  // split (twice the bytes); none at tp = 1. Never gather the table.
  // BEGIN SOLUTION
  const Tensor partial = ops::embedding_forward(ids, weight_, vocab_start(tp));
  return reduce_scatter_to_sequence_parallel_region.forward(partial, tp, name_ + ".rs");
  // END SOLUTION
}

void VocabParallelEmbedding::backward_sp(const Tensor& dout, const TokenBatch& ids, ProcessGroup& tp) {
  // TODO(lab03 VocabParallelEmbedding SP backward): dout [s/tp, b, h], this rank's rows of the output
  // gradient; ids [b, s]: add (+=) to dweight_ [V_pad/tp, h] this rank's rows of the single-process table
  // gradient, which needs every token's gradient. Communication on tp: exactly one all-gather along dim 0
  // of [s, b, h]; none at tp = 1.
  // BEGIN SOLUTION
  const Tensor d = reduce_scatter_to_sequence_parallel_region.backward(dout, tp, name_ + ".rs");
  ops::add_(dweight_, ops::embedding_backward(d, ids, weight_.size(0), vocab_start(tp)));
  // END SOLUTION
}

}  // namespace tpsp::tensor_parallel
