// ColumnParallelLinear and RowParallelLinear with tp_comm_overlap (see layers.h): the same results
// as layers.cpp, with the layer's communication hidden behind its GEMMs.
//  - Backward, Megatron-LM layers.py LinearWithGradAccumulationAndAsyncCommunication: the input
//    gradient's reduction (all-reduce, or reduce-scatter under SP) does not depend on the weight
//    gradient GEMM, so it is issued before that GEMM and waited after it; under SP the all-gather of
//    the saved input shard flies while the dgrad GEMM runs.
//  - Forward (and the row layer's backward) under SP: all-gather + GEMM and GEMM + reduce-scatter as
//    rings of send/recv steps (ring_exchange.h).
// lab04 replaces this translation unit.
#include "engine/error.h"
#include "engine/lab_todo.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/matmul.h"
#include "engine/tensor_parallel/layers.h"
#include "engine/tensor_parallel/mappings.h"
#include "engine/tensor_parallel/ring_exchange.h"

namespace tpsp::tensor_parallel {

Tensor ColumnParallelLinear::forward_overlap(const Tensor& x, LinearSaved& saved, ProcessGroup& tp) const {
  // TODO(lab04 ColumnParallelLinear forward overlap): save the input as it came (the [s/tp, b, in]
  // shard under SP: never the gathered whole, which would cost tp× the memory — and never a buffer
  // that someone else reuses). Under SP compute X·A_rᵀ with all_gather_matmul (no all_gather
  // call; label name + ".ag"); without SP f is the identity and there is nothing to overlap. Then the
  // bias and gather_output as in lab01's ColumnParallelLinear (labs/lab01_tp_layers/README.md).
  // BEGIN SOLUTION
  saved.input = x;
  Tensor y;
  if (opt_.sequence_parallel) {
    y = all_gather_matmul(
            x, [&](const Tensor& rows) { return ops::matmul_forward(rows, weight_); }, tp, name_ + ".ag")
            .out;
  } else {
    y = ops::matmul_forward(copy_to_tensor_model_parallel_region.forward(x, tp, name_ + ".f"), weight_);
  }
  if (bias_.defined() && !opt_.skip_bias_add) ops::bias_add_forward(y, bias_);
  if (opt_.gather_output)
    y = gather_from_tensor_model_parallel_region.forward(y, tp, name_ + ".gather_output");
  return y;
  // END SOLUTION
}

Tensor ColumnParallelLinear::backward_overlap(const Tensor& dy_in, const LinearSaved& saved,
                                              ProcessGroup& tp) {
  // TODO(lab04 ColumnParallelLinear backward overlap): Megatron's
  // LinearWithGradAccumulationAndAsyncCommunication. Under SP: issue all_gather_async of the saved
  // shard (label name + ".ag_wgrad"), compute dX_r = dY_r·A_r (ops::matmul_dgrad) while it flies,
  // wait; issue the reduction of dX_r — reduce_scatter_async under SP (name + ".ag"),
  // all_reduce_async without (name + ".f") — BEFORE the weight-gradient GEMM
  // (ops::matmul_wgrad, accumulated) and wait for it AFTER that GEMM (and the bias gradient).
  // Never touch dX_r between the issue and the wait. tp == 1 or a frozen weight: nothing to hide.
  // BEGIN SOLUTION
  const Tensor dy = opt_.gather_output ? gather_from_tensor_model_parallel_region.backward(
                                             dy_in, tp, name_ + ".gather_output")
                                       : dy_in;
  if (bias_.defined() && dbias_.defined()) ops::add_(dbias_, ops::bias_add_backward(dy));
  const bool sp = opt_.sequence_parallel && tp.size() > 1;
  Tensor total;  // the whole input [s, b, in] for the weight gradient
  comm::WorkPtr gather;
  if (sp && dweight_.defined())
    gather = tp.all_gather_async(saved.input, total, 0, {name_ + ".ag_wgrad"});
  else
    total = saved.input;
  const Tensor dx = ops::matmul_dgrad(dy, weight_);  // while the all-gather flies
  if (gather) gather->wait();
  if (tp.size() == 1) {
    if (dweight_.defined()) ops::matmul_wgrad(dy, total, dweight_);
    return dx;
  }
  Tensor dx_out;  // [s/tp, b, in] under SP (allocated by the reduce-scatter), else dx reduced in place
  comm::WorkPtr reduce;
  if (sp) {
    reduce = tp.reduce_scatter_async(dx, dx_out, 0, comm::ReduceOp::sum, {name_ + ".ag"});
  } else {
    dx_out = dx;
    reduce = tp.all_reduce_async(dx_out, comm::ReduceOp::sum, {name_ + ".f"});
  }
  if (dweight_.defined()) ops::matmul_wgrad(dy, total, dweight_);  // while dX is reduced
  reduce->wait();
  return dx_out;
  // END SOLUTION
}

Tensor RowParallelLinear::forward_overlap(const Tensor& x_in, LinearSaved& saved, ProcessGroup& tp) const {
  // TODO(lab04 RowParallelLinear forward overlap): as lab01's RowParallelLinear, but under SP the partial
  // product and its reduce-scatter are one matmul_reduce_scatter ring (label name + ".rs"); without SP g's
  // all-reduce needs the whole product and stays blocking. Bias after the reduction.
  // BEGIN SOLUTION
  const Tensor x = opt_.input_is_parallel
                       ? x_in
                       : scatter_to_tensor_model_parallel_region.forward(x_in, tp, name_ + ".scatter");
  TPSP_CHECK(x.size(-1) == weight_.size(1), name_, ": input last dim ", x.size(-1), " != local in_features ",
             weight_.size(1), " (input ", shape_str(x.shape()), ", weight ", shape_str(weight_.shape()), ")");
  saved.input = x;
  auto gemm = [&](const Tensor& rows) { return ops::matmul_forward(rows, weight_); };
  Tensor y = opt_.sequence_parallel
                 ? matmul_reduce_scatter(x, gemm, tp, name_ + ".rs")
                 : reduce_from_tensor_model_parallel_region.forward(gemm(x), tp, name_ + ".g");
  if (bias_.defined() && !opt_.skip_bias_add) ops::bias_add_forward(y, bias_);
  return y;
  // END SOLUTION
}

Tensor RowParallelLinear::backward_overlap(const Tensor& dy, const LinearSaved& saved, ProcessGroup& tp) {
  // TODO(lab04 RowParallelLinear backward overlap): db = Σ dY first. Under SP, dX_r = all_gather(dY)·B_r
  // is an all_gather_matmul ring (label name + ".rs", keep_gathered: the weight gradient
  // dB_r = dYᵀ·X_r needs the whole dY); without SP there is no communication to hide.
  // BEGIN SOLUTION
  if (bias_.defined() && dbias_.defined()) ops::add_(dbias_, ops::bias_add_backward(dy));
  auto dgrad = [&](const Tensor& rows) { return ops::matmul_dgrad(rows, weight_); };
  Tensor dx, dy_total = dy;
  if (opt_.sequence_parallel) {
    AllGatherMatmulOut r = all_gather_matmul(dy, dgrad, tp, name_ + ".rs", true);
    dx = r.out;
    dy_total = r.gathered;
  } else {
    dx = dgrad(dy);
  }
  if (dweight_.defined()) ops::matmul_wgrad(dy_total, saved.input, dweight_);
  return opt_.input_is_parallel
             ? dx
             : scatter_to_tensor_model_parallel_region.backward(dx, tp, name_ + ".scatter");
  // END SOLUTION
}

}  // namespace tpsp::tensor_parallel
