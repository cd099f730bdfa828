// VocabParallelEmbedding (see layers.h) without sequence parallelism; its SP path is layers_sp.cpp's
// (lab03). lab02 replaces this translation unit.
#include "engine/lab_todo.h"
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
  if (sequence_parallel_) return forward_sp(ids, tp);  // lab03
  // TODO(lab02 VocabParallelEmbedding forward): ids [b, s] (global ids in [0, V)); weight_ [V_pad/tp, h] is
  // rank r's rows of the table, from vocab_start(tp). Return the single-process lookup [s, b, h], the same
  // on every rank. Communication on tp: one all-reduce (sum) of [s, b, h]. Never gather the table.
  // BEGIN SOLUTION
  const Tensor partial = ops::embedding_forward(ids, weight_, vocab_start(tp));
  return reduce_from_tensor_model_parallel_region.forward(partial, tp, name_ + ".g");
  // END SOLUTION
}

void VocabParallelEmbedding::backward(const Tensor& dout, const TokenBatch& ids, ProcessGroup& tp) {
  if (sequence_parallel_) return backward_sp(dout, ids, tp);  // lab03
  // TODO(lab02 VocabParallelEmbedding backward): dout [s, b, h], ids [b, s]: add (+=) to dweight_
  // [V_pad/tp, h] this rank's rows of the single-process table gradient. Communication on tp: none.
  // BEGIN SOLUTION
  const Tensor d = reduce_from_tensor_model_parallel_region.backward(dout, tp, name_ + ".g");
  ops::add_(dweight_, ops::embedding_backward(d, ids, weight_.size(0), vocab_start(tp)));
  // END SOLUTION
}

}  // namespace tpsp::tensor_parallel
