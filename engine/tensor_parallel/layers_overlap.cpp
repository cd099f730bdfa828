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
  // TODO(lab04 ColumnParallelLinear forward overlap): The contract of lab01's ColumnParallelLinear forward
  // (outputs, saved input: the shard under SP). Under SP there is no all-gather collective: the gathered
  // GEMM runs as this lab's ring, labelled name + ".ag". Without SP the communication is lab01's.
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
  // TODO(lab04 ColumnParallelLinear backward overlap): The contract of lab01's ColumnParallelLinear
  // backward, with its collectives issued asynchronously: under SP the all-gather of X (label name +
  // ".ag_wgrad") in flight during the dX GEMM and the reduce-scatter of dX (name + ".ag") in flight during
  // the weight-gradient GEMM; without SP the all-reduce of dX (name + ".f") in flight during the
  // weight-gradient GEMM. Every call waited; dX untouched while in flight.
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
  // TODO(lab04 RowParallelLinear forward overlap): The contract of lab01's RowParallelLinear forward. Under
  // SP there is no reduce-scatter collective: the GEMM and its reduction run as this lab's ring, labelled
  // name + ".rs". Without SP the all-reduce stays as in lab01.
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
  // TODO(lab04 RowParallelLinear backward overlap): The contract of lab01's RowParallelLinear backward.
  // Under SP there is no all-gather collective of dY: the dX GEMM runs as this lab's ring, labelled name +
  // ".rs" (the weight gradient needs the gathered dY). Without SP: no communication.
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
