// Layer 2 of mappings.h, tensor-parallel half: f, g and the last-dim scatter/gather.
// lab01 replaces this translation unit.
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::tensor_parallel {

Tensor CopyToModelParallelRegion::forward(const Tensor& x, ProcessGroup&, const std::string&) const {
  return x;
}
Tensor CopyToModelParallelRegion::backward(const Tensor& dy, ProcessGroup& tp,
                                           const std::string& label) const {
  return _reduce(dy, tp, label);
}

Tensor ReduceFromModelParallelRegion::forward(const Tensor& x, ProcessGroup& tp,
                                              const std::string& label) const {
  return _reduce(x, tp, label);
}
Tensor ReduceFromModelParallelRegion::backward(const Tensor& dy, ProcessGroup&, const std::string&) const {
  return dy;
}

Tensor ScatterToModelParallelRegion::forward(const Tensor& x, ProcessGroup& tp, const std::string&) const {
  return _split_along_last_dim(x, tp);
}
Tensor ScatterToModelParallelRegion::backward(const Tensor& dy, ProcessGroup& tp,
                                              const std::string& label) const {
  return _gather_along_last_dim(dy, tp, label);
}

Tensor GatherFromModelParallelRegion::forward(const Tensor& x, ProcessGroup& tp,
                                              const std::string& label) const {
  return _gather_along_last_dim(x, tp, label);
}
Tensor GatherFromModelParallelRegion::backward(const Tensor& dy, ProcessGroup& tp, const std::string&) const {
  return _split_along_last_dim(dy, tp);
}

}  // namespace tpsp::tensor_parallel
