// Shared pieces of the tensor-parallel tests: element-wise comparison that throws with the worst
// element, the slice of a reference tensor that a TP shard must equal, and a small batch.
#pragma once

#include <cmath>
#include <string>

#include "engine/comm/env.h"
#include "engine/model/gpt.h"
#include "engine/tensor.h"
#include "engine/tokens.h"
#include "reference/gpt.h"
#include "tests/support/ranks.h"

namespace tpsp::testing {

/// Throws naming `what`, the count of elements outside |got − want| ≤ atol + rtol·|want|, and the
/// worst flat index with got/want. Shapes must match.
inline void expect_close(const Tensor& got, const Tensor& want, double rtol, double atol,
                         const std::string& what) {
  expect(got.shape() == want.shape(),
         what + ": shape " + shape_str(got.shape()) + " != " + shape_str(want.shape()));
  int64_t bad = 0, worst = -1;
  double worst_excess = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.at(i), w = want.at(i), tol = atol + rtol * std::fabs(w), d = std::fabs(g - w);
    if (!(d <= tol)) {
      ++bad;
      if (worst < 0 || d - tol > worst_excess) worst = i, worst_excess = d - tol;
    }
  }
  if (bad)
    throw std::runtime_error(what + ": " + std::to_string(bad) + " of " + std::to_string(got.numel()) +
                             " elements differ; worst flat index " + std::to_string(worst) + " got " +
                             std::to_string(got.at(worst)) + " want " + std::to_string(want.at(worst)));
}

/// The reference tensor's slice that TP rank `rank` holds under `spec`; vocabulary rows past the
/// real vocabulary (padding) are zero-filled (their gradients must be 0).
inline Tensor expected_shard(const Tensor& ref_whole, const model::ShardSpec& spec, int rank, int tp) {
  Tensor whole(spec.global_shape);
  const int64_t rows = std::min(ref_whole.size(0), whole.size(0));
  std::copy(ref_whole.data(),
            ref_whole.data() + rows * (ref_whole.numel() / std::max<int64_t>(ref_whole.size(0), 1)),
            whole.data());
  return model::shard_of(whole, spec, rank, tp);
}

/// A deterministic batch [b, s] of ids in [0, vocab); targets include two ignored (−100) positions.
inline void make_batch(int64_t b, int64_t s, int64_t vocab, uint64_t salt, TokenBatch& ids,
                       TokenBatch& targets) {
  ids = {b, s, {}};
  targets = {b, s, {}};
  for (int64_t k = 0; k < b * s; ++k) {
    ids.ids.push_back(static_cast<int64_t>((k * 7 + salt * 13 + 3) % static_cast<uint64_t>(vocab)));
    targets.ids.push_back(static_cast<int64_t>((k * 11 + salt * 5 + 1) % static_cast<uint64_t>(vocab)));
  }
  targets.ids[1] = kIgnoreIndex;
  targets.ids[static_cast<std::size_t>(b * s - 2)] = kIgnoreIndex;
}

}  // namespace tpsp::testing
