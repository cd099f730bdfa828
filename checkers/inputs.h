// The inputs of every checker scenario: pure functions of (seed, name), so the ranks (which run the
// learner's code) and the grader (which computes the expected tensors from reference/) build the
// same tensors without sharing anything but the seed. Shared by both sides; no lab code here.
#pragma once

#include <cstdint>
#include <string>

#include "engine/tensor.h"
#include "engine/tokens.h"

namespace tpsp::checkers {

/// A whole tensor of `shape` with values N(0, 1)·scale drawn from (seed, name). With exact = true,
/// values are multiples of 1/4 in [−8, 8] (round(12·N(0,1))/4): sums of a few of them are exact in
/// float32 in any order (nccl-tests' idea), and the fractions catch code that truncates to integers.
Tensor input_tensor(const Shape& shape, uint64_t seed, const std::string& name, float scale = 1.f,
                    bool exact = false);
/// b·s token ids in [0, vocab) drawn from (seed, name), batch-first [b, s].
TokenBatch input_tokens(int64_t b, int64_t s, int64_t vocab, uint64_t seed, const std::string& name);
/// Chunk r of n equal chunks of dim d of `whole` (a copy). Throws ShapeError if size(d) % n != 0.
Tensor chunk(const Tensor& whole, int d, int r, int n);
/// Pads dim d of t with zeros up to `size` (vocabulary padding of an expected whole tensor).
Tensor pad_dim(const Tensor& t, int d, int64_t size);
/// n rounded up to a multiple of tp (the padded vocabulary).
inline int64_t padded_to(int64_t n, int tp) {
  return (n + tp - 1) / tp * tp;
}

}  // namespace tpsp::checkers
