// ColumnParallelLinear and RowParallelLinear (see layers.h).
// lab01 replaces this translation unit.
#include "engine/tensor_parallel/layers.h"

#include "engine/error.h"
#include "engine/lab_todo.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/matmul.h"
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::tensor_parallel {

ColumnParallelLinear::ColumnParallelLinear(Tensor weight, Tensor bias, Tensor dweight, Tensor dbias,
                                           LinearOptions opt, std::string name)
    : weight_(std::move(weight)),
      bias_(std::move(bias)),
      dweight_(std::move(dweight)),
      dbias_(std::move(dbias)),
      opt_(opt),
      name_(std::move(name)) {}

Tensor ColumnParallelLinear::forward(const Tensor& x, LinearSaved& saved, ProcessGroup& tp) const {
  TPSP_CHECK(x.size(-1) == weight_.size(1), name_, ": input last dim ", x.size(-1), " != weight in_features ",
             weight_.size(1), " (input ", shape_str(x.shape()), ", weight ", shape_str(weight_.shape()), ")");
  if (opt_.tp_comm_overlap) return forward_overlap(x, saved, tp);  // lab04
  // TODO(lab01 ColumnParallelLinear forward): enter the TP region (f, or under SP the all-gather
  // of the sequence shards), compute Y_r = X·A_rᵀ (+ b_r) with this rank's rows of the weight, and
  // all-gather the last dim only when gather_output is set. Save what backward needs in `saved`.
  // BEGIN SOLUTION
  saved.input = x;
  const Tensor total = opt_.sequence_parallel
                           ? gather_from_sequence_parallel_region.forward(x, tp, name_ + ".ag")
                           : copy_to_tensor_model_parallel_region.forward(x, tp, name_ + ".f");
  Tensor y = ops::matmul_forward(total, weight_);
  if (bias_.defined() && !opt_.skip_bias_add) ops::bias_add_forward(y, bias_);
  if (opt_.gather_output)
    y = gather_from_tensor_model_parallel_region.forward(y, tp, name_ + ".gather_output");
  return y;
  // END SOLUTION
}

Tensor ColumnParallelLinear::backward(const Tensor& dy_in, const LinearSaved& saved, ProcessGroup& tp) {
  if (opt_.tp_comm_overlap) return backward_overlap(dy_in, saved, tp);  // lab04
  // TODO(lab01 ColumnParallelLinear backward): the mirror of forward: dA_r = dY_rᵀ·X and db_r = Σ dY_r
  // are local (accumulate into dweight_/dbias_: ops::matmul_wgrad adds into the buffer); dX_r = dY_r·A_r
  // (ops::matmul_dgrad) is a partial sum, so it leaves through f's backward (all-reduce) or, under SP, a
  // reduce-scatter. A frozen weight still needs dX.
  // BEGIN SOLUTION
  const Tensor dy = opt_.gather_output ? gather_from_tensor_model_parallel_region.backward(
                                             dy_in, tp, name_ + ".gather_output")
                                       : dy_in;
  // Under SP the full input is gathered again for the weight gradient (not kept from forward).
  const Tensor total =
      opt_.sequence_parallel ? _gather_along_first_dim(saved.input, tp, name_ + ".ag_wgrad") : saved.input;
  if (dweight_.defined()) ops::matmul_wgrad(dy, total, dweight_);
  if (bias_.defined() && dbias_.defined()) ops::add_(dbias_, ops::bias_add_backward(dy));
  const Tensor dx = ops::matmul_dgrad(dy, weight_);
  return opt_.sequence_parallel ? gather_from_sequence_parallel_region.backward(dx, tp, name_ + ".ag")
                                : copy_to_tensor_model_parallel_region.backward(dx, tp, name_ + ".f");
  // END SOLUTION
}

RowParallelLinear::RowParallelLinear(Tensor weight, Tensor bias, Tensor dweight, Tensor dbias,
                                     LinearOptions opt, std::string name)
    : weight_(std::move(weight)),
      bias_(std::move(bias)),
      dweight_(std::move(dweight)),
      dbias_(std::move(dbias)),
      opt_(opt),
      name_(std::move(name)) {
  TPSP_CHECK(!(opt_.sequence_parallel && !opt_.input_is_parallel), name_,
             ": sequence_parallel requires input_is_parallel (Megatron RowParallelLinear)");
}

Tensor RowParallelLinear::forward(const Tensor& x_in, LinearSaved& saved, ProcessGroup& tp) const {
  if (opt_.tp_comm_overlap) return forward_overlap(x_in, saved, tp);  // lab04
  // TODO(lab01 RowParallelLinear forward): the input is split on its last dim (input_is_parallel), or
  // replicated and then this rank keeps its chunk (scatter_to_tensor_model_parallel_region, whose
  // backward all-gathers dX). Compute the partial X_r·B_rᵀ and sum it over TP with g (all-reduce) or,
  // under SP, a reduce-scatter; add the full bias after the reduction. Save what backward needs.
  // BEGIN SOLUTION
  const Tensor x = opt_.input_is_parallel
                       ? x_in
                       : scatter_to_tensor_model_parallel_region.forward(x_in, tp, name_ + ".scatter");
  TPSP_CHECK(x.size(-1) == weight_.size(1), name_, ": input last dim ", x.size(-1), " != local in_features ",
             weight_.size(1), " (input ", shape_str(x.shape()), ", weight ", shape_str(weight_.shape()), ")");
  saved.input = x;
  const Tensor partial = ops::matmul_forward(x, weight_);
  Tensor y = opt_.sequence_parallel
                 ? reduce_scatter_to_sequence_parallel_region.forward(partial, tp, name_ + ".rs")
                 : reduce_from_tensor_model_parallel_region.forward(partial, tp, name_ + ".g");
  if (bias_.defined() && !opt_.skip_bias_add) ops::bias_add_forward(y, bias_);
  return y;
  // END SOLUTION
}

Tensor RowParallelLinear::backward(const Tensor& dy, const LinearSaved& saved, ProcessGroup& tp) {
  if (opt_.tp_comm_overlap) return backward_overlap(dy, saved, tp);  // lab04
  // TODO(lab01 RowParallelLinear backward): db = Σ dY (before any communication); dY enters the
  // TP region through g's backward (identity) or, under SP, an all-gather; then dX_r = dY·B_r
  // (ops::matmul_dgrad) and dB_r = dYᵀ·X_r (ops::matmul_wgrad, accumulated) are local.
  // BEGIN SOLUTION
  if (bias_.defined() && dbias_.defined()) ops::add_(dbias_, ops::bias_add_backward(dy));
  const Tensor dpartial = opt_.sequence_parallel
                              ? reduce_scatter_to_sequence_parallel_region.backward(dy, tp, name_ + ".rs")
                              : reduce_from_tensor_model_parallel_region.backward(dy, tp, name_ + ".g");
  if (dweight_.defined()) ops::matmul_wgrad(dpartial, saved.input, dweight_);
  const Tensor dx = ops::matmul_dgrad(dpartial, weight_);
  return opt_.input_is_parallel ? dx : scatter_to_tensor_model_parallel_region.backward(dx, tp, name_ + ".scatter");
  // END SOLUTION
}

}  // namespace tpsp::tensor_parallel
