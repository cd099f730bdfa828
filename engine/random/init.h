// Parameter initialisation keyed by (seed, parameter name): every parameter is generated whole,
// and a tensor-parallel shard is then a slice of that whole tensor, so tp=1 and tp=N start from
// the same model (docs/architecture.md idea 4).
#pragma once

#include <cstdint>
#include <string>

#include "engine/tensor.h"

namespace tpsp::random {

/// Fills t (the *whole* parameter) with N(0, std²) values: element i is
/// std · normal(seed, hash_name(name), i). Depends on the flat index only, so the first rows of a
/// vocabulary padded from 37 to 38 are the same as the unpadded tensor's.
void init_normal(Tensor& t, uint64_t seed, const std::string& name, float std);

}  // namespace tpsp::random
