// Token ids and targets, batch-first [b, s] as at the model's edges.
#pragma once

#include <cstdint>
#include <vector>

namespace tpsp {

/// Ignored target (PyTorch's CrossEntropyLoss ignore_index default).
inline constexpr int64_t kIgnoreIndex = -100;

/// Integer tokens, batch-first [b, s], row-major: ids[bi * s + si].
struct TokenBatch {
  int64_t b = 0;
  int64_t s = 0;
  std::vector<int64_t> ids;

  int64_t at(int64_t bi, int64_t si) const { return ids[static_cast<std::size_t>(bi * s + si)]; }
};

/// Throws ShapeError unless ids.size() == b*s and every id is in [0, vocab) — or equals
/// kIgnoreIndex when allow_ignore is true. The message names the first bad id, its [b, s] position
/// and the rule, e.g. "token id 40 at [1, 3] is outside [0, 37)".
void validate_tokens(const TokenBatch& t, int64_t vocab, bool allow_ignore, const char* what);

}  // namespace tpsp
