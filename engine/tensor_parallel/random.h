// Megatron's tensor-parallel RNG tracker (Megatron-LM megatron/core/tensor_parallel/random.py:
// CudaRNGStatesTracker, model_parallel_cuda_manual_seed), rebuilt on this engine's counter-based
// Philox generator for lab02. lab02 replaces random.cpp (add, fork/unfork, model_parallel_manual_seed).
//
// A CUDA generator is a (seed, offset) pair: Philox keyed by the seed, a counter that every kernel
// advances by the numbers it consumed. RngState is that pair; drawing n numbers from the current state
// returns random::uniform(seed, kRngTrackerStream, offset + i) for i < n and advances offset by n, so a
// named state forked again later resumes where it stopped, like torch.cuda's generator does.
//
// Which stream each region of a Megatron block draws from, against what this engine does
// (docs/architecture.md idea 4). "default" = the generator outside any fork, seeded with `seed` on
// every rank of a TP group; "model-parallel" = fork("model-parallel-rng"), seed + 2718 + tp_rank.
//
//   region (tensor on each rank)               | Megatron stream          | this engine's dropout key / init
//   -------------------------------------------+--------------------------+------------------------------
//   attention-probability dropout, local heads | model-parallel: each     | stream "<layer>attention#it",
//     [b, heads/tp, s, s] (inside TP region)   | rank's heads get their   | global [b, heads, s, s],
//                                              | own masks                | offset [0, rank·heads/tp, 0, 0]
//   hidden dropout after attention / MLP, and  | default: the replicated  | "<layer>hidden_attn#it",
//     embedding dropout, without SP:           | activation gets the same | "<layer>hidden_mlp#it",
//     [s, b, h] replicated on every TP rank    | mask on every rank       | "embedding#it"; global
//                                              |                          | [s, b, h], offset 0
//   the same dropouts under SP: [s/tp, b, h],  | model-parallel (the      | global [s, b, h], offset
//     a different sequence shard on each rank  | block runs inside fork() | [rank·s/tp, 0, 0]
//                                              | when sequence_parallel); |
//                                              | the default stream here  |
//                                              | is bug S2: all ranks     |
//                                              | reuse one mask           |
//   TP-sharded weight init (QKV, fc1 columns,  | model-parallel: each     | no per-rank draw: generated
//     proj, fc2 rows, vocabulary rows)         | shard drawn on its rank  | whole from (seed, name), sliced
//   replicated random weights (position        | default: the same values | generated whole from
//     embedding)                               | on every rank            | (seed, name)
//
// Why the engine equals the single-process reference element by element either way: it never draws
// from a tracker. Every mask bit is a pure function of (seed, site stream, the element's flat index in
// the WHOLE tensor), so a rank holding a shard draws exactly the reference's bits for those elements.
// That gives the two properties Megatron obtains by choosing streams — replicated copies of one element
// get the same bit (same global coordinates), different elements get independent bits (different
// coordinates) — and, beyond them, independence from tp itself: Megatron's masks (and TP-sharded
// inits) change with tp, so a Megatron run matches tp=1 only in distribution, never element-wise.
// The tracker below is what lab02 teaches and checks; the model's forward pass does not use it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace tpsp::tensor_parallel {

/// Megatron's name of the per-TP-rank state (_MODEL_PARALLEL_RNG_TRACKER_NAME).
inline constexpr const char* kModelParallelRngName = "model-parallel-rng";
/// Megatron's name of the data-parallel state (_DATA_PARALLEL_RNG_TRACKER_NAME): seeded with `seed`,
/// like the default generator.
inline constexpr const char* kDataParallelRngName = "data-parallel-rng";
/// The name of the generator outside any fork (Megatron's "default-rng"); never a key of the states.
inline constexpr const char* kDefaultRngName = "default-rng";
/// Megatron's offset between the data-parallel seed and the model-parallel seeds ("2718 is just for
/// fun and any POSITIVE value will work").
inline constexpr uint64_t kModelParallelSeedOffset = 2718;
/// The Philox stream every tracker state draws from ("RNGTRACK" in ASCII): states differ by seed only,
/// as CUDA generators do.
inline constexpr uint64_t kRngTrackerStream = 0x524E47545241434Bull;

/// A generator state, the analogue of a CUDA generator's (seed, philox offset): the next number drawn
/// is random::uniform(seed, kRngTrackerStream, offset).
struct RngState {
  uint64_t seed = 0;
  uint64_t offset = 0;
  bool operator==(const RngState&) const = default;
};

/// Named generator states plus the current ("default") generator (Megatron-LM random.py
/// CudaRNGStatesTracker; there the current generator is torch.cuda's, here the tracker owns it).
/// Not thread-safe; one tracker per rank.
class RngStatesTracker {
 public:
  /// RAII form of Megatron's `with tracker.fork(name):`. While alive, the named state is the current
  /// generator; its destructor saves the advanced named state back under its name and makes the
  /// generator current again that was current when the guard was made. Guards nest (destroyed in reverse
  /// order of creation, which scoping guarantees); a guard must not outlive its tracker.
  /// Neither copyable nor movable: fork() returns it by guaranteed copy elision.
  class [[nodiscard]] ForkGuard {
   public:
    ForkGuard(const ForkGuard&) = delete;
    ForkGuard& operator=(const ForkGuard&) = delete;
    ForkGuard(ForkGuard&&) = delete;
    ForkGuard& operator=(ForkGuard&&) = delete;
    /// Saves the current (named) state under its name and restores the one current before the fork.
    /// Aborts with a message if another fork is current (guards destroyed out of order).
    ~ForkGuard();
    /// The forked state's name.
    const std::string& name() const { return name_; }

   private:
    friend class RngStatesTracker;
    /// Makes states_[name] current. Throws ShapeError naming `name` if it was never added.
    ForkGuard(RngStatesTracker& tracker, std::string name);

    RngStatesTracker& tracker_;
    std::string name_;       // the forked state
    std::string prev_name_;  // current state's name before the fork (kDefaultRngName outside forks)
    RngState prev_state_;    // current generator before the fork
  };

  /// Default generator {seed 0, offset 0}, no named states.
  RngStatesTracker() = default;

  /// Forgets every named state and seed (Megatron reset()); the current generator is left as is.
  /// Throws ShapeError naming the forked state if called inside a fork.
  void reset();
  /// Copy of the named states (Megatron get_states(); e.g. saved before an activation-checkpointed
  /// forward). The default generator is not included: save current() alongside.
  std::map<std::string, RngState> get_states() const;
  /// Replaces the named states (Megatron set_states(); e.g. restored before the recompute). Like
  /// Megatron, the seed bookkeeping used by add() is not changed.
  void set_states(std::map<std::string, RngState> states);
  /// Adds state `name` = {seed, 0} (Megatron add(): torch.cuda.manual_seed(seed) into a fresh state).
  /// Throws ShapeError naming the seed if a state was already added with that seed, or naming `name`
  /// if it exists; the tracker is unchanged on error (Megatron records the seed before the name check).
  void add(const std::string& name, uint64_t seed);
  /// Makes the named state current until the returned guard is destroyed:
  ///   { auto g = tracker.fork(); ... draws use "model-parallel-rng" ... }
  /// Forking the state that is already current continues its sequence (no number is drawn twice).
  /// Throws ShapeError naming `name` (and the added names) if it was never added.
  [[nodiscard]] ForkGuard fork(const std::string& name = kModelParallelRngName);

  /// The current generator: the default one outside forks, the innermost forked state inside. Assign
  /// to it to restore a saved generator (torch.cuda.set_rng_state).
  RngState& current() { return current_; }
  const RngState& current() const { return current_; }
  /// Name of the current generator: kDefaultRngName outside forks, else the innermost forked name.
  const std::string& current_name() const { return current_name_; }
  /// torch.cuda.manual_seed(seed): current generator = {seed, 0}.
  void manual_seed(uint64_t seed) { current_ = RngState{seed, 0}; }
  /// Draws n uniforms in [0, 1) from the current generator: element i is
  /// random::uniform(current().seed, kRngTrackerStream, current().offset + i); then offset += n.
  /// Throws ShapeError if n < 0.
  std::vector<float> uniform(int64_t n);

 private:
  RngState current_{};
  std::string current_name_ = kDefaultRngName;
  std::map<std::string, RngState> states_;
  std::set<uint64_t> seeds_;
};

/// Megatron model_parallel_cuda_manual_seed(seed) for TP rank tp_rank: resets the tracker, seeds the
/// default generator with `seed` (identical on all TP ranks: data-parallel regions), adds
/// "data-parallel-rng" = seed and "model-parallel-rng" = seed + 2718 + tp_rank (different on every
/// TP rank: tensor-parallel regions). Megatron's "expert-parallel-rng" is not added (no MoE here).
/// Throws ShapeError if tp_rank < 0, if seed + 2718 + tp_rank overflows 64 bits, or inside a fork.
void model_parallel_manual_seed(RngStatesTracker& tracker, uint64_t seed, int64_t tp_rank);

/// Dropout mask of `shape` drawn from the tracker's current generator (torch's dropout under
/// `with tracker.fork():` or outside it): element i keeps iff uniform_i >= p, kept = 1/(1−p),
/// dropped = 0. Always consumes numel(shape) numbers (also for p = 0). Throws ShapeError if
/// p ∉ [0, 1) or an extent is negative. For lab02's demonstrations; the model uses ops::dropout_mask.
Tensor dropout_mask_from_tracker(RngStatesTracker& tracker, const Shape& shape, float p);

}  // namespace tpsp::tensor_parallel
