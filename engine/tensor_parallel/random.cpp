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
  // BEGIN SOLUTION
  TPSP_CHECK(!seeds_.contains(seed), "rng tracker: seed ", seed, " already exists (adding state '", name,
             "')");
  TPSP_CHECK(!states_.contains(name), "rng tracker: state '", name, "' already exists (adding seed ", seed,
             ")");
  seeds_.insert(seed);
  states_[name] = RngState{seed, 0};
  // END SOLUTION
}

RngStatesTracker::ForkGuard::ForkGuard(RngStatesTracker& tracker, std::string name)
    : tracker_(tracker), name_(std::move(name)) {
  // TODO(lab02 rng fork): While the guard lives, draws come from the named state, continuing where the last
  // fork of that name stopped (forks may nest). A name never added: ShapeError naming it.
  // BEGIN SOLUTION
  const auto it = tracker_.states_.find(name_);
  TPSP_CHECK(it != tracker_.states_.end(), "rng tracker: state '", name_,
             "' is not added (added: ", names_of(tracker_.states_), ")");
  prev_name_ = tracker_.current_name_;
  prev_state_ = tracker_.current_;
  if (prev_name_ != kDefaultRngName) tracker_.states_[prev_name_] = tracker_.current_;
  tracker_.current_ = it->second;  // read after the save: forking the current state continues it
  tracker_.current_name_ = name_;
  // END SOLUTION
}

RngStatesTracker::ForkGuard::~ForkGuard() {
  // TODO(lab02 rng unfork): When the guard ends, the named state keeps the progress made while forked (the
  // next fork of it resumes there), and the generator current before the fork (the default one, or the
  // outer named state with its progress) is current again.
  // BEGIN SOLUTION
  if (tracker_.current_name_ != name_) {  // a destructor cannot throw: fail loudly instead
    std::fprintf(stderr,
                 "rng tracker: leaving fork('%s') while fork('%s') is current (guards destroyed "
                 "out of order)\n",
                 name_.c_str(), tracker_.current_name_.c_str());
    std::abort();
  }
  tracker_.states_[name_] = tracker_.current_;
  if (prev_name_ != kDefaultRngName) {
    const auto it = tracker_.states_.find(prev_name_);
    tracker_.current_ = it != tracker_.states_.end() ? it->second : prev_state_;
  } else {
    tracker_.current_ = prev_state_;
  }
  tracker_.current_name_ = prev_name_;
  // END SOLUTION
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
  // BEGIN SOLUTION
  tracker.reset();
  tracker.manual_seed(seed);
  tracker.add(kDataParallelRngName, seed);
  tracker.add(kModelParallelRngName, seed + kModelParallelSeedOffset + static_cast<uint64_t>(tp_rank));
  // END SOLUTION
}

}  // namespace tpsp::tensor_parallel
