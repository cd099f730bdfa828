// VocabParallelEmbedding (see layers.h). lab02 replaces this translation unit.
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
  // TODO(lab02 VocabParallelEmbedding forward): look up the ids of this rank's vocabulary slice (other
  // ids give zero rows: ops::embedding_forward with vocab_start) and sum the partial lookups over TP
  // with g, or reduce-scatter them to [s/tp, b, h] under SP.
  TPSP_LAB_TODO("lab02 VocabParallelEmbedding forward: look up the ids of this rank's vocabulary slice (other ids give zero rows: ops::embedding_forward with vocab_start) and sum the partial lookups over TP with g, or reduce-scatter them to [s/tp, b, h] under SP");
}

void VocabParallelEmbedding::backward(const Tensor& dout, const TokenBatch& ids, ProcessGroup& tp) {
  // TODO(lab02 VocabParallelEmbedding backward): bring the gradient back to [s, b, h] on every rank
  // (g's backward is the identity; under SP all-gather the shards), then scatter-add it into the rows
  // of this rank's slice (ops::embedding_backward).
  TPSP_LAB_TODO("lab02 VocabParallelEmbedding backward: bring the gradient back to [s, b, h] on every rank (g's backward is the identity; under SP all-gather the shards), then scatter-add it into the rows of this rank's slice (ops::embedding_backward)");
}

}  // namespace tpsp::tensor_parallel
