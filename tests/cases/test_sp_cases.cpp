// Known cases S1–S2 (docs/known_cases.md): sequence parallelism's replicated parameters
// (LayerNorm γ/β, row-parallel biases, position embeddings), whose gradients are partial per
// token shard and must be SUMMED over TP, and dropout on sequence shards.
//
// The tp=1 model is reference::GPT (the single-process oracle, which ParallelGPT at tp=1 equals:
// tests/tp, and case W1 here). Tolerances (float32, u = 2^-24 ≈ 6e-8):
//  - gradients: |Δ| ≤ 1e-5·|want| + 1e-5·max|want| over the tensor. The parallel run sums the same
//    terms in another order (a partial per token shard, then the TP sum; GEMMs split over TP), a
//    few u per op compounded over ~10 ops (docs/tolerances.md measures ~6u of the tensor's scale
//    for the float64 golden); measured here ≤ 3% of this bound (TPSP_CASES_REPORT=1), while an
//    average instead of a sum is off by 50%.
//  - parameters after one AdamW step: the update is lr·m̂/(√v̂ + ε) ≈ lr·sign(g), insensitive to the
//    gradient's rounding except where g is itself rounding noise, where it may move by up to lr
//    (docs/tolerances.md, "Adam allowance"); LayerNorm gradients here are all far from noise, so
//    |Δ| ≤ 1e-6 + 1e-6·|want| (a few ulp of ~1).
//  - across the TP ranks of one run: bitwise identical (one all-reduce gives every rank the same bits).
#include "engine/model/gpt.h"
#include "engine/ops/ops.h"
#include "engine/tensor_parallel/layers.h"
#include "reference/gpt.h"
#include "tests/cases/cases_util.h"

using namespace tpsp;
using namespace tpsp::cases;

namespace {

GPTConfig small_config(int64_t seq, float dropout) {
  return {.vocab = 11, .seq = seq, .hidden = 8, .heads = 2, .layers = 1, .ffn = 16, .dropout = dropout};
}

/// dγ = Σ_rows dy ⊙ x̂ and dβ = Σ_rows dy over rows [r0, r1) of x, dy [rows, h], in double.
void ln_param_grads(const Tensor& x, const Tensor& dy, int64_t r0, int64_t r1, float eps, Tensor& dg,
                    Tensor& db) {
  const int64_t h = x.size(-1);
  dg = Tensor({h});
  db = Tensor({h});
  for (int64_t i = r0; i < r1; ++i) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < h; ++j) mean += x.at(i * h + j);
    mean /= double(h);
    for (int64_t j = 0; j < h; ++j) var += (x.at(i * h + j) - mean) * (x.at(i * h + j) - mean);
    const double rstd = 1.0 / std::sqrt(var / double(h) + eps);
    for (int64_t j = 0; j < h; ++j) {
      dg.at(j) += float(double(dy.at(i * h + j)) * (x.at(i * h + j) - mean) * rstd);
      db.at(j) += dy.at(i * h + j);
    }
  }
}

}  // namespace

TEST_CASE("case S1: LayerNorm and row-bias gradients of a token shard cover only its tokens, tp=2") {
  run_case(2, [](int) {
    ParallelState ps(comm::init_from_env(), 2);
    comm::ProcessGroup& tp = ps.tp();
    const int r = tp.rank();
    // One LayerNorm over s=2 tokens (b=1, h=5) with different values; rank r holds token r.
    const Tensor x = pattern({2, 1, 5}, 21), dy = pattern({2, 1, 5}, 22);
    const Tensor gamma = pattern({5}, 23), beta = pattern({5}, 24);
    const auto ln = ops::layernorm_forward(x.slice0(r, r + 1), gamma, beta);
    const auto g = ops::layernorm_backward(dy.slice0(r, r + 1), x.slice0(r, r + 1), gamma, ln.mean, ln.rstd);
    Tensor dg_mine, db_mine, dg_all, db_all;
    ln_param_grads(x, dy, r, r + 1, 1e-5f, dg_mine, db_mine);
    ln_param_grads(x, dy, 0, 2, 1e-5f, dg_all, db_all);
    expect_near(g.dgamma, dg_mine, 1e-5, 1e-6, "dγ of this rank's token");
    expect_near(g.dbeta, db_mine, 1e-5, 1e-6, "dβ of this rank's token");
    // The row-parallel bias under SP: dbias = Σ over this rank's tokens of dY.
    Tensor dbias({5});
    tensor_parallel::RowParallelLinear row(pattern({5, 2}, 25), Tensor({5}), Tensor(), dbias,
                                           {.sequence_parallel = true}, "s1.row");
    tensor_parallel::LinearSaved saved;
    row.forward(pattern({2, 1, 2}, 26), saved, tp);
    row.backward(dy.slice0(r, r + 1).clone(), saved, tp);
    expect_near(dbias, db_mine.reshape({5}), 1e-6, 1e-7, "row-parallel dbias of this rank's token");
    // The sum over TP is the whole gradient; the mean would be half of it.
    Tensor dg = g.dgamma.clone(), dbeta = g.dbeta.clone();
    tp.all_reduce(dg, comm::ReduceOp::sum, {"s1.sum"});
    tp.all_reduce(dbeta, comm::ReduceOp::sum, {"s1.sum"});
    expect_near(dg, dg_all, 1e-5, 1e-6, "Σ_TP dγ = dγ over both tokens");
    expect_near(dbeta, db_all, 1e-5, 1e-6, "Σ_TP dβ = dβ over both tokens");
  });
}

TEST_CASE("case S1: ParallelGPT at tp=2 + SP sums LayerNorm and bias gradients, AdamW keeps them equal") {
  run_case(2, [](int) {
    const GPTConfig c = small_config(2, 0.f);
    TokenBatch ids{2, 2, {3, 7, 1, 9}}, targets{2, 2, {7, 2, 9, 4}};
    reference::GPT ref(c, 77);
    ref.forward(ids, targets);
    ref.backward();
    ParallelState ps(comm::init_from_env(), 2);
    model::ParallelGPT gpt(c, 77, ps, {.sequence_parallel = true});
    gpt.forward(ids, targets);
    gpt.backward();
    int checked = 0;
    for (const auto& [name, g] : gpt.grads()) {
      if (!gpt.shard_spec(name).sequence_parallel) continue;
      ++checked;
      const Tensor& want = ref.grads().at(name);
      double scale = 0;
      for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::fabs(double(want.at(i))));
      expect(scale > 1e-4 || name.find("layernorm") == std::string::npos,
             "grad " + name + " is ~0: the check would be vacuous");
      expect_close_rel(g, want, 1e-5, 1e-5, "grad " + name + " (summed over TP, = tp=1)");
      expect_identical_across(ps.tp(), g, "grad " + name);
    }
    expect(checked == 9, "expected 9 sequence-parallel parameters, found " + std::to_string(checked));
    const ops::AdamWConfig adam;
    ref.step(adam);
    gpt.step(adam);
    for (const auto& [name, p] : gpt.params()) {
      if (name.find("layernorm") == std::string::npos) continue;
      expect_near(p, ref.params().at(name), 1e-6, 1e-6, "param after AdamW " + name + " (= tp=1)");
      expect_identical_across(ps.tp(), p, "param after AdamW " + name);
    }
  });
}

TEST_CASE("case S2: dropout masks of a TransformerLayer under SP differ per token shard, tp=2") {
  run_case(2, [](int) {
    const int64_t s = 4, b = 2, h = 8, iteration = 3;
    const uint64_t seed = 99;
    const float p = 0.5f;
    const GPTConfig c = small_config(s, p);
    ParallelState ps(comm::init_from_env(), 2);
    comm::ProcessGroup& tp = ps.tp();
    const int r = tp.rank();
    model::ParallelGPT gpt(c, seed, ps, {.sequence_parallel = true});
    std::map<std::string, Tensor> params = gpt.params(), grads;
    for (const auto& [name, t] : params) grads[name] = Tensor(t.shape());
    model::TransformerLayer layer(c, 0, params, grads, true);
    model::LayerSaved saved;
    const model::LayerContext ctx{&tp, true, seed, iteration, s, b, Tensor(), {}};
    layer.forward(pattern({s / 2, b, h}, 31 + uint64_t(r)), saved, ctx);
    for (const auto& [site, key] :
         {std::pair{"hidden_attn", saved.drop_attn}, {"hidden_mlp", saved.drop_mlp}}) {
      const Tensor mine = ops::dropout_mask({s / 2, b, h}, p, key);
      // The reference layer's mask for the whole [s, b, h] tensor, rows of this rank's tokens.
      const ops::DropoutKey ref_key{
          seed, ops::dropout_stream(std::string("decoder.layers.0.") + site, iteration), {s, b, h}, {}};
      const Tensor whole = ops::dropout_mask({s, b, h}, p, ref_key);
      expect_equal(mine, whole.slice0(r * s / 2, (r + 1) * s / 2),
                   std::string(site) + " mask = reference rows");
      // Different tokens, different masks: the other rank's shard must not be a copy of this one.
      const Tensor all = tp.all_gather(mine, 0, {"s2.masks"});
      int64_t differ = 0;
      for (int64_t i = 0; i < mine.numel(); ++i) differ += all.at(i) != all.at(mine.numel() + i);
      expect(differ > 0, std::string(site) + ": both token shards drew the same mask");
    }
  });
}

TEST_CASE("case S2: ParallelGPT at tp=2 + SP with dropout 0.3 equals the reference step") {
  run_case(2, [](int) {
    const GPTConfig c = small_config(6, 0.3f);
    TokenBatch ids, targets;
    testing::make_batch(2, 6, c.vocab, 4, ids, targets);
    reference::GPT ref(c, 5);
    const float ref_loss = ref.forward(ids, targets, 2);
    ref.backward();
    ParallelState ps(comm::init_from_env(), 2);
    model::ParallelGPT gpt(c, 5, ps, {.sequence_parallel = true});
    const float loss = gpt.forward(ids, targets, 2);
    // Loss: a mean of 10 log-softmax values of magnitude ~2.4; float32 reordering gives a few u of it.
    expect(std::fabs(loss - ref_loss) <= 1e-6 + 1e-6 * std::fabs(ref_loss),
           "loss " + std::to_string(loss) + " != reference " + std::to_string(ref_loss));
    gpt.backward();
    for (const auto& [name, g] : gpt.grads())
      expect_close_rel(g,
                       testing::expected_shard(ref.grads().at(name), gpt.shard_spec(name), ps.tp_rank(), 2),
                       1e-5, 1e-5, "grad " + name);
  });
}
