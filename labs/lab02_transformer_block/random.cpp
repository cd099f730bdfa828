// Megatron's RNG tracker on Philox states (see random.h): the tasks of lab02 (add, fork and unfork,
// the model-parallel seed); lab02 replaces this translation unit. The plumbing no lab asks for (reset,
// the states' getters, the Philox draw, dropout masks) is random_tracker.cpp's.
#include "engine/tensor_parallel/random.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>

#include "engine/error.h"
#include "engine/lab_todo.h"  // the lab skeleton calls TPSP_LAB_TODO

namespace tpsp::tensor_parallel {
namespace {

/// "'a', 'b'" (or "none") for error messages.
[[maybe_unused]] std::string names_of(const std::map<std::string, RngState>& states) {
  std::string out;
  for (const auto& [name, state] : states) out += (out.empty() ? "'" : ", '") + name + "'";
  return out.empty() ? "none" : out;
}

}  // namespace

// [[maybe_unused]] marks a helper function only a solution body uses: the lab skeleton (bodies replaced
// by TPSP_LAB_TODO) must still compile under -Wall -Wextra -Werror; its unused parameters are left to
// -Wno-unused-parameter, which every build of a lab file passes (cmake/labs.cmake).

void RngStatesTracker::add(const std::string& name, uint64_t seed) {
  // TODO(lab02 rng add): Afterwards the tracker holds the state {seed, offset 0} under `name`, and the
  // current generator is unchanged. A seed that an added state already uses, or a name already added:
  // ShapeError naming it, tracker unchanged. No communication (nothing in this file communicates).
  TPSP_LAB_TODO("lab02 rng add");
}

RngStatesTracker::ForkGuard::ForkGuard(RngStatesTracker& tracker, std::string name)
    : tracker_(tracker), name_(std::move(name)) {
  // TODO(lab02 rng fork): While the guard lives, draws come from the named state, continuing where the last
  // fork of that name stopped (forks may nest). A name never added: ShapeError naming it.
  TPSP_LAB_TODO("lab02 rng fork");
}

RngStatesTracker::ForkGuard::~ForkGuard() {
  // TODO(lab02 rng unfork): When the guard ends, the named state keeps the progress made while forked (the
  // next fork of it resumes there), and the generator current before the fork (the default one, or the
  // outer named state with its progress) is current again.
  TPSP_LAB_TODO("lab02 rng unfork");
}

void model_parallel_manual_seed(RngStatesTracker& tracker, uint64_t seed, int64_t tp_rank) {
  TPSP_CHECK(tp_rank >= 0, "model_parallel_manual_seed: tp_rank = ", tp_rank, " is negative");
  TPSP_CHECK(seed <= std::numeric_limits<uint64_t>::max() - kModelParallelSeedOffset -
                         static_cast<uint64_t>(tp_rank),
             "model_parallel_manual_seed: seed ", seed, " + ", kModelParallelSeedOffset, " + tp_rank ",
             tp_rank, " overflows 64 bits");
  // TODO(lab02 rng seed): Megatron model_parallel_cuda_manual_seed. Afterwards the tracker holds exactly
  // kDataParallelRngName = seed (the same on every TP rank) and kModelParallelRngName = seed +
  // kModelParallelSeedOffset + tp_rank (different on every TP rank), and the default generator is seeded
  // with seed.
  TPSP_LAB_TODO("lab02 rng seed");
}

}  // namespace tpsp::tensor_parallel
