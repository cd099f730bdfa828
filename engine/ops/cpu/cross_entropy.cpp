// Dense cross entropy with torch.nn.CrossEntropyLoss semantics (ignore_index −100, mean over the
// non-ignored rows, label smoothing α with target distribution (1−α)·onehot + α/V).
//
// Per row, with lse = log Σ_j exp(x_j):  loss = lse − (1−α)·x_t − (α/V)·Σ_j x_j, which equals
// (1−α)·(−log p_t) + (α/V)·Σ_j (−log p_j). Row sums run in double; results are rounded once.
// A −inf logit is accepted as a masked class (probability 0, e.g. a padded vocabulary entry); it is
// an error only if it makes the loss infinite (it is the target, or α > 0). NaN and +inf logits are
// always a NumericError.
#include <cmath>
#include <limits>

#include "engine/ops/cpu/cpu_ops.h"
#include "engine/ops/rules.h"

namespace tpsp::ops::cpu {
namespace {

/// Row maximum and log-sum-exp in double; throws NumericError on a NaN or +inf logit.
void row_stats(const float* x, int64_t V, int64_t row, const char* what, double& mx, double& lse) {
  mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < V; ++j) {
    if (std::isnan(x[j]) || x[j] == std::numeric_limits<float>::infinity())
      throw bad_logit_error(what, x[j], row, j);
    mx = std::fmax(mx, static_cast<double>(x[j]));
  }
  double sum = 0.0;
  for (int64_t j = 0; j < V; ++j) sum += std::exp(static_cast<double>(x[j]) - mx);
  lse = mx + std::log(sum);  // all −inf: mx = −inf, lse = NaN, caught by the caller's loss check
}

}  // namespace

CrossEntropyOut CpuOps::cross_entropy_forward(const Tensor& logits, const std::vector<int64_t>& targets,
                                              float label_smoothing) {
  const char* what = "cross_entropy_forward";
  const int64_t n_valid = counted_rows(targets);
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
    if (!std::isfinite(loss)) throw infinite_loss_error(what, i, t, loss);
    out.losses.data()[i] = static_cast<float>(loss);
    total += loss;
  }
  out.loss = n_valid == 0 ? 0.f : static_cast<float>(total / static_cast<double>(n_valid));
  return out;
}

Tensor CpuOps::cross_entropy_backward(const Tensor& logits, const std::vector<int64_t>& targets, float dloss,
                                      float label_smoothing) {
  const char* what = "cross_entropy_backward";
  const int64_t n_valid = counted_rows(targets);
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
    if (!std::isfinite(lse)) throw no_finite_logit_error(what, i, lse);
    for (int64_t j = 0; j < V; ++j) {
      const double p = std::exp(static_cast<double>(x[j]) - lse);
      const double target = (j == t ? 1.0 - alpha : 0.0) + smooth;
      dx[j] = static_cast<float>(scale * (p - target));
    }
  }
  return dlogits;
}

}  // namespace tpsp::ops::cpu
