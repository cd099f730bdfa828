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
  TPSP_LAB_TODO("lab04 ColumnParallelLinear forward overlap: save the input as it came (the [s/tp, b, in] shard under SP: never the gathered whole, which would cost tp× the memory — and never a buffer that someone else reuses). Under SP compute X·A_rᵀ with all_gather_matmul (no all_gather call; label name + \".ag\"); without SP f is the identity and there is nothing to overlap. Then the bias and gather_output as in lab01's ColumnParallelLinear (labs/lab01_tp_layers/README.md)");
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
  TPSP_LAB_TODO("lab04 ColumnParallelLinear backward overlap: Megatron's LinearWithGradAccumulationAndAsyncCommunication. Under SP: issue all_gather_async of the saved shard (label name + \".ag_wgrad\"), compute dX_r = dY_r·A_r (ops::matmul_dgrad) while it flies, wait; issue the reduction of dX_r — reduce_scatter_async under SP (name + \".ag\"), all_reduce_async without (name + \".f\") — BEFORE the weight-gradient GEMM (ops::matmul_wgrad, accumulated) and wait for it AFTER that GEMM (and the bias gradient). Never touch dX_r between the issue and the wait. tp == 1 or a frozen weight: nothing to hide");
}

Tensor RowParallelLinear::forward_overlap(const Tensor& x_in, LinearSaved& saved, ProcessGroup& tp) const {
  // TODO(lab04 RowParallelLinear forward overlap): as lab01's RowParallelLinear, but under SP the partial
  // product and its reduce-scatter are one matmul_reduce_scatter ring (label name + ".rs"); without SP g's
  // all-reduce needs the whole product and stays blocking. Bias after the reduction.
  TPSP_LAB_TODO("lab04 RowParallelLinear forward overlap: as lab01's RowParallelLinear, but under SP the partial product and its reduce-scatter are one matmul_reduce_scatter ring (label name + \".rs\"); without SP g's all-reduce needs the whole product and stays blocking. Bias after the reduction");
}

Tensor RowParallelLinear::backward_overlap(const Tensor& dy, const LinearSaved& saved, ProcessGroup& tp) {
  // TODO(lab04 RowParallelLinear backward overlap): db = Σ dY first. Under SP, dX_r = all_gather(dY)·B_r
  // is an all_gather_matmul ring (label name + ".rs", keep_gathered: the weight gradient
  // dB_r = dYᵀ·X_r needs the whole dY); without SP there is no communication to hide.
  TPSP_LAB_TODO("lab04 RowParallelLinear backward overlap: db = Σ dY first. Under SP, dX_r = all_gather(dY)·B_r is an all_gather_matmul ring (label name + \".rs\", keep_gathered: the weight gradient dB_r = dYᵀ·X_r needs the whole dY); without SP there is no communication to hide");
}

}  // namespace tpsp::tensor_parallel
