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
/// Signatures, in order: all zeros (stale or unwritten buffer); ×tp (summed twice); ÷tp (averaged);
/// one rank's partial sum (an all-reduce missing); only this rank's own rows filled and the rest
/// zero (scatter's backward padded instead of gathered); shards in the wrong order; transposed.
std::string diagnose(const Tensor& got, const Tensor& want, const Tensor& whole,
                     const std::vector<Tensor>& all_got, int rank, int split_dim, double rtol, double atol);

}  // namespace tpsp::checkers
