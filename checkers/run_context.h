// A checker scenario as the RANKS see it: a function run on every rank of a TP group, linked with
// the learner's files, that calls the learner's code on the scenario's inputs and returns the
// rank's local tensors by name. It declares nothing about where those tensors belong: the grader
// takes placements, expected values and patterns from checkers/scenario.h only.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "checkers/inputs.h"
#include "engine/comm/process_group.h"
#include "engine/lab_todo.h"
#include "engine/parallel_state.h"
#include "engine/tensor.h"

namespace tpsp::checkers {

/// Where a scenario runs: this rank's TP group (size tp, rank r; the world may hold several TP
/// groups: dp × tp), the layout, SP on/off, its inputs (`in`: checkers/inputs.h; the rank holds no seed
/// of them), the seed of the models it builds with the engine, and the device (./check --device: the
/// scenario puts its inputs, weights and gradient buffers there with on_device, and its results must
/// stay there). begin_phase("forward") / ("backward") files the calls recorded from then on under that
/// phase.
struct RunContext {
  comm::ProcessGroup* tp = nullptr;
  ParallelState* ps = nullptr;
  bool sp = false;
  /// This rank's inputs: `col_x(ctx.in)` whole, `col_w(ctx.in.split(0))` its chunk of dim 0,
  /// `f_dy(ctx.in, ctx.rank())` its own.
  InputDraw in;
  /// The seed of ParallelGPT, TransformerLayer and the RNG tracker (model_seed_of the check's seed).
  uint64_t model_seed = 0;
  Device device = Device::cpu;
  /// True once the scenario called run_on_host(): its learner function is host code by design.
  bool host_code = false;
  /// t on the scenario's device (the same handle on the CPU; undefined stays undefined).
  Tensor on_device(const Tensor& t) const { return t.defined() ? t.to(device) : t; }
  /// Declares the scenario host code by design (lab00's ring collectives add chunks with data(); lab02's
  /// vocab-parallel cross entropy loops over the logits on the host): its lesson is the algorithm, not a
  /// kernel. From then on device is the CPU (on_device keeps tensors on the host), and the rank program
  /// requires its outputs on the CPU instead of on the --device, and reports it as run on the host.
  /// Call it first, before building any tensor.
  void run_on_host() {
    host_code = true;
    device = Device::cpu;
  }
  std::function<void(const std::string&)> begin_phase = [](const std::string&) {};
  int size() const { return tp->size(); }
  int rank() const { return tp->rank(); }
};

/// This rank's local tensor of every output, by name.
using RankOutputs = std::map<std::string, Tensor>;
using RunFn = std::function<RankOutputs(RunContext&)>;

/// Every scenario's rank function, by id "labNN/name".
const std::map<std::string, RunFn>& all_runs();

/// Registers a lab's rank functions (a static object in checkers/<lab>/run.cpp):
///   const LabRuns kRuns([](std::map<std::string, RunFn>& out) { out["lab01/f_g"] = run_f_g; });
struct LabRuns {
  explicit LabRuns(void (*add)(std::map<std::string, RunFn>&));
};
/// The rank function of the whole-model scenario (checkers/gpt_step/run.cpp).
RankOutputs run_gpt_step(RunContext& ctx);
/// The rank function of the packed-sequence scenario (checkers/packed/run.cpp).
RankOutputs run_packed_sequences(RunContext& ctx);
/// The rank function of VocabParallelEmbedding's scenarios (checkers/lab02/run.cpp), with or without SP.
RankOutputs run_vocab_embedding(RunContext& ctx);

/// Takes fingerprints (64-bit FNV-1a of the bytes) of the tensors a call receives as const; check()
/// throws ShapeError naming the call and the tensor if the call wrote into one of them (through a
/// shared-storage copy of the handle, or a const_cast).
class InputGuard {
 public:
  InputGuard(std::string call, std::initializer_list<std::pair<const char*, const Tensor*>> inputs);
  void check() const;

 private:
  std::string call_;
  std::vector<std::pair<std::string, const Tensor*>> inputs_;
  std::vector<uint64_t> hashes_;
};

/// 1 if `fn` raised std::invalid_argument (ShapeError, a refusal), else 0; a [1] tensor on the host.
template <class F>
Tensor refused(F&& fn) {
  try {
    fn();
  } catch (const std::invalid_argument&) {
    return Tensor::from({1}, {1.f});
  }
  return Tensor::from({1}, {0.f});
}

/// A refusal the contract promises: fn() must raise ShapeError (std::invalid_argument) before any
/// communication. Adds two [1] flags to `out`: "refuses_<what>" (1: it raised) and
/// "no_call_before_refusing_<what>" (1: the process's recorder, which every group of the rank records
/// into, has the same records and pending calls after the call: nothing was sent, received or issued).
/// The grader's side of both flags is expect_refusal() in checkers/scenario.h. A refusal scenario also
/// makes one well-shaped call (check_accepts), so code that refuses everything cannot pass it.
template <class F>
void check_refusal(RunContext& ctx, RankOutputs& out, const std::string& what, F&& fn) {
  const auto calls = [&] { return ctx.tp->recorder().size() + ctx.tp->recorder().pending().size(); };
  const std::size_t before = calls();
  // Another exception than ShapeError (std::invalid_argument) refused too, but not as the contract
  // promises: it fails the run with a message that says so (a TODO's NotImplemented goes through).
  const Tensor flag = refused([&] {
    try {
      fn();
    } catch (const std::invalid_argument&) {
      throw;
    } catch (const NotImplemented&) {
      throw;
    } catch (const std::exception& e) {
      throw std::runtime_error("refusal '" + what + "': the call raised \"" + e.what() +
                               "\", which is not a ShapeError (std::invalid_argument), the exception the "
                               "contract's refusal must be");
    }
  });
  out["refuses_" + what] = ctx.on_device(flag);
  out["no_call_before_refusing_" + what] = ctx.on_device(Tensor::from({1}, {calls() == before ? 1.f : 0.f}));
}

/// check_refusal, plus "names_values_<what>": 1 when the ShapeError's message contains every string of
/// `values` (a contract's "ShapeError naming ffn and tp"); its grader side is expect_refusal_naming()
/// (checkers/scenario.h).
template <class F>
void check_refusal_naming(RunContext& ctx, RankOutputs& out, const std::string& what,
                          const std::vector<std::string>& values, F&& fn) {
  std::string message;
  check_refusal(ctx, out, what, [&] {
    try {
      fn();
    } catch (const std::invalid_argument& e) {
      message = e.what();
      throw;
    }
  });
  bool named = !message.empty();
  for (const std::string& v : values) named = named && message.find(v) != std::string::npos;
  out["names_values_" + what] = ctx.on_device(Tensor::from({1}, {named ? 1.f : 0.f}));
}

/// The well-shaped call beside a scenario's refusals: adds "accepts_<what>" (1: fn() returned, 0: it raised
/// std::invalid_argument). A TODO's NotImplemented propagates (the scenario is not implemented yet). The
/// grader's side is expect_accepted() in checkers/scenario.h.
template <class F>
void check_accepts(RunContext& ctx, RankOutputs& out, const std::string& what, F&& fn) {
  out["accepts_" + what] = ctx.on_device(Tensor::from({1}, {1.f - refused(std::forward<F>(fn)).at(0)}));
}

/// Calls fn() and then checks that it left every listed input unchanged (InputGuard).
template <class F>
auto guarded(const std::string& call, std::initializer_list<std::pair<const char*, const Tensor*>> inputs,
             F&& fn) {
  InputGuard g(call, inputs);
  auto out = fn();
  g.check();
  return out;
}

}  // namespace tpsp::checkers
