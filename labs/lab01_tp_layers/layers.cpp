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
  TPSP_LAB_TODO("lab01 ColumnParallelLinear forward: enter the TP region (f, or under SP the all-gather of the sequence shards), compute Y_r = X·A_rᵀ (+ b_r) with this rank's rows of the weight, and all-gather the last dim only when gather_output is set. Save what backward needs in `saved`");
}

Tensor ColumnParallelLinear::backward(const Tensor& dy_in, const LinearSaved& saved, ProcessGroup& tp) {
  if (opt_.tp_comm_overlap) return backward_overlap(dy_in, saved, tp);  // lab04
  // TODO(lab01 ColumnParallelLinear backward): the mirror of forward: dA_r = dY_rᵀ·X and db_r = Σ dY_r
  // are local (accumulate into dweight_/dbias_: ops::matmul_wgrad adds into the buffer); dX_r = dY_r·A_r
  // (ops::matmul_dgrad) is a partial sum, so it leaves through f's backward (all-reduce) or, under SP, a
  // reduce-scatter. A frozen weight still needs dX.
  TPSP_LAB_TODO("lab01 ColumnParallelLinear backward: the mirror of forward: dA_r = dY_rᵀ·X and db_r = Σ dY_r are local (accumulate into dweight_/dbias_: ops::matmul_wgrad adds into the buffer); dX_r = dY_r·A_r (ops::matmul_dgrad) is a partial sum, so it leaves through f's backward (all-reduce) or, under SP, a reduce-scatter. A frozen weight still needs dX");
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
  TPSP_LAB_TODO("lab01 RowParallelLinear forward: the input is split on its last dim (input_is_parallel), or replicated and then this rank keeps its chunk (scatter_to_tensor_model_parallel_region, whose backward all-gathers dX). Compute the partial X_r·B_rᵀ and sum it over TP with g (all-reduce) or, under SP, a reduce-scatter; add the full bias after the reduction. Save what backward needs");
}

Tensor RowParallelLinear::backward(const Tensor& dy, const LinearSaved& saved, ProcessGroup& tp) {
  if (opt_.tp_comm_overlap) return backward_overlap(dy, saved, tp);  // lab04
  // TODO(lab01 RowParallelLinear backward): db = Σ dY (before any communication); dY enters the
  // TP region through g's backward (identity) or, under SP, an all-gather; then dX_r = dY·B_r
  // (ops::matmul_dgrad) and dB_r = dYᵀ·X_r (ops::matmul_wgrad, accumulated) are local.
  TPSP_LAB_TODO("lab01 RowParallelLinear backward: db = Σ dY (before any communication); dY enters the TP region through g's backward (identity) or, under SP, an all-gather; then dX_r = dY·B_r (ops::matmul_dgrad) and dB_r = dYᵀ·X_r (ops::matmul_wgrad, accumulated) are local");
}

}  // namespace tpsp::tensor_parallel
