// lab03 scenarios, shared by the ranks and the grader: the sequence-parallel mappings and the
// gradient reduction of sequence-parallel parameters on integer tensors (exact in any order); the
// SP transformer layer and its activation memory are in checkers/layer/.
#pragma once

#include <string>

#include "checkers/inputs.h"

namespace tpsp::checkers::lab03 {

constexpr int64_t S = 12, B = 2, H = 24;
constexpr uint64_t kSbh = S * B * H * 4;

/// Rank r's own integer [s, b, h] tensor named `name`.
inline Tensor rank_input(uint64_t seed, const std::string& name, int r) {
  return input_tensor({S, B, H}, seed, name + ".rank" + std::to_string(r), 1, true);
}
/// The replicated input x and the replicated output gradient dz, whole [s, b, h].
inline Tensor sp_x(uint64_t seed) {
  return input_tensor({S, B, H}, seed, "sp.x", 1, true);
}
inline Tensor sp_dz(uint64_t seed) {
  return input_tensor({S, B, H}, seed, "sp.dz", 1, true);
}
/// Rank r's partial gradient [h] of "gamma", "beta" or "bias" in the gradient-reduction scenario.
inline Tensor sync_grad(uint64_t seed, const std::string& which, int r) {
  return input_tensor({H}, seed, "sync." + which + ".rank" + std::to_string(r), 1, true);
}

}  // namespace tpsp::checkers::lab03
