// Dense cross entropy with torch.nn.CrossEntropyLoss semantics (ignore_index −100, mean over the
// non-ignored rows, label smoothing α with target distribution (1−α)·onehot + α/V).
//
// Per row, with lse = log Σ_j exp(x_j):  loss = lse − (1−α)·x_t − (α/V)·Σ_j x_j, which equals
// (1−α)·(−log p_t) + (α/V)·Σ_j (−log p_j). Row sums run in double; results are rounded once.
// A −inf logit is accepted as a masked class (probability 0, e.g. a padded vocabulary entry); it is
// an error only if it makes the loss infinite (it is the target, or α > 0). NaN and +inf logits are
// always a NumericError.
#include "engine/ops/cross_entropy.h"

#include <cmath>
#include <limits>

#include "engine/error.h"
#include "engine/ops/cpu/ops.h"

namespace tpsp::ops::cpu {
namespace {

/// Checks logits [n, V], n targets in [0, V) or kIgnoreIndex, α in [0, 1]; returns the n_valid rows.
int64_t check_ce_args(const Tensor& logits, const std::vector<int64_t>& targets, float label_smoothing,
                      const char* what) {
  TPSP_CHECK(logits.dim() == 2, what, ": logits must be [n, V], got ", shape_str(logits.shape()));
  const int64_t n = logits.size(0), V = logits.size(1);
  TPSP_CHECK(static_cast<int64_t>(targets.size()) == n, what, ": ", targets.size(), " targets for ", n,
             " rows of logits ", shape_str(logits.shape()));
  TPSP_CHECK(label_smoothing >= 0.f && label_smoothing <= 1.f, what, ": label_smoothing ", label_smoothing,
             " is outside [0, 1]");
  int64_t n_valid = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = targets[static_cast<std::size_t>(i)];
    if (t == kIgnoreIndex) continue;
    TPSP_CHECK(t >= 0 && t < V, what, ": target ", t, " at row ", i, " is outside [0, ", V,
               ") and is not ignore_index ", kIgnoreIndex);
    ++n_valid;
  }
  return n_valid;
}

/// Row maximum and log-sum-exp in double; throws NumericError on a NaN or +inf logit.
void row_stats(const float* x, int64_t V, int64_t row, const char* what, double& mx, double& lse) {
  mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < V; ++j) {
    if (std::isnan(x[j]) || x[j] == std::numeric_limits<float>::infinity())
      throw NumericError(
          detail::cat(what, ": logit ", x[j], " at row ", row, ", column ", j, " is not a finite number"));
    mx = std::fmax(mx, static_cast<double>(x[j]));
  }
  double sum = 0.0;
  for (int64_t j = 0; j < V; ++j) sum += std::exp(static_cast<double>(x[j]) - mx);
  lse = mx + std::log(sum);  // all −inf: mx = −inf, lse = NaN, caught by the caller's loss check
}

}  // namespace

CrossEntropyOut cross_entropy_forward(const Tensor& logits, const std::vector<int64_t>& targets,
                                      float label_smoothing) {
  const char* what = "cross_entropy_forward";
  const int64_t n_valid = check_ce_args(logits, targets, label_smoothing, what);
  const int64_t n = logits.size(0), V = logits.size(1);
  const double alpha = label_smoothing;
  CrossEntropyOut out{Tensor({n}), 0.f, n_valid};
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = targets[static_cast<std::size_t>(i)];
    if (t == kIgnoreIndex) continue;
    const float* x = logits.data() + i * V;
    double mx = 0.0, lse = 0.0;
    row_stats(x, V, i, what, mx, lse);
    double loss = (1.0 - alpha) * (lse - x[t]);
    if (alpha > 0.0) {
      double sum_nlp = 0.0;  // Σ_j (lse − x_j) = Σ_j −log p_j
      for (int64_t j = 0; j < V; ++j) sum_nlp += lse - x[j];
      loss += alpha / static_cast<double>(V) * sum_nlp;
    }
    if (!std::isfinite(loss))
      throw NumericError(detail::cat(what, ": the loss of row ", i, " (target ", t, ") is ", loss));
    out.losses.data()[i] = static_cast<float>(loss);
    total += loss;
  }
  out.loss = n_valid == 0 ? 0.f : static_cast<float>(total / static_cast<double>(n_valid));
  return out;
}

Tensor cross_entropy_backward(const Tensor& logits, const std::vector<int64_t>& targets, float dloss,
                              float label_smoothing) {
  const char* what = "cross_entropy_backward";
  const int64_t n_valid = check_ce_args(logits, targets, label_smoothing, what);
  const int64_t n = logits.size(0), V = logits.size(1);
  Tensor dlogits({n, V});
  if (n_valid == 0) return dlogits;
  const double alpha = label_smoothing;
  const double scale = static_cast<double>(dloss) / static_cast<double>(n_valid);
  const double smooth = alpha / static_cast<double>(V);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = targets[static_cast<std::size_t>(i)];
    if (t == kIgnoreIndex) continue;
    const float* x = logits.data() + i * V;
    float* dx = dlogits.data() + i * V;
    double mx = 0.0, lse = 0.0;
    row_stats(x, V, i, what, mx, lse);
    if (!std::isfinite(lse))
      throw NumericError(detail::cat(what, ": row ", i, " has no finite logit (log-sum-exp ", lse, ")"));
    for (int64_t j = 0; j < V; ++j) {
      const double p = std::exp(static_cast<double>(x[j]) - lse);
      const double target = (j == t ? 1.0 - alpha : 0.0) + smooth;
      dx[j] = static_cast<float>(scale * (p - target));
    }
  }
  return dlogits;
}

}  // namespace tpsp::ops::cpu
