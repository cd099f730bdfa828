// A checker scenario as the GRADER sees it: which lab it belongs to, where it runs (TP sizes, SP,
// the dp × tp layout), the whole expected tensors with the placement of each rank's shard, and the
// communication it must perform. Expected tensors come from reference/ or a closed form — this side
// links no lab-owned code (a ctest proves it) — and placements come from here, never from a rank.
// The rank side of the same scenario (the code that calls the learner's functions) is its RunFn in
// checkers/run_context.h; both sides build their inputs from checkers/inputs.h: this side from the seed,
// the ranks from the part of each input the relay gives them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/comm/op.h"
#include "engine/placement.h"
#include "engine/tensor.h"
#include "engine/trace/record_json.h"

namespace tpsp::checkers {

/// One expected output: the whole tensor and how each rank's dump maps onto it.
struct Expected {
  Tensor whole;
  Placement placement = Placement::Replicate();
  /// For a dim-0 shard of a padded vocabulary: rows at and past this index are padding and are not
  /// compared (-1: every row is real).
  int64_t real_rows = -1;
  /// Absolute tolerance instead of the default atol_rel·max|want| (when >= 0).
  double atol = -1;
  /// The output is the sum of this many identical backward passes (gradient accumulation): a result
  /// of 1/passes of the expected values is diagnosed as an assignment where an accumulation belongs.
  int passes = 1;
  /// What the value means, printed when it differs (e.g. for 0/1 flags: "1 = add() refused a seed
  /// that was already added").
  std::string meaning;
};
using ExpectedOutputs = std::map<std::string, Expected>;

/// A call the scenario must make in a phase: op, the bytes of the tensor S (cost_model.h)
/// and, for all-gather and reduce-scatter, the dim, on a group (the TP group "tp" unless named: lab06's
/// "ep", "etp", "tp_ep", "edp"); `what` explains it in reports ("g: all-reduce of the partial [s, b, h]").
struct ExpectedCall {
  comm::OpKind op;
  uint64_t tensor_bytes;
  std::string what;
  int64_t dim = 0;
  comm::ReduceOp reduce = comm::ReduceOp::sum;  ///< all_reduce / reduce_scatter: the reduction
  int peer_offset = 0;  ///< send / recv: the peer relative to this rank (+1: next in the ring, −1: previous)
  std::string group = "tp";  ///< the recorder's group name
  /// The bytes on each world rank, when they differ between ranks (an uneven collective's input): used
  /// instead of tensor_bytes when not empty.
  std::vector<uint64_t> rank_bytes = {};
  /// The caller's label (CallOpts::label), compared when the scenario sets pattern_labels.
  std::string label = "";
};
/// Phase name ("forward", "backward", ...) → calls, in any order.
using Pattern = std::map<std::string, std::vector<ExpectedCall>>;

/// One communication call of a rank's run: the phase it was issued in and the recorder's record (op and
/// reduction as enums; times in seconds on the rank's recorder clock), as the rank filed it in its
/// result.json and the grader parsed it once (engine/trace/record_json.h).
using TimedCall = trace::PhasedCall;
/// One compute span of a rank's run ("gemm" with label "forward" / "dgrad" / "wgrad", ...).
using ComputeSpan = trace::PhasedSpan;
/// What one rank did, and when (from its result.json).
struct RankTimeline {
  std::vector<TimedCall> calls;
  std::vector<ComputeSpan> compute;
};
/// Checks on the ranks' timelines (one per world rank) of a run at (tp, sp); returns one paragraph
/// per problem (empty: none). Used by lab04 to prove overlap from the trace.
using TimelineCheck =
    std::function<std::vector<std::string>(int tp, bool sp, const std::vector<RankTimeline>&)>;

/// One scenario of a lab.
struct Scenario {
  std::string lab;   ///< "lab01"
  std::string name;  ///< "column_linear"
  std::string summary;
  std::vector<int> tp_sizes{1, 2, 3, 4};
  bool sp_variants = false;  ///< run with SP off and on
  bool sp_only = false;      ///< a sequence-parallel scenario: run with SP on only
  /// Also run once in a dp=2 × tp=2 world (two TP groups), to catch code that uses the world rank
  /// or a world-wide group where the TP group belongs.
  bool dp_layout = true;
  /// Seconds one run may take before its ranks are stopped (the engine's solution takes ≈ 0.1 s).
  double budget_s = 10;
  /// The learner's function is host code by design (lab00's ring collectives, lab02's cross entropy):
  /// under ./check --device its rank function runs it on the CPU (RunContext::run_on_host) and every
  /// rank says so in its result.json ("host_code"); a rank that says otherwise fails the run.
  bool host_code = false;
  /// Whole expected outputs at (seed, tp, sp). Required.
  std::function<ExpectedOutputs(uint64_t seed, int tp, bool sp)> expected;
  /// The calls on the TP group per phase; empty function: the calls are not checked.
  std::function<Pattern(int tp, bool sp)> pattern;
  /// A pattern whose sizes follow the seed's data (lab06: an all_to_all's rows follow the routing), used
  /// instead of `pattern` when set.
  std::function<Pattern(uint64_t seed, int tp, bool sp)> seeded_pattern;
  /// Compare each call's label too (ExpectedCall::label): lab06's dispatch and combine and their mirrors
  /// are calls of one kind on one group, and only their labels say which is which.
  bool pattern_labels = false;
  /// Checks on when the calls were issued and waited against the compute spans; empty: none.
  TimelineCheck timeline;
  std::string id() const { return lab + "/" + name; }
};

/// The grader's side of a refusal check (check_refusal() in checkers/run_context.h): both flags must
/// be 1 on every rank. `refusal` says what must be refused ("ring_reduce_scatter raised ShapeError for
/// 2·tp+1 rows"), `accepted` what a 0 means ("it accepted rows it cannot split into tp chunks"), `who`
/// what communicated too early ("the ring").
void expect_refusal(ExpectedOutputs& out, const std::string& what, const std::string& refusal,
                    const std::string& accepted, const std::string& who);

/// expect_refusal, plus the side of check_refusal_naming(): "names_values_<what>" must be 1; `values`
/// says what the message must name ("ffn=25 and tp=2").
void expect_refusal_naming(ExpectedOutputs& out, const std::string& what, const std::string& refusal,
                           const std::string& accepted, const std::string& who, const std::string& values);

/// The grader's side of check_accepts(): "accepts_<what>" must be 1; `call` names the well-shaped call
/// ("ring_reduce_scatter of 2·tp rows").
void expect_accepted(ExpectedOutputs& out, const std::string& what, const std::string& call);

/// Every scenario of every lab, in lab order.
const std::vector<Scenario>& all_scenarios();
/// The scenario "labNN/name"; throws std::invalid_argument listing the known names.
const Scenario& find_scenario(const std::string& id);

/// Registers a lab's scenarios (a static object in checkers/<lab>/expected.cpp):
///   const LabScenarios kScenarios("lab01", [](std::vector<Scenario>& out) { out.push_back(...); });
/// all_scenarios() lists them in lab order, each lab's in the order its function adds them.
struct LabScenarios {
  LabScenarios(const char* lab, void (*add)(std::vector<Scenario>&));
};
/// What SP settings a scenario runs with.
enum class SpRuns { off_only, off_and_on, on_only };
/// The whole-model scenario "gpt_step" of `lab` (checkers/gpt_step/) with the SP settings `sp`.
Scenario gpt_step_scenario(const std::string& lab, SpRuns sp);
/// The packed-sequence scenario "packed_sequences" of `lab` (checkers/packed/) with the SP settings `sp`.
Scenario packed_sequences_scenario(const std::string& lab, SpRuns sp);
/// VocabParallelEmbedding's scenario (checkers/lab02/expected.cpp): "vocab_embedding" without SP (lab02's
/// path), "sp_vocab_embedding" with SP only (the SP path, layers_sp.cpp: lab03's).
Scenario vocab_embedding_scenario(const std::string& lab, SpRuns sp);

}  // namespace tpsp::checkers
