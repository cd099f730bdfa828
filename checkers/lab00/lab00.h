// lab00 scenarios, shared by the ranks and the grader: ring reduce-scatter, all-gather and
// all-reduce on send/recv, on integer inputs (exact in any summation order).
#pragma once

#include <string>

#include "checkers/inputs.h"

namespace tpsp::checkers::lab00 {

constexpr int64_t R = 12, C = 10;  // rows divisible by 1, 2, 3, 4

/// Rank r's own input of the reduce-scatter and all-reduce scenarios (checkers/inputs.h: no other rank
/// gets it).
inline Tensor rank_tensor(const InputDraw& d, int r) {
  return d.of_rank({"ring", {R, C}, 1, true}, r);
}
/// The tensor whose chunks (of dim 0) the all-gather scenario's ranks hold: whole on the grader's side,
/// a rank's chunk on a rank's.
inline Tensor gather_whole(const InputDraw& d) {
  return d.split(0)({"ring.gather", {R, C}, 1, true});
}

}  // namespace tpsp::checkers::lab00
