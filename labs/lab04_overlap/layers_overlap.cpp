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
  TPSP_LAB_TODO("lab04 ColumnParallelLinear forward overlap");
}

Tensor ColumnParallelLinear::backward_overlap(const Tensor& dy_in, const LinearSaved& saved,
                                              ProcessGroup& tp) {
  // TODO(lab04 ColumnParallelLinear backward overlap): The contract of lab01's ColumnParallelLinear
  // backward, with its collectives issued asynchronously: under SP the all-gather of X (label name +
  // ".ag_wgrad") in flight during the dX GEMM and the reduce-scatter of dX (name + ".ag") in flight during
  // the weight-gradient GEMM; without SP the all-reduce of dX (name + ".f") in flight during the
  // weight-gradient GEMM. Every call waited; dX untouched while in flight.
  TPSP_LAB_TODO("lab04 ColumnParallelLinear backward overlap");
}

Tensor RowParallelLinear::forward_overlap(const Tensor& x_in, LinearSaved& saved, ProcessGroup& tp) const {
  // TODO(lab04 RowParallelLinear forward overlap): The contract of lab01's RowParallelLinear forward. Under
  // SP there is no reduce-scatter collective: the GEMM and its reduction run as this lab's ring, labelled
  // name + ".rs". Without SP the all-reduce stays as in lab01.
  TPSP_LAB_TODO("lab04 RowParallelLinear forward overlap");
}

Tensor RowParallelLinear::backward_overlap(const Tensor& dy, const LinearSaved& saved, ProcessGroup& tp) {
  // TODO(lab04 RowParallelLinear backward overlap): The contract of lab01's RowParallelLinear backward.
  // Under SP there is no all-gather collective of dY: the dX GEMM runs as this lab's ring, labelled name +
  // ".rs" (the weight gradient needs the gathered dY). Without SP: no communication.
  TPSP_LAB_TODO("lab04 RowParallelLinear backward overlap");
}

}  // namespace tpsp::tensor_parallel
