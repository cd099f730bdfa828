// A checker scenario: one piece of a lab run on every rank of a TP group, its outputs and how they
// relate to the single-process answer, and the communication it must perform.
//
// The same `run` function executes in two places that never share code paths with the learner's
// build of the grader:
//   - on each rank, in tpsp-lab-ranks[-labNN] (linked with the learner's files), which dumps every
//     output as .npy and the recorder's calls as JSON;
//   - in the grader tpsp-check (linked with the engine's own solution only), at tp=1 in one process
//     with no communication, to produce the whole expected tensors (unless `expected` is given).
// Inputs are drawn from the seed chosen at check time, identically in both places.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/comm/op.h"
#include "engine/comm/process_group.h"
#include "engine/parallel_state.h"
#include "engine/tensor.h"

namespace tpsp::checkers {

/// Where a scenario runs: the TP group (size tp, rank r), SP on/off and the check's seed.
/// begin_phase("forward") / ("backward") splits the recorded calls by phase.
struct RunContext {
  comm::ProcessGroup* tp = nullptr;
  ParallelState* ps = nullptr;  ///< the layout (world = tp here), for whole-model scenarios
  bool sp = false;
  uint64_t seed = 0;
  std::function<void(const std::string&)> begin_phase = [](const std::string&) {};
  int size() const { return tp->size(); }
  int rank() const { return tp->rank(); }
};

/// One output: the rank's local tensor and how it maps onto the whole answer.
/// split_dim kReplicated: every rank holds the whole tensor; kPartial: each rank holds a partial
/// sum and the sum over ranks is the whole; d >= 0: rank r holds chunk r of dim d (equal chunks,
/// rank order). real_rows >= 0 marks a dim-0 split whose whole tensor has that many real rows
/// (vocabulary padding): rows past it are not compared.
inline constexpr int kReplicated = -1;
inline constexpr int kPartial = -2;
struct Output {
  Tensor local;
  int split_dim = kReplicated;
  int64_t real_rows = -1;
  double atol = -1;  ///< absolute tolerance instead of the default atol_rel·max|want| (when >= 0)
};
using Outputs = std::map<std::string, Output>;

/// A call the scenario must make in a phase: op, the bytes of the tensor S (cost_model.h) and, for
/// all-gather and reduce-scatter, the dim, on the TP group; `what` explains it in reports
/// ("g: all-reduce of the partial [s, b, h]").
struct ExpectedCall {
  comm::OpKind op;
  uint64_t tensor_bytes;
  std::string what;
  int64_t dim = 0;
};
/// Phase name ("forward", "backward", ...) → calls, in any order.
using Pattern = std::map<std::string, std::vector<ExpectedCall>>;

/// One scenario of a lab.
struct Scenario {
  std::string lab;   ///< "lab01"
  std::string name;  ///< "column_linear"
  std::string summary;
  std::vector<int> tp_sizes{1, 2, 3, 4};
  bool sp_variants = false;  ///< run with SP off and on
  bool sp_only = false;      ///< a sequence-parallel scenario: run with SP on only
  std::function<Outputs(RunContext&)> run;
  std::function<Pattern(int tp, bool sp)> pattern;  ///< empty: the calls are not checked
  /// Whole expected outputs; default: `run` at tp=1 in the grader process.
  std::function<Outputs(uint64_t seed, int tp, bool sp)> expected;
};

/// Every scenario of every lab, in lab order.
const std::vector<Scenario>& all_scenarios();
/// The scenario "labNN/name"; throws std::invalid_argument listing the known names.
const Scenario& find_scenario(const std::string& id);

/// A whole tensor of `shape` with values N(0, 1) · scale drawn from (seed, name) — identical on every
/// rank and in the grader. With integer = true, values are rounded to integers in [−8, 8] so any
/// summation order is exact (nccl-tests' idea).
Tensor input_tensor(const Shape& shape, uint64_t seed, const std::string& name, float scale = 1.f,
                    bool integer = false);
/// Runs sc.run in this process at tp=1 (a one-rank group, no communication) with the engine's
/// own code: the whole answer for every output.
Outputs run_single_process(const Scenario& sc, uint64_t seed, bool sp);
/// Pads dim `d` of t with zeros up to `size` (vocabulary padding of the expected answer).
Tensor pad_dim(const Tensor& t, int d, int64_t size);
/// Chunk r of dim d of a whole tensor (a copy; dim 0 uses slice0).
Tensor chunk(const Tensor& whole, int d, int r, int n);

// Registration, one function per lab (checkers/scenarios_labNN.cpp).
void register_lab00(std::vector<Scenario>& out);
void register_lab01(std::vector<Scenario>& out);
void register_lab02(std::vector<Scenario>& out);
void register_lab03(std::vector<Scenario>& out);
/// The whole-model scenario "gpt_step" for `lab` (one training step of the TP GPT with the
/// learner's files in place): SP off and on, or SP only.
Scenario gpt_step_scenario(const std::string& lab, bool sp_only);

}  // namespace tpsp::checkers
