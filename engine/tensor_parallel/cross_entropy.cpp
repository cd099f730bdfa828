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
  // BEGIN SOLUTION
  TPSP_CHECK(logits.dim() == 2, "vocab-parallel CE: logits must be [n, V_local], got ",
             shape_str(logits.shape()));
  const int64_t n = logits.size(0), vl = logits.size(1), start = tp.rank() * vl;
  TPSP_CHECK(static_cast<int64_t>(targets.size()) == n, "vocab-parallel CE: ", targets.size(),
             " targets for ", n, " logit rows");
  const int64_t share = (vocab + tp.size() - 1) / tp.size();  // columns per rank of the padded vocabulary
  TPSP_CHECK(vl == share, "vocab-parallel CE: logits have ", vl, " columns, but each of the tp=", tp.size(),
             " ranks holds ceil(V/tp)=", share, " columns of the padded vocabulary V=", vocab,
             " (already-gathered logits? pass this rank's slice)");
  int64_t n_valid = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = targets[static_cast<std::size_t>(i)];
    if (t == -100) continue;
    TPSP_CHECK(t >= 0 && t < vocab, "target ", t, " at row ", i, " is outside [0, ", vocab,
               ") and is not ignore_index -100");
    ++n_valid;
  }
  const int64_t real = std::max<int64_t>(0, std::min(vl, vocab - start));  // real (unpadded) columns here
  const float* z = logits.data();

  // 1. max over the global vocabulary.
  Tensor row_max = Tensor::full({n}, -std::numeric_limits<float>::infinity());
  float* mx = row_max.data();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < real; ++j) mx[i] = std::max(mx[i], z[i * vl + j]);
  if (tp.size() > 1) tp.all_reduce(row_max, comm::ReduceOp::max, {label + ".max"});

  // 2. the target's logit (only the owning rank contributes).
  Tensor predicted({n});
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = targets[static_cast<std::size_t>(i)];
    if (t >= start && t < start + real) predicted.data()[i] = z[i * vl + (t - start)] - mx[i];
  }
  if (tp.size() > 1) tp.all_reduce(predicted, comm::ReduceOp::sum, {label + ".predicted_logit"});

  // 3. Σ exp (and Σ shifted logits for label smoothing) over the global vocabulary. The exponentials
  // are kept (the softmax numerators) in saved.softmax, computed by the engine's vectorised exp.
  const bool smooth = label_smoothing > 0.f;
  Tensor sums({n, smooth ? 2 : 1});
  saved.softmax = Tensor({n, vl});  // zeros: padded columns stay 0
  for (int64_t i = 0; i < n; ++i) {
    const float* zi = z + i * vl;
    float* ei = saved.softmax.data() + i * vl;
    double se = 0.0, sz = 0.0;
    if (smooth)
      for (int64_t j = 0; j < real; ++j) sz += zi[j] - mx[i];
    std::copy(zi, zi + real, ei);
    ops::cpu::exp_shifted(ei, real, mx[i]);  // ei[j] = e^(z[j] − max)
    for (int64_t j = 0; j < real; ++j) se += ei[j];
    sums.data()[i * sums.size(1)] = static_cast<float>(se);
    if (smooth) sums.data()[i * 2 + 1] = static_cast<float>(sz);
  }
  if (tp.size() > 1) tp.all_reduce(sums, comm::ReduceOp::sum, {label + ".sum_exp"});

  VocabParallelCEOut out{Tensor({n}), 0.f, n_valid};
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const float sum_exp = sums.data()[i * sums.size(1)];
    const float log_z = std::log(sum_exp);
    float* pi = saved.softmax.data() + i * vl;
    for (int64_t j = 0; j < real; ++j) pi[j] /= sum_exp;
    const int64_t t = targets[static_cast<std::size_t>(i)];
    if (t == -100) continue;
    float loss = log_z - predicted.data()[i];
    if (smooth) {
      const float mean_nll = log_z - sums.data()[i * 2 + 1] / static_cast<float>(vocab);
      loss = (1.f - label_smoothing) * loss + label_smoothing * mean_nll;
    }
    if (!std::isfinite(loss))
      throw NumericError(detail::cat("vocab-parallel CE: loss of row ", i, " is ", loss, " (target ", t,
                                     "): NaN or inf reached the loss"));
    out.losses.data()[i] = loss;
    total += loss;
  }
  out.loss = n_valid > 0 ? static_cast<float>(total / static_cast<double>(n_valid)) : 0.f;
  saved.targets = targets;
  saved.vocab = vocab;
  saved.label_smoothing = label_smoothing;
  saved.n_valid = n_valid;
  return out;
  // END SOLUTION
}

Tensor vocab_parallel_cross_entropy_backward(const VocabParallelCESaved& saved, float dloss,
                                             comm::ProcessGroup& tp) {
  // TODO(lab02 vocab_parallel_cross_entropy backward): -> dlogits [n, V_pad/tp]: this rank's columns of the
  // single-process gradient of dloss · the mean loss; 0 on ignored rows and padded columns, all zeros (not
  // NaN) when no row counts. Communication: none.
  // BEGIN SOLUTION
  const int64_t n = saved.softmax.size(0), vl = saved.softmax.size(1), start = tp.rank() * vl;
  const int64_t real = std::max<int64_t>(0, std::min(vl, saved.vocab - start));
  Tensor grad({n, vl});
  if (saved.n_valid == 0) return grad;
  const float scale = dloss / static_cast<float>(saved.n_valid);
  const float a = saved.label_smoothing, uniform = a / static_cast<float>(saved.vocab);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = saved.targets[static_cast<std::size_t>(i)];
    if (t == -100) continue;
    const float* p = saved.softmax.data() + i * vl;
    float* g = grad.data() + i * vl;
    for (int64_t j = 0; j < real; ++j) g[j] = (p[j] - uniform) * scale;
    if (t >= start && t < start + real) g[t - start] = (p[t - start] - (uniform + (1.f - a))) * scale;
  }
  return grad;
  // END SOLUTION
}

}  // namespace tpsp::tensor_parallel
