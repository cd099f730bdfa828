// Vocab-parallel cross entropy (Megatron-LM megatron/core/tensor_parallel/cross_entropy.py
// _VocabParallelCrossEntropy; Shoeybi et al. 2019 §3 "fuse the output GEMM with the loss").
//
// Each TP rank holds the logits of its vocabulary slice [n, V_padded/tp]; the full [n, V] logits are
// never gathered. Forward = 3 all-reduces on [n]-sized (or [n, 2]) tensors:
//   1. max over the vocabulary (ReduceOp::max), subtracted for stability;
//   2. the target's logit (sum; only the rank owning the target contributes);
//   3. Σ exp over the vocabulary (sum) — fused with Σ logits when label smoothing is on ([n, 2]).
// Backward is local: softmax_slice − ((1−α)·onehot_slice + α/V) for the real vocabulary entries.
// Label smoothing follows PyTorch (target distribution (1−α)·onehot + α/V) over the GLOBAL
// vocabulary V (docs/known_cases.md C3); ignore_index −100 rows give 0 loss and 0 gradient and are
// excluded from the mean (C4); vocabulary padding columns (global id >= V) are masked to −inf (C5).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/tensor.h"

namespace tpsp::tensor_parallel {

/// What backward needs: the local softmax slice [n, V_local] and the per-row targets.
struct VocabParallelCESaved {
  Tensor softmax;
  std::vector<int64_t> targets;
  int64_t vocab = 0;
  float label_smoothing = 0.f;
  int64_t n_valid = 0;
};

/// Result: per-row losses [n] (identical on every TP rank), their mean over non-ignored rows.
struct VocabParallelCEOut {
  Tensor losses;
  float loss = 0.f;
  int64_t n_valid = 0;
};

/// logits: [n, V_local] with V_local = V_padded/tp, this rank's columns starting at rank·V_local;
/// targets: n ids in [0, vocab) or −100 (identical on every TP rank); vocab: the real V (<= V_padded).
/// Throws ShapeError for a target outside [0, vocab) other than −100 (before any collective) and
/// NumericError for NaN/inf in the loss.
VocabParallelCEOut vocab_parallel_cross_entropy_forward(const Tensor& logits,
                                                        const std::vector<int64_t>& targets, int64_t vocab,
                                                        float label_smoothing, comm::ProcessGroup& tp,
                                                        VocabParallelCESaved& saved,
                                                        const std::string& label = "cross_entropy");
/// dlogits [n, V_local] for dloss (the gradient of the mean loss); no communication.
Tensor vocab_parallel_cross_entropy_backward(const VocabParallelCESaved& saved, float dloss,
                                             comm::ProcessGroup& tp);

}  // namespace tpsp::tensor_parallel
