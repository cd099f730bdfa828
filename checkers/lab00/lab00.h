// lab00 scenarios, shared by the ranks and the grader: ring reduce-scatter, all-gather and
// all-reduce on send/recv, on integer inputs (exact in any summation order).
#pragma once

#include <string>

#include "checkers/inputs.h"

namespace tpsp::checkers::lab00 {

constexpr int64_t R = 12, C = 10;  // rows divisible by 1, 2, 3, 4

/// Rank r's input of the reduce-scatter and all-reduce scenarios.
inline Tensor rank_tensor(uint64_t seed, int r) {
  return input_tensor({R, C}, seed, "ring.rank" + std::to_string(r), 1, true);
}
/// The whole tensor whose chunks the all-gather scenario's ranks hold.
inline Tensor gather_whole(uint64_t seed) {
  return input_tensor({R, C}, seed, "ring.gather", 1, true);
}

}  // namespace tpsp::checkers::lab00
