// VocabParallelEmbedding (see layers.h). lab02 replaces this translation unit.
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "engine/tensor_parallel/layers.h"
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::tensor_parallel {

VocabParallelEmbedding::VocabParallelEmbedding(Tensor weight, Tensor dweight, bool sequence_parallel,
                                               std::string name)
    : weight_(std::move(weight)),
      dweight_(std::move(dweight)),
      sequence_parallel_(sequence_parallel),
      name_(std::move(name)) {}

Tensor VocabParallelEmbedding::forward(const TokenBatch& ids, ProcessGroup& tp) const {
  const Tensor partial = ops::embedding_forward(ids, weight_, vocab_start(tp));
  return sequence_parallel_ ? reduce_scatter_to_sequence_parallel_region.forward(partial, tp, name_ + ".rs")
                            : reduce_from_tensor_model_parallel_region.forward(partial, tp, name_ + ".g");
}

void VocabParallelEmbedding::backward(const Tensor& dout, const TokenBatch& ids, ProcessGroup& tp) const {
  const Tensor d = sequence_parallel_
                       ? reduce_scatter_to_sequence_parallel_region.backward(dout, tp, name_ + ".rs")
                       : reduce_from_tensor_model_parallel_region.backward(dout, tp, name_ + ".g");
  ops::add_(dweight_, ops::embedding_backward(d, ids, weight_.size(0), vocab_start(tp)));
}

}  // namespace tpsp::tensor_parallel
