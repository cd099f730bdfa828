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
  // TODO(lab02 vocab_parallel_cross_entropy forward): logits [n, V_pad/tp] (this rank's columns, from
  // rank·V_pad/tp; global ids >= V are padding), n targets in [0, V) or -100 (ignored) -> the mean loss
  // over the counted rows = the single-process cross entropy over the V real columns (label smoothing over
  // the global V), the same on every rank; fill `saved`. Communication on tp: three all-reduces of n floats
  // (max, sum, sum; the last [n, 2] with label smoothing), never the logits. ShapeError before any
  // collective for another target outside [0, V) or logits whose last dim is not ceil(V/tp); NumericError
  // naming the row when a loss is NaN or inf (cross_entropy.h).
  TPSP_LAB_TODO("lab02 vocab_parallel_cross_entropy forward");
}

Tensor vocab_parallel_cross_entropy_backward(const VocabParallelCESaved& saved, float dloss,
                                             comm::ProcessGroup& tp) {
  // TODO(lab02 vocab_parallel_cross_entropy backward): -> dlogits [n, V_pad/tp]: this rank's columns of the
  // single-process gradient of dloss · the mean loss; 0 on ignored rows and padded columns, all zeros (not
  // NaN) when no row counts. Communication: none.
  TPSP_LAB_TODO("lab02 vocab_parallel_cross_entropy backward");
}

}  // namespace tpsp::tensor_parallel
