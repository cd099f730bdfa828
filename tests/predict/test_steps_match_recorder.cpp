// Issue 14: the calls each lab's prediction is compared with (checkers/predict/steps.cpp, closed
// forms in the grader) are the calls the engine's solution makes. Each test runs that lab's step on
// forked Gloo ranks at the step's sizes and requires rank 0's communication recorder — op, group,
// dim, reduction, peer, tensor bytes, phase, in issue order — to equal the step's calls one by one.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "checkers/predict/predict.h"
#include "engine/comm/env.h"
#include "engine/comm/ring_collectives.h"
#include "engine/model/finalize_grads.h"
#include "engine/model/llama_layer.h"
#include "engine/model/llama_tp.h"
#include "engine/model/sharding.h"
#include "engine/moe/moe_layer.h"
#include "engine/ops/elementwise.h"
#include "engine/parallel_state.h"
#include "engine/tensor_parallel/cross_entropy.h"
#include "engine/tensor_parallel/layers.h"
#include "tests/support/ranks.h"

using namespace tpsp;
using namespace tpsp::testing;
namespace predict = tpsp::checkers::predict;
using predict::Call;

namespace {

/// Files the recorder's new calls under a phase as each phase ends (every call of a phase is waited
/// before it ends), each phase's in issue order (record id).
class PhaseLog {
 public:
  explicit PhaseLog(trace::Recorder& rec) : rec_(rec) { rec_.clear(); }
  /// Files the calls not filed yet (whose label starts with `label_prefix`) under `phase`.
  void end_phase(const std::string& phase, const std::string& label_prefix = "") {
    std::vector<trace::CommRecord> fresh;
    for (const trace::CommRecord& r : rec_.records())
      if (r.label.rfind(label_prefix, 0) == 0 && seen_.insert(r.id).second) fresh.push_back(r);
    std::sort(fresh.begin(), fresh.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    for (const trace::CommRecord& r : fresh) calls_.push_back(to_call(phase, r));
  }
  /// Throws listing both sequences unless the recorded calls equal the step's.
  void expect_step(const std::string& lab) const {
    const predict::Step& step = predict::step_of(lab);
    expect(seen_.size() == rec_.size(), lab + ": a call was made outside the step's phases");
    bool same = calls_.size() == step.calls.size();
    for (std::size_t i = 0; same && i < calls_.size(); ++i)
      same = predict::same_call(calls_[i], step.calls[i].call);
    std::string got, want;
    for (const Call& c : calls_) got += "\n  " + c.line();
    for (const predict::StepCall& c : step.calls) want += "\n  " + c.call.line();
    expect(same, lab + ": the recorder's calls differ from the step's\nrecorded:" + got + "\nstep:" + want);
  }

 private:
  static Call to_call(const std::string& phase, const trace::CommRecord& r) {
    Call c;
    c.phase = phase;
    c.op = r.op;
    c.group = r.group;
    c.dim = r.op == comm::OpKind::all_gather || r.op == comm::OpKind::reduce_scatter ? r.dim : -1;
    c.reduce = r.reduce;
    c.peer = r.op == comm::OpKind::send || r.op == comm::OpKind::recv ? r.peer : -1;
    c.bytes = r.tensor_bytes;
    return c;
  }
  trace::Recorder& rec_;
  std::set<uint64_t> seen_;
  std::vector<Call> calls_;
};

int64_t size_of(const std::string& lab, const std::string& name) {
  return predict::step_of(lab).sizes.at(name);
}

/// Runs `body(rank)` on `world` forked ranks and fails the test with the ranks' messages.
void run(int world, const std::function<void(int)>& body) {
  const std::string f = failures(run_ranks(world, body, 60));
  CHECK_MESSAGE(f.empty(), f);
}

/// lab01 (sp = false) and lab03 (sp = true, then the SP gradient sum): the MLP step.
void mlp_step(const std::string& lab, bool sp) {
  run(2, [lab, sp](int rank) {
    const int64_t s = size_of(lab, "s"), b = size_of(lab, "b"), h = size_of(lab, "h"),
                  f = size_of(lab, "ffn");
    const int tp = static_cast<int>(size_of(lab, "tp"));
    ParallelState ps(comm::init_from_env(), tp);
    tensor_parallel::LinearOptions opt;
    opt.sequence_parallel = sp;
    Tensor dw1({f / tp, h}), db1({f / tp}), dw2({h, f / tp}), db2({h});
    tensor_parallel::ColumnParallelLinear fc1(Tensor({f / tp, h}), Tensor({f / tp}), dw1, db1, opt,
                                              "predict.fc1");
    tensor_parallel::RowParallelLinear fc2(Tensor({h, f / tp}), Tensor({h}), dw2, db2, opt, "predict.fc2");
    const int64_t rows = sp ? s / tp : s;
    const Tensor x({rows, b, h}), dy({rows, b, h});
    tensor_parallel::LinearSaved s1, s2;
    PhaseLog log(ps.world().recorder());
    const Tensor h1 = fc1.forward(x, s1, ps.tp());
    fc2.forward(ops::gelu_forward(h1), s2, ps.tp());
    log.end_phase("forward");
    const Tensor dact = fc2.backward(dy, s2, ps.tp());
    fc1.backward(ops::gelu_backward(dact, h1), s1, ps.tp());
    log.end_phase("backward");
    if (sp) {
      model::allreduce_sequence_parallel_grads({&db2}, ps.tp());
      log.end_phase("finalize_grads");
    }
    if (rank == 0) log.expect_step(lab);
  });
}

}  // namespace

TEST_CASE("lab00's step: ring_all_reduce on a world of 4 records the step's sends and receives") {
  run(static_cast<int>(size_of("lab00", "world")), [](int rank) {
    auto world = comm::init_from_env();
    Tensor t({size_of("lab00", "N")});
    PhaseLog log(world->recorder());
    comm::ring_all_reduce(*world, t, "predict.ring");
    // ring_all_reduce labels its halves "<label>.reduce_scatter.*" and "<label>.all_gather.*"
    log.end_phase("reduce_scatter", "predict.ring.reduce_scatter.");
    log.end_phase("all_gather", "predict.ring.all_gather.");
    if (rank == 0) log.expect_step("lab00");
  });
}

TEST_CASE("lab01's step: the TP MLP without SP records the step's calls") {
  mlp_step("lab01", false);
}

TEST_CASE("lab03's step: the TP MLP with SP and the SP gradient sum record the step's calls") {
  mlp_step("lab03", true);
}

TEST_CASE("lab02's step: vocab-parallel cross entropy records the step's calls") {
  run(2, [](int rank) {
    const int64_t tokens = size_of("lab02", "s") * size_of("lab02", "b"), vocab = size_of("lab02", "vocab");
    const int tp = static_cast<int>(size_of("lab02", "tp"));
    ParallelState ps(comm::init_from_env(), tp);
    std::vector<int64_t> targets;
    for (int64_t i = 0; i < tokens; ++i) targets.push_back(i % vocab);
    tensor_parallel::VocabParallelCESaved saved;
    PhaseLog log(ps.world().recorder());
    tensor_parallel::vocab_parallel_cross_entropy_forward(Tensor({tokens, vocab / tp}), targets, vocab, 0.f,
                                                          ps.tp(), saved, "predict.ce");
    log.end_phase("forward");
    tensor_parallel::vocab_parallel_cross_entropy_backward(saved, 1.f, ps.tp());
    log.end_phase("backward");
    if (rank == 0) log.expect_step("lab02");
  });
}

TEST_CASE("lab04's step: the overlapped ColumnParallelLinear with SP records the step's calls") {
  run(2, [](int rank) {
    const int64_t s = size_of("lab04", "s"), b = size_of("lab04", "b"), h = size_of("lab04", "h"),
                  f = size_of("lab04", "ffn");
    const int tp = static_cast<int>(size_of("lab04", "tp"));
    ParallelState ps(comm::init_from_env(), tp);
    tensor_parallel::LinearOptions opt;
    opt.sequence_parallel = true;
    opt.tp_comm_overlap = true;
    Tensor dw({f / tp, h}), db({f / tp});
    tensor_parallel::ColumnParallelLinear fc1(Tensor({f / tp, h}), Tensor({f / tp}), dw, db, opt,
                                              "predict.fc1");
    tensor_parallel::LinearSaved saved;
    PhaseLog log(ps.world().recorder());
    fc1.forward(Tensor({s / tp, b, h}), saved, ps.tp());
    log.end_phase("forward");
    fc1.backward(Tensor({s, b, f / tp}), saved, ps.tp());
    log.end_phase("backward");
    if (rank == 0) log.expect_step("lab04");
  });
}

TEST_CASE("lab05's step: one Llama layer with SP and groups < tp records the step's calls") {
  run(4, [](int rank) {
    const auto size = [](const char* n) { return size_of("lab05", n); };
    const int tp = static_cast<int>(size("tp"));
    const model::LlamaLayerConfig cfg{.hidden = size("h"),
                                      .heads = size("heads"),
                                      .num_query_groups = size("groups"),
                                      .ffn = size("ffn"),
                                      .qk_layernorm = true};
    ParallelState ps(comm::init_from_env(), tp);
    std::map<std::string, Tensor> P, G;
    for (const auto& [name, spec] :
         model::llama_layer_shard_specs(cfg.hidden, cfg.heads, cfg.groups(), cfg.ffn, true, "", true)) {
      P[name] = shard_of(Tensor(spec.global_shape), spec.placement, ps.tp_rank(), tp);
      G[name] = Tensor(P[name].shape());
    }
    // Norm weights of ones (RMSNorm of zeros would divide by eps only; values do not matter here).
    for (auto& [name, t] : P)
      if (name.find("layernorm") != std::string::npos) t = Tensor::full(t.shape(), 1.f);
    model::LlamaLayer layer(cfg, "", P, G, tp, true);
    const int64_t s = size("s"), b = size("b");
    const model::LayerContext ctx{&ps.tp(), true, 0, 0, s, b, Tensor(), {}};
    PhaseLog log(ps.world().recorder());
    model::LlamaLayerSaved saved;
    layer.forward(Tensor({s / tp, b, cfg.hidden}), saved, ctx);
    log.end_phase("forward");
    layer.backward(Tensor({s / tp, b, cfg.hidden}), saved, ctx);
    log.end_phase("backward");
    std::vector<Tensor*> partial;
    for (auto& [name, g] : G)
      if (name.ends_with("layernorm.weight") && model::norm_grad_partial_over_tp(name, true))
        partial.push_back(&g);
    model::allreduce_sequence_parallel_grads(partial, ps.tp());
    log.end_phase("finalize_grads");
    if (rank == 0) log.expect_step("lab05");
  });
}

TEST_CASE("lab06's step: one MoE layer at EP=2 x ETP=2 with a balanced routing records the step's calls") {
  run(4, [](int rank) {
    const auto size = [](const char* n) { return size_of("lab06", n); };
    const int64_t t = size("T"), h = size("h"), e = size("E"), f = size("ffn");
    auto world = comm::init_from_env();
    moe::ExpertParallelState eps(world, static_cast<int>(size("ep")), static_cast<int>(size("etp")));
    // Every token to expert 0 and expert E/2, one on each EP rank: x > 0, router rows of +1/h for those
    // two experts and −1/h for the others (the tie between the two is broken by the lower expert).
    const Tensor x = Tensor::full({t, h}, 1.f);
    moe::MoEWeights w;
    w.router = Tensor::full({e, h}, -1.f / static_cast<float>(h));
    for (int64_t j : {int64_t{0}, e / 2})
      for (int64_t c = 0; c < h; ++c) w.router.at({j, c}) = 1.f / static_cast<float>(h);
    const auto [first, local] = moe::ExpertParallelState::local_experts(e, eps.ep_size(), eps.ep_rank());
    w.first_expert = first;
    const int64_t fe = f / eps.etp_size();
    for (int64_t k = 0; k < local; ++k)
      w.experts.push_back({Tensor({fe, h}), Tensor({fe, h}), Tensor({h, fe})});
    const moe::MoEOptions opt{e, size("k"), 0.01f, nullptr, "moe"};
    PhaseLog log(world->recorder());
    moe::MoEState st;
    moe::moe_forward(x, w, opt, eps, st);
    log.end_phase("forward");
    moe::MoEGrads g;
    moe::moe_backward(Tensor({t, h}), w, opt, eps, st, 1.f, g);
    log.end_phase("backward");
    if (rank == 0) log.expect_step("lab06");
  });
}
