// Wrong-answer signatures a checker recognises, each with the hint it prints. They look only at
// numbers (got vs want on every rank), never at the learner's code.
#pragma once

#include <string>
#include <vector>

#include "engine/tensor.h"

namespace tpsp::checkers {

/// True when every element satisfies |a − b| ≤ atol + rtol·|b| (shapes must match).
bool all_close(const Tensor& a, const Tensor& b, double rtol, double atol);

/// A hint for rank `rank`'s wrong tensor, or "" when no signature matches. `want` is what the rank
/// should hold; `whole` the whole answer; `all_got` every rank's tensor; split_dim as in Output.
/// Signatures (checkers/diagnose.cpp has the order): a shape that is the whole tensor or 1/tp of
/// it; all zeros (stale or unwritten buffer); ×tp (summed twice); ÷tp (averaged); a constant scale
/// factor; only this rank's own rows filled and the rest zero (scatter's backward padded instead of
/// gathered); one rank's partial sum (an all-reduce missing), also with a bias counted per rank;
/// the right pieces in the wrong places; the same shard on every rank (a per-rank offset
/// missing); shards in the wrong order; transposed.
std::string diagnose(const Tensor& got, const Tensor& want, const Tensor& whole,
                     const std::vector<Tensor>& all_got, int rank, int split_dim, double rtol, double atol);

}  // namespace tpsp::checkers
