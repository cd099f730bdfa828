// Wrong-answer signatures a checker recognises, each with the hint it prints. They look only at
// numbers (got vs want on every rank), never at the learner's code.
#pragma once

#include <string>
#include <vector>

#include "engine/placement.h"
#include "engine/tensor.h"

namespace tpsp::checkers {

/// True when every element satisfies |a − b| ≤ atol + rtol·|b| (shapes must match).
bool all_close(const Tensor& a, const Tensor& b, double rtol, double atol);

/// What a diagnosis needs besides the tensors: the output's placement, the number of identical
/// backward passes it accumulates (1: none) and the comparison's tolerances.
struct Diagnosis {
  Placement placement;
  int passes = 1;
  double rtol = 0;
  double atol = 0;
};

/// A hint for rank `rank`'s wrong tensor, or "" when no signature matches. `want` is what the rank
/// should hold; `whole` the whole answer; `all_got` every rank's tensor of the TP group.
/// Signatures (checkers/grader/diagnose.cpp has the order): a shape that is the whole tensor or 1/tp
/// of it; all zeros (stale or unwritten buffer); 1/passes (a gradient assigned where it must be
/// accumulated); ×tp (summed twice); ÷tp (averaged); a constant scale factor; every row off by the
/// same vector (a bias counted the wrong number of times); only this rank's own rows filled and
/// the rest zero (scatter's backward padded instead of gathered); one rank's partial sum (an
/// all-reduce missing), also with a bias counted per rank; the right pieces in the wrong places;
/// the same shard on every rank (a per-rank offset missing); shards in the wrong order; under a strided
/// placement, one contiguous chunk of the fused dim ("gate rows only"); over groups, another group's
/// chunk (a rank → group map of r % groups instead of r / (tp / groups)); transposed; a 1-D count of
/// positions that restarts every s/tp entries (numbered per shard) or ignores packed documents.
std::string diagnose(const Tensor& got, const Tensor& want, const Tensor& whole,
                     const std::vector<Tensor>& all_got, int rank, const Diagnosis& d);

}  // namespace tpsp::checkers
