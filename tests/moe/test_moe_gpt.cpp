// The whole MoE GPT (the Llama block with MoE layers in place of its MLPs: GPTConfig num_moe_experts,
// moe_layer_freq) in the parallel engine equals the single-process reference: the loss, the load-balancing
// loss (this rank's share summed over its sequence group), the logits, every gradient (the experts' after
// their edp sum and 1/dp, the router's after the SP sum) and every parameter after one AdamW step, with
// the experts folded over the same ranks as attention's TP × DP at EP × ETP = 2 × 1, 1 × 2, 2 × 2 and 4 × 1,
// and every other layer dense (moe_layer_freq 2). At dp > 1 the load-balancing loss is each replica's own
// (Megatron's), which a reference on the whole batch does not have: those cases set its coefficient to 0.
// Tolerances: tests/tp/tp_util.h (float32; the experts' GEMMs run on other row counts, the sums in another
// order).
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <memory>

#include "engine/error.h"
#include "engine/moe/expert_parallel_state.h"
#include "engine/train/data.h"
#include "tests/tp/tp_util.h"

using namespace tpsp;
using namespace tpsp::testing;

namespace {

struct Case {
  int tp, dp, ep, etp;
  int64_t layer_freq = 1;
};

GPTConfig config_of(const Case& k) {
  GPTConfig c = llama_config(37, 12, 16, 4, 2, 2, 24);
  c.num_moe_experts = 4;
  c.moe_router_topk = 2;
  c.moe_ffn_hidden_size = 8;
  c.moe_aux_loss_coeff = k.dp == 1 ? 0.1f : 0.f;
  c.moe_layer_freq = k.layer_freq;
  return c;
}

void check_step(const Case& k) {
  const GPTConfig c = config_of(k);
  const int64_t b_global = 2 * k.dp, s = 12;
  auto rank_fn = [&](int) {
    TokenBatch ids, targets;
    make_batch(b_global, s, c.vocab, 5, ids, targets);
    reference::GPT ref(c, 42);
    const float ref_loss = ref.forward(ids, targets, 0);
    const float ref_aux = ref.aux_loss();
    const Tensor ref_logits = ref.logits();
    ref.backward();

    auto world = comm::init_from_env();
    ParallelState ps(world, k.tp);
    moe::ExpertParallelState eps(world, k.ep, k.etp);
    model::ParallelGPT gpt(c, 42, ps, {.sequence_parallel = k.tp > 1, .experts = &eps});
    const int64_t b = b_global / k.dp;
        const float loss = gpt.forward(train::ByteDataset::rows(ids, ps.dp_rank() * b, b),
                                   train::ByteDataset::rows(targets, ps.dp_rank() * b, b), 0);
    Tensor aux = Tensor::from({1}, {gpt.aux_loss()});
    ps.tp().all_reduce(aux, comm::ReduceOp::sum, {"test.aux_loss"});
    if (k.dp == 1) {
      expect(ref_aux > 0.f, "the reference's load-balancing loss is 0: the test would not see it");
      expect(std::fabs(aux.at(0) - ref_aux) <= 1e-5f * ref_aux,
             "load-balancing loss " + std::to_string(aux.at(0)) + " != reference " + std::to_string(ref_aux));
    }
    expect_step_equals_reference(gpt, ref, loss, ref_loss, ref_logits, ps, k.dp, b, &eps);
  };
  const std::string f = failures(run_ranks(k.tp * k.dp, rank_fn, 120));
  CHECK_MESSAGE(f.empty(), f);
}

/// What building `c` at tp = 2 (with expert groups of EP × ETP unless ep = 0) leaves in the ranks' failure
/// summary: the ShapeError's message on every rank (the ranks are processes: the error is their exit).
std::string refusal(const GPTConfig& c, int ep, int etp, bool sp) {
  auto rank_fn = [&](int) {
    auto world = comm::init_from_env();
    ParallelState ps(world, 2);
    std::unique_ptr<moe::ExpertParallelState> eps;
    if (ep > 0) eps = std::make_unique<moe::ExpertParallelState>(world, ep, etp);
    model::ParallelGPT gpt(c, 42, ps, {.sequence_parallel = sp, .experts = eps.get()});
  };
  return failures(run_ranks(2, rank_fn, 60));
}

}  // namespace

TEST_CASE("moe gpt: one TP+SP step with experts over EP x ETP folded on TP x DP equals the reference") {
  // edp > 1 at {2, 2, 2, 1} (edp 2: each expert's tokens from two tp_ep blocks) and {1, 2, 1, 1} (edp 2).
  for (const Case k :
       {Case{1, 1, 1, 1}, Case{2, 1, 2, 1}, Case{2, 1, 1, 2}, Case{2, 1, 2, 1, 2}, Case{2, 2, 2, 2},
        Case{1, 2, 2, 1}, Case{2, 2, 4, 1}, Case{2, 2, 2, 1}, Case{1, 2, 1, 1}}) {
    CAPTURE(k.tp);
    CAPTURE(k.dp);
    CAPTURE(k.ep);
    CAPTURE(k.etp);
    CAPTURE(k.layer_freq);
    check_step(k);
  }
}

TEST_CASE("moe gpt: two micro-batches scale the load-balancing loss's gradient like the loss's") {
  // The objective of K micro-batches is the mean of their (cross entropy + load-balancing loss): the
  // engine's backward_micro_batch(1/K) must scale both; the reference runs each micro-batch alone.
  const GPTConfig c = config_of({2, 1, 2, 1});
  auto rank_fn = [&](int) {
    std::vector<TokenBatch> ids(2), targets(2);
    reference::GPT ref(c, 42);
    std::map<std::string, Tensor> want;
    for (int m = 0; m < 2; ++m) {
      make_batch(2, 12, c.vocab, 7 + 4 * static_cast<uint64_t>(m), ids[m], targets[m]);
      ref.forward(ids[m], targets[m], 0);
      expect(ref.aux_loss() > 0.f, "the micro-batch has no load-balancing loss");
      ref.backward();
      for (const auto& [name, g] : model::fused_model_parameters(c, ref.grads())) {
        Tensor& w = want.try_emplace(name, Tensor(g.shape())).first->second;
        for (int64_t i = 0; i < g.numel(); ++i) w.at(i) += 0.5f * g.at(i);
      }
    }
    auto world = comm::init_from_env();
    ParallelState ps(world, 2);
    moe::ExpertParallelState eps(world, 2, 1);
    model::ParallelGPT gpt(c, 42, ps, {.sequence_parallel = true, .experts = &eps});
    gpt.zero_grad();
    for (int m = 0; m < 2; ++m) {
      gpt.forward(ids[m], targets[m], 0);
      gpt.backward_micro_batch(0.5f);
    }
    gpt.finalize_grads();
    for (const auto& [name, g] : gpt.grads())
      expect_close(g, local_slice(gpt, ps, &eps, name, want.at(name)), 1e-3, 2e-6, "grad " + name);
  };
  const std::string f = failures(run_ranks(2, rank_fn, 120));
  CHECK_MESSAGE(f.empty(), f);
}

TEST_CASE(
    "moe gpt: a config or layout the experts cannot take is refused before any collective, naming the rule") {
  const GPTConfig c = config_of({2, 1, 2, 1});
  CHECK(refusal(c, 0, 1, true).find("needs ParallelOptions::experts") != std::string::npos);
  CHECK(refusal(c, 2, 1, false).find("MoE layers at tp=2 need sequence parallelism") != std::string::npos);
  GPTConfig odd_experts = c;
  odd_experts.num_moe_experts = 3;
  CHECK(refusal(odd_experts, 2, 1, true)
            .find("num_moe_experts=3 is not divisible by expert_model_parallel_size=2") != std::string::npos);
  GPTConfig odd_ffn = c;
  odd_ffn.moe_ffn_hidden_size = 7;
  CHECK(refusal(odd_ffn, 1, 2, true)
            .find("moe_ffn_hidden_size=7 is not divisible by expert_tensor_parallel_size=2") !=
        std::string::npos);
  GPTConfig topk = c;
  topk.moe_router_topk = 5;
  CHECK_THROWS_WITH_AS(topk.validate(),
                       doctest::Contains("moe_router_topk=5 must be between 1 and num_moe_experts=4"),
                       ShapeError);
  GPTConfig gpt2;
  gpt2.num_moe_experts = 4;
  CHECK_THROWS_WITH_AS(gpt2.validate(), doctest::Contains("MoE layers are built on the Llama block only"),
                       ShapeError);
}
