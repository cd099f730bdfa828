// Layer 2 of mappings.h, sequence-parallel half: the dim-0 pairs (the all-to-alls, which no lab asks
// for, are mappings_all_to_all.cpp's).
// lab03 replaces this translation unit.
#include "engine/error.h"
#include "engine/lab_todo.h"
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::tensor_parallel {

Tensor ScatterToSequenceParallelRegion::forward(const Tensor& x, ProcessGroup& tp,
                                                const std::string& label) const {
  // TODO(lab03 scatter_to_sequence_parallel_region forward): x [s, b, h], the same on every TP rank ->
  // [s/tp, b, h], rows [r·s/tp, (r+1)·s/tp). Communication: none. s not divisible by tp: ShapeError.
  TPSP_LAB_TODO("lab03 scatter_to_sequence_parallel_region forward");
}
Tensor ScatterToSequenceParallelRegion::backward(const Tensor& dy, ProcessGroup& tp,
                                                 const std::string& label) const {
  // TODO(lab03 scatter_to_sequence_parallel_region backward): dy [s/tp, b, h], rank r's rows -> [s, b, h]:
  // the whole gradient of the replicated input on every rank, rank j's rows at [j·s/tp, (j+1)·s/tp).
  // Communication: one all-gather along dim 0 on tp of the whole [s, b, h] (4·s·b·h bytes).
  TPSP_LAB_TODO("lab03 scatter_to_sequence_parallel_region backward");
}

Tensor GatherFromSequenceParallelRegion::forward(const Tensor& x, ProcessGroup& tp,
                                                 const std::string& label) const {
  // TODO(lab03 gather_from_sequence_parallel_region forward): x [s/tp, b, h], rank r's rows [r·s/tp,
  // (r+1)·s/tp) of a sequence -> [s, b, h], the whole sequence in rank order, the same on every rank.
  // Communication: one all-gather along dim 0 on the tp group passed in, of the whole [s, b, h] (4·s·b·h
  // bytes).
  TPSP_LAB_TODO("lab03 gather_from_sequence_parallel_region forward");
}
Tensor GatherFromSequenceParallelRegion::backward(const Tensor& dy, ProcessGroup& tp,
                                                  const std::string& label) const {
  // TODO(lab03 gather_from_sequence_parallel_region backward): dy [s, b, h], this rank's partial of the
  // gradient of the whole sequence -> [s/tp, b, h] = rows [r·s/tp, (r+1)·s/tp) of the sum of dy over the TP
  // ranks. Communication: one reduce-scatter (sum) along dim 0 on tp of an [s, b, h] input. With
  // tensor_parallel_output_grad false, dy is already the same whole gradient on every rank: rows r of dy,
  // no communication.
  TPSP_LAB_TODO("lab03 gather_from_sequence_parallel_region backward");
}

Tensor ReduceScatterToSequenceParallelRegion::forward(const Tensor& x, ProcessGroup& tp,
                                                      const std::string& label) const {
  // TODO(lab03 reduce_scatter_to_sequence_parallel_region forward): x [s, b, h], this rank's partial sum ->
  // [s/tp, b, h] = rows [r·s/tp, (r+1)·s/tp) of the sum of x over the TP ranks. Communication: one
  // reduce-scatter (sum) along dim 0 on tp of an [s, b, h] input, nothing else. s not divisible by tp:
  // ShapeError before any communication.
  TPSP_LAB_TODO("lab03 reduce_scatter_to_sequence_parallel_region forward");
}
Tensor ReduceScatterToSequenceParallelRegion::backward(const Tensor& dy, ProcessGroup& tp,
                                                       const std::string& label) const {
  // TODO(lab03 reduce_scatter_to_sequence_parallel_region backward): dy [s/tp, b, h], rank r's rows -> [s,
  // b, h], the whole gradient in rank order, the same on every rank. Communication: one all-gather along
  // dim 0 on tp of the whole [s, b, h] (4·s·b·h bytes).
  TPSP_LAB_TODO("lab03 reduce_scatter_to_sequence_parallel_region backward");
}

}  // namespace tpsp::tensor_parallel
