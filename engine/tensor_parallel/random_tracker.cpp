// Megatron's RNG tracker on Philox states (see random.h), the part no lab asks for: reset, the states'
// getters and setter, fork(), the Philox draw of the current state and dropout masks from it (lab02's
// tasks are in random.cpp).
#include <array>
#include <limits>
#include <utility>

#include "engine/error.h"
#include "engine/random/philox.h"
#include "engine/tensor_parallel/random.h"

namespace tpsp::tensor_parallel {

void RngStatesTracker::reset() {
  TPSP_CHECK(current_name_ == kDefaultRngName, "rng tracker: reset() inside fork('", current_name_,
             "'); leave the fork first");
  states_.clear();
  seeds_.clear();
}

std::map<std::string, RngState> RngStatesTracker::get_states() const {
  return states_;
}

void RngStatesTracker::set_states(std::map<std::string, RngState> states) {
  states_ = std::move(states);
}

RngStatesTracker::ForkGuard RngStatesTracker::fork(const std::string& name) {
  return ForkGuard(*this, name);
}

std::vector<float> RngStatesTracker::uniform(int64_t n) {
  TPSP_CHECK(n >= 0, "rng tracker: cannot draw n = ", n, " numbers");
  std::vector<float> out(static_cast<std::size_t>(n));
  const uint64_t seed = current_.seed, first = current_.offset;
  const std::array<uint32_t, 2> key = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  std::array<uint32_t, 4> lanes{};
  uint64_t block = std::numeric_limits<uint64_t>::max();
  for (std::size_t j = 0; j < out.size(); ++j) {  // = random::uniform(seed, stream, first + j), one
    const uint64_t i = first + j;                 // Philox block per four consecutive indices
    if (i / 4 != block) {
      block = i / 4;
      lanes = random::philox4x32(
          {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
           static_cast<uint32_t>(kRngTrackerStream), static_cast<uint32_t>(kRngTrackerStream >> 32)},
          key);
    }
    out[j] = static_cast<float>(lanes[i % 4] >> 8) * (1.0f / 16777216.0f);
  }
  current_.offset += static_cast<uint64_t>(n);
  return out;
}

Tensor dropout_mask_from_tracker(RngStatesTracker& tracker, const Shape& shape, float p) {
  TPSP_CHECK(p >= 0.f && p < 1.f, "dropout_mask_from_tracker: p = ", p, " is outside [0, 1)");
  Tensor mask(shape);  // throws ShapeError on a negative extent
  const std::vector<float> u = tracker.uniform(mask.numel());
  const float keep = 1.f / (1.f - p);
  float* m = mask.data();
  for (std::size_t i = 0; i < u.size(); ++i) m[i] = u[i] >= p ? keep : 0.f;
  return mask;
}

}  // namespace tpsp::tensor_parallel
