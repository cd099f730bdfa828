// Whole-parameter initialisation from (seed, name): element i depends on its flat index only.
#include "engine/random/init.h"

#include "engine/random/philox.h"

namespace tpsp::random {

void init_normal(Tensor& t, uint64_t seed, const std::string& name, float std) {
  const uint64_t stream = hash_name(name);
  float* p = t.data();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = std * normal(seed, stream, static_cast<uint64_t>(i));
}

}  // namespace tpsp::random
