// Layer 2 of mappings.h, tensor-parallel half: f, g and the last-dim scatter/gather.
// lab01 replaces this translation unit. Contracts: mappings.h; stuck on a TODO: ./check lab01 --hint.
#include "engine/lab_todo.h"
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::tensor_parallel {

Tensor CopyToModelParallelRegion::forward(const Tensor& x, ProcessGroup& tp, const std::string& label) const {
  // TODO(lab01 f forward): x [s, b, h], the same on every TP rank -> [s, b, h] equal to x. Communication:
  // none.
  TPSP_LAB_TODO("lab01 f forward");
}
Tensor CopyToModelParallelRegion::backward(const Tensor& dy, ProcessGroup& tp,
                                           const std::string& label) const {
  // TODO(lab01 f backward): dy [s, b, h]: this rank's share of the gradient of f's replicated input -> [s,
  // b, h] = the sum of dy over the TP ranks, the same on every rank. Communication: one all-reduce (sum) on
  // tp of the [s, b, h] tensor (4·s·b·h bytes), nothing else.
  TPSP_LAB_TODO("lab01 f backward");
}

Tensor ReduceFromModelParallelRegion::forward(const Tensor& x, ProcessGroup& tp,
                                              const std::string& label) const {
  // TODO(lab01 g forward): x [s, b, h]: this rank's partial sum -> [s, b, h] = the sum of x over the TP
  // ranks, the same on every rank. Communication: one all-reduce (sum) on tp of the [s, b, h] tensor
  // (4·s·b·h bytes), nothing else.
  TPSP_LAB_TODO("lab01 g forward");
}
Tensor ReduceFromModelParallelRegion::backward(const Tensor& dy, ProcessGroup& tp,
                                               const std::string& label) const {
  // TODO(lab01 g backward): dy [s, b, h], the same on every TP rank -> [s, b, h] equal to dy.
  // Communication: none.
  TPSP_LAB_TODO("lab01 g backward");
}

Tensor ScatterToModelParallelRegion::forward(const Tensor& x, ProcessGroup& tp,
                                             const std::string& label) const {
  // TODO(lab01 scatter forward): x [..., h], the same on every TP rank -> [..., h/tp]: rank r holds columns
  // [r·h/tp, (r+1)·h/tp) of the last dim. Communication: none.
  TPSP_LAB_TODO("lab01 scatter forward");
}
Tensor ScatterToModelParallelRegion::backward(const Tensor& dy, ProcessGroup& tp,
                                              const std::string& label) const {
  // TODO(lab01 scatter backward): dy [..., h/tp], rank r's columns of the last dim -> [..., h], the same on
  // every rank, rank j's piece at columns [j·h/tp, (j+1)·h/tp). Communication: one all-gather on tp along
  // the last dim (the whole [..., h]: 4 bytes per element).
  TPSP_LAB_TODO("lab01 scatter backward");
}

Tensor GatherFromModelParallelRegion::forward(const Tensor& x, ProcessGroup& tp,
                                              const std::string& label) const {
  // TODO(lab01 gather forward): x [..., h/tp], rank r's columns of the last dim -> [..., h], the same on
  // every rank, rank j's piece at columns [j·h/tp, (j+1)·h/tp). Communication: one all-gather on tp along
  // the last dim (the whole [..., h]: 4 bytes per element).
  TPSP_LAB_TODO("lab01 gather forward");
}
Tensor GatherFromModelParallelRegion::backward(const Tensor& dy, ProcessGroup& tp,
                                               const std::string& label) const {
  // TODO(lab01 gather backward): dy [..., h], the same on every TP rank -> [..., h/tp]: rank r holds
  // columns [r·h/tp, (r+1)·h/tp) of the last dim. Communication: none.
  TPSP_LAB_TODO("lab01 gather backward");
}

}  // namespace tpsp::tensor_parallel
