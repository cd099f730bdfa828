// Dense (single-process) cross entropy with PyTorch's semantics: ignore_index, mean over the
// non-ignored rows, label smoothing α as in torch.nn.CrossEntropyLoss:
//   loss_i = (1 − α)·(−log p_i[t_i]) + (α / V)·Σ_j (−log p_i[j]),  i.e. target (1−α)·onehot + α/V.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"
#include "engine/tokens.h"

namespace tpsp::ops {

/// Forward result. losses: [n] per row (0 for ignored rows); loss: mean over the n_valid rows
/// (0 when every row is ignored, where PyTorch would give NaN).
struct CrossEntropyOut {
  Tensor losses;
  float loss = 0.f;
  int64_t n_valid = 0;
};

/// logits: [n, V]; targets: n ids, each in [0, V) or kIgnoreIndex.
/// Throws ShapeError for a target outside [0, V) other than −100 (names the value and row) and
/// NumericError when a logit or the loss is NaN/inf (names the row).
CrossEntropyOut cross_entropy_forward(const Tensor& logits, const std::vector<int64_t>& targets,
                                      float label_smoothing = 0.f);
/// dlogits [n, V] = dloss · (softmax(logits) − ((1−α)·onehot + α/V)) / n_valid; ignored rows 0.
Tensor cross_entropy_backward(const Tensor& logits, const std::vector<int64_t>& targets, float dloss = 1.f,
                              float label_smoothing = 0.f);

}  // namespace tpsp::ops
