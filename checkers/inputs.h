// The inputs of every checker scenario: pure functions of (seed, name), so that the grader (which
// computes the expected tensors from reference/) and the ranks (which run the learner's code) see the
// same tensors. The grader draws them from the seed; a rank receives them from an InputDraw that knows
// which part of each one the rank may have:
//  - whole: a tensor every rank holds by design (a replicated input, a bias that is not split);
//  - split(d): rank r of the TP group gets only chunk r of the tp chunks along dim d (a weight's shard,
//    a sequence-parallel slice), drawn under a name of its own ("<name>/split<d>/<shape>"), so that no
//    request for a whole tensor, nor one for the same name with another shape, can return the whole of
//    one that the ranks hold split;
//  - of_rank: a tensor per rank ("<name>.rank<r>", a partial sum) that only rank r gets.
// Under ./check's relay (and ./grade's witness) the ranks never see the seed: they ask the relay, which
// draws each input and cuts out the part the asking rank may have (checkers/input_server.h). Then an
// answer that needs another rank's data can come only through the collectives the witness carries.
// Shared by both sides; no lab code here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/tensor.h"
#include "engine/tokens.h"

namespace tpsp::checkers {

/// One input: its name (letters, digits, '.', '_', '-'; not ending in ".rank<digits>"), its whole
/// shape, the scale of its N(0, 1) values, and whether they are exact: with exact = true, values are
/// multiples of 1/4 in [−8, 8] (round(12·N(0,1))/4): sums of a few of them are exact in float32 in any
/// order (nccl-tests' idea), and the fractions catch code that truncates to integers.
struct InputSpec {
  std::string name;
  Shape shape;
  float scale = 1.f;
  bool exact = false;
};

/// How an input is shared between the ranks.
enum class Share { whole, split, of_rank };

/// Where a side's inputs come from (InputDraw holds one): the seed itself (the grader, and ranks under
/// Gloo), or the relay (ranks under ./check's relay and ./grade's witness: checkers/rank/relay_inputs.h).
class InputSource {
 public:
  virtual ~InputSource() = default;
  /// The tensor `spec` names, shared as `share` (split: along `dim`; of_rank: rank `rank`'s): the whole
  /// tensor on the grader's side, this rank's part on a rank's. Throws ShapeError for a split dim not
  /// divisible by tp, std::invalid_argument for a bad name, CommError when the relay refuses.
  virtual Tensor draw(const InputSpec& spec, Share share, int dim, int rank) const = 0;
};

/// The inputs as one side sees them (see the top of this file). Built implicitly from a seed on the
/// grader's side (`col_w(seed)`: whole tensors, a split one drawn under its split name); a rank's comes
/// from its RunContext (`col_w(ctx.in.split(0))`: the rank's chunk of dim 0).
class InputDraw {
 public:
  /// No source: every draw throws std::logic_error (a RunContext the rank program has not set up).
  InputDraw() = default;
  InputDraw(uint64_t seed);  // NOLINT(google-explicit-constructor): a seed is the grader's draw
  explicit InputDraw(std::shared_ptr<const InputSource> source) : source_(std::move(source)) {}
  /// The same source, drawing split along dim d (the chunk of dim d that this rank holds).
  InputDraw split(int d) const;
  /// The tensor `spec` names: whole, or split as split() said.
  Tensor operator()(const InputSpec& spec) const;
  /// Rank r's own tensor of `spec` (drawn as "<name>.rank<r>"); a rank may ask only for its own r.
  Tensor of_rank(const InputSpec& spec, int r) const;

 private:
  std::shared_ptr<const InputSource> source_;
  int split_ = -1;
};

/// Draws the whole tensor `spec` names shared as `share` (split along `dim`; of_rank: rank `rank`'s)
/// from `seed`: the one function both sides' tensors come from. Throws std::invalid_argument for a name
/// that breaks InputSpec's rule.
Tensor draw_input(const InputSpec& spec, Share share, int dim, int rank, uint64_t seed);
/// Empty when `name` follows InputSpec's rule, else why not.
std::string input_name_problem(const std::string& name);

/// The source of a rank that knows the seed (ranks under Gloo): rank `rank` of `size` gets its chunk of
/// split tensors from the whole it draws itself.
std::shared_ptr<const InputSource> seeded_rank_source(uint64_t seed, int rank, int size);

/// The seed of the models a scenario builds with the engine (ParallelGPT, the RNG tracker): a one-way
/// function of the check's seed (Philox4x32-10 keyed by it), so that a rank given only this seed cannot
/// rebuild the checker's inputs. Not a cryptographic function.
uint64_t model_seed_of(uint64_t seed);

/// A whole tensor of `shape` named `name` (InputSpec), from `draw`.
Tensor input_tensor(const Shape& shape, const InputDraw& draw, const std::string& name, float scale = 1.f,
                    bool exact = false);
/// b·s token ids in [0, vocab) from `draw`'s whole tensor `name`, batch-first [b, s].
TokenBatch input_tokens(int64_t b, int64_t s, int64_t vocab, const InputDraw& draw, const std::string& name);
/// Chunk r of n equal chunks of dim d of `whole` (a copy). Throws ShapeError if size(d) % n != 0.
Tensor chunk(const Tensor& whole, int d, int r, int n);
/// Pads dim d of t with zeros up to `size` (vocabulary padding of an expected whole tensor).
Tensor pad_dim(const Tensor& t, int d, int64_t size);
/// n rounded up to a multiple of tp (the padded vocabulary).
inline int64_t padded_to(int64_t n, int tp) {
  return (n + tp - 1) / tp * tp;
}

}  // namespace tpsp::checkers
