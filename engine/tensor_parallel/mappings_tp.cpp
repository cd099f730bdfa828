// Layer 2 of mappings.h, tensor-parallel half: f, g and the last-dim scatter/gather.
// lab01 replaces this translation unit. Each body is one helper call from mappings_helpers.cpp.
#include "engine/lab_todo.h"
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::tensor_parallel {

Tensor CopyToModelParallelRegion::forward([[maybe_unused]] const Tensor& x, [[maybe_unused]] ProcessGroup& tp,
                                          [[maybe_unused]] const std::string& label) const {
  // TODO(lab01 f forward): f enters the TP region: every rank already holds the whole input, so
  // forward communicates nothing.
  // BEGIN SOLUTION
  return x;
  // END SOLUTION
}
Tensor CopyToModelParallelRegion::backward([[maybe_unused]] const Tensor& dy,
                                           [[maybe_unused]] ProcessGroup& tp,
                                           [[maybe_unused]] const std::string& label) const {
  // TODO(lab01 f backward): each rank's gradient w.r.t. the replicated input is only its own
  // partial; the true gradient is their sum over the TP group (one all-reduce, see _reduce).
  // BEGIN SOLUTION
  return _reduce(dy, tp, label);
  // END SOLUTION
}

Tensor ReduceFromModelParallelRegion::forward([[maybe_unused]] const Tensor& x,
                                              [[maybe_unused]] ProcessGroup& tp,
                                              [[maybe_unused]] const std::string& label) const {
  // TODO(lab01 g forward): g leaves the TP region: each rank holds a partial sum (X_i·B_iᵀ); the
  // output is their sum over the TP group (one all-reduce, see _reduce).
  // BEGIN SOLUTION
  return _reduce(x, tp, label);
  // END SOLUTION
}
Tensor ReduceFromModelParallelRegion::backward([[maybe_unused]] const Tensor& dy,
                                               [[maybe_unused]] ProcessGroup& tp,
                                               [[maybe_unused]] const std::string& label) const {
  // TODO(lab01 g backward): the output was replicated, so every rank already holds the whole
  // gradient: backward communicates nothing.
  // BEGIN SOLUTION
  return dy;
  // END SOLUTION
}

Tensor ScatterToModelParallelRegion::forward([[maybe_unused]] const Tensor& x,
                                             [[maybe_unused]] ProcessGroup& tp,
                                             [[maybe_unused]] const std::string& label) const {
  // TODO(lab01 scatter forward): keep this rank's chunk of the last dim (see _split_along_last_dim).
  // BEGIN SOLUTION
  return _split_along_last_dim(x, tp);
  // END SOLUTION
}
Tensor ScatterToModelParallelRegion::backward([[maybe_unused]] const Tensor& dy,
                                              [[maybe_unused]] ProcessGroup& tp,
                                              [[maybe_unused]] const std::string& label) const {
  // TODO(lab01 scatter backward): all-gather the chunks along the last dim, in rank order.
  // BEGIN SOLUTION
  return _gather_along_last_dim(dy, tp, label);
  // END SOLUTION
}

Tensor GatherFromModelParallelRegion::forward([[maybe_unused]] const Tensor& x,
                                              [[maybe_unused]] ProcessGroup& tp,
                                              [[maybe_unused]] const std::string& label) const {
  // TODO(lab01 gather forward): all-gather the chunks along the last dim, in rank order.
  // BEGIN SOLUTION
  return _gather_along_last_dim(x, tp, label);
  // END SOLUTION
}
Tensor GatherFromModelParallelRegion::backward([[maybe_unused]] const Tensor& dy,
                                               [[maybe_unused]] ProcessGroup& tp,
                                               [[maybe_unused]] const std::string& label) const {
  // TODO(lab01 gather backward): keep this rank's chunk of the last dim; no communication.
  // BEGIN SOLUTION
  return _split_along_last_dim(dy, tp);
  // END SOLUTION
}

}  // namespace tpsp::tensor_parallel
