// Vocab-parallel cross entropy (see cross_entropy.h). lab02 replaces this translation unit.
#include "engine/tensor_parallel/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/error.h"
#include "engine/lab_todo.h"
#include "engine/ops/cpu/fast_math.h"

namespace tpsp::tensor_parallel {

VocabParallelCEOut vocab_parallel_cross_entropy_forward(const Tensor& logits,
                                                        const std::vector<int64_t>& targets, int64_t vocab,
                                                        float label_smoothing, comm::ProcessGroup& tp,
                                                        VocabParallelCESaved& saved,
                                                        const std::string& label) {
  // TODO(lab02 vocab_parallel_cross_entropy forward): never gather the [n, V] logits. All-reduce
  // (max) the row maxima, all-reduce (sum) the target logit (only the owning rank contributes) and
  // Σ exp over the global vocabulary; padded columns (global id >= V) do not count. Label smoothing
  // uses the GLOBAL vocabulary. ignore_index rows: loss 0, excluded from the mean. Fill `saved`.
  // Refuse (ShapeError, before any collective) a target outside [0, V) other than -100, and logits
  // whose last dim is not this rank's share ceil(V/tp) of the padded vocabulary.
  TPSP_LAB_TODO("lab02 vocab_parallel_cross_entropy forward: never gather the [n, V] logits. All-reduce (max) the row maxima, all-reduce (sum) the target logit (only the owning rank contributes) and Σ exp over the global vocabulary; padded columns (global id >= V) do not count. Label smoothing uses the GLOBAL vocabulary. ignore_index rows: loss 0, excluded from the mean. Fill `saved`. Refuse (ShapeError, before any collective) a target outside [0, V) other than -100, and logits whose last dim is not this rank's share ceil(V/tp) of the padded vocabulary");
}

Tensor vocab_parallel_cross_entropy_backward(const VocabParallelCESaved& saved, float dloss,
                                             comm::ProcessGroup& tp) {
  // TODO(lab02 vocab_parallel_cross_entropy backward): local only: (softmax − ((1−α)·onehot + α/V))
  // · dloss / n_valid on this rank's real columns; ignored rows and padded columns get 0.
  TPSP_LAB_TODO("lab02 vocab_parallel_cross_entropy backward: local only: (softmax − ((1−α)·onehot + α/V)) · dloss / n_valid on this rank's real columns; ignored rows and padded columns get 0");
}

}  // namespace tpsp::tensor_parallel
