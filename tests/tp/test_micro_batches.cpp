// Gradient accumulation over micro-batches into f32 main_grad, reduced once per step (Megatron's
// forward_backward_func + finalize_model_grads), and bf16 parameters with an f32 master copy.
// A step over K micro-batches equals the reference's step on the concatenated batch; the restated
// cases of the issue pin the values a wrong reduction order or precision would give.
#include <doctest/doctest.h>

#include <algorithm>

#include "engine/model/finalize_grads.h"
#include "engine/ops/matmul.h"
#include "engine/parallel_state.h"
#include "engine/tensor_parallel/layers.h"
#include "tests/tp/tp_util.h"

using namespace tpsp;
using namespace tpsp::testing;

namespace {

GPTConfig small() {
  return {.vocab = 37, .seq = 12, .hidden = 24, .heads = 12, .layers = 2, .ffn = 48};
}

/// Rows [first, first + n) of a [b, s] batch.
TokenBatch rows(const TokenBatch& t, int64_t first, int64_t n) {
  return {n, t.s, {t.ids.begin() + first * t.s, t.ids.begin() + (first + n) * t.s}};
}

/// K micro-batches of b_mb rows per DP rank at dp × tp (+SP), one train_step, against the reference's
/// step on the whole batch (K · b_mb · dp rows). No ignored targets, so every micro-batch's mean loss
/// has the same weight.
void check_micro_batches(int tp, int dp, bool sp, int k, DType param_dtype) {
  const GPTConfig c = small();
  const int64_t b_mb = 1, b_global = b_mb * k * dp;
  auto fn = [&](int) {
    TokenBatch ids, targets;
    make_batch(b_global, c.seq, c.vocab, 3, ids, targets);
    for (int64_t& t : targets.ids)
      if (t == kIgnoreIndex) t = 5;
    reference::GPT ref(c, 7);
    if (param_dtype == DType::bf16)  // the reference starts from the same (rounded) weights
      for (auto& [name, p] : ref.params()) p.copy_from(p.to(DType::bf16));
    ref.forward(ids, targets, 2);
    ref.backward();
    const ops::AdamWConfig adam{.lr = 1e-3f, .eps = 1e-6f};
    ref.step(adam);

    ParallelState ps(comm::init_from_env(), tp);
    model::ParallelGPT gpt(c, 7, ps, {.sequence_parallel = sp, .param_dtype = param_dtype});
    // This DP rank's rows, split into K micro-batches.
    const TokenBatch my_ids = rows(ids, ps.dp_rank() * b_mb * k, b_mb * k);
    const TokenBatch my_targets = rows(targets, ps.dp_rank() * b_mb * k, b_mb * k);
    std::vector<model::MicroBatch> mbs;
    for (int m = 0; m < k; ++m)
      mbs.push_back({rows(my_ids, m * b_mb, b_mb), rows(my_targets, m * b_mb, b_mb)});
    gpt.train_step(mbs, 2, adam);
    for (const auto& [name, g] : gpt.grads()) {
      expect(g.dtype() == DType::f32, "main_grad " + name + " is not f32");
      expect_close(g, expected_shard(ref.grads().at(name), gpt.shard_spec(name), ps.tp_rank(), tp), 1e-3,
                   2e-6, "main_grad " + name);
    }
    for (const auto& [name, p] : gpt.params()) {
      expect(p.dtype() == param_dtype, "parameter " + name + " changed dtype");
      const model::ShardSpec& spec = gpt.shard_spec(name);
      Tensor want = expected_shard(ref.params().at(name), spec, ps.tp_rank(), tp);
      if (param_dtype == DType::bf16) want = want.to(DType::bf16).to(DType::f32);  // the rounded master
      int64_t n = p.size(0);
      if (spec.placement == Placement::Shard(0) && spec.global_shape[0] != ref.params().at(name).size(0))
        n = std::clamp<int64_t>(c.vocab - ps.tp_rank() * p.size(0), 0, p.size(0));
      // bf16: f32 values a few ulp apart may straddle a bf16 rounding boundary and round one bf16 ulp
      // apart; one ulp is between 2^-8 and 2^-7 of the value, so 2^-7 covers any binade.
      const double rtol = param_dtype == DType::bf16 ? 1.0 / 128 : 1e-4;
      expect_close(p.slice0(0, n).to(DType::f32), want.slice0(0, n), rtol, 2e-5, "param after step " + name);
    }
  };
  const std::string f = failures(run_ranks(tp * dp, fn, 120));
  CHECK_MESSAGE(f.empty(), f);
}

}  // namespace

TEST_CASE("micro-batches: tp=2 + SP, 4 micro-batches equal the reference step on the whole batch") {
  check_micro_batches(2, 1, true, 4, DType::f32);
}
TEST_CASE("micro-batches: dp=2 x tp=2 + SP, 2 micro-batches per DP rank equal the reference step") {
  check_micro_batches(2, 2, true, 2, DType::f32);
}
TEST_CASE("micro-batches: bf16 parameters with f32 main_grad and master weights, tp=2 + SP") {
  check_micro_batches(2, 1, true, 2, DType::bf16);
}

TEST_CASE("case: one-rank group, 4 micro-batches of gradient 1.0 accumulate to main_grad 4.0") {
  // dW = dYᵀ·X with X = 1, dY = 1 (one row) is 1.0 per element and micro-batch; the wgrad GEMM adds it
  // into main_grad (β = 1). Reducing the buffer again after each micro-batch (buffer += reduce(buffer))
  // would give 1 + 2 + 4 + 8 = 15.
  auto fn = [](int) {
    ParallelState ps(comm::init_from_env(), 1);
    Tensor main_grad({3, 2});
    const Tensor x = Tensor::full({1, 2}, 1.f), dy = Tensor::full({1, 3}, 1.f);
    for (int mb = 0; mb < 4; ++mb) ops::matmul_wgrad(dy, x, main_grad);
    std::vector<Tensor*> all{&main_grad};
    model::allreduce_data_parallel_grads(all, ps.dp());
    model::allreduce_sequence_parallel_grads(all, ps.tp());
    expect(main_grad.at(5) == 4.0f, "main_grad " + std::to_string(main_grad.at(5)) + " != 4.0");
  };
  const std::string f = failures(run_ranks(1, fn, 30));
  CHECK_MESSAGE(f.empty(), f);
}

TEST_CASE("case: dp=2, 2 micro-batches of gradient 1.0 each, averaged once: main_grad 2.0") {
  auto fn = [](int) {
    ParallelState ps(comm::init_from_env(), 1);  // world 2 = dp 2 × tp 1
    Tensor main_grad({4});
    for (int mb = 0; mb < 2; ++mb) ops::add_(main_grad, Tensor::full({4}, 1.f));
    std::vector<Tensor*> all{&main_grad};
    model::allreduce_data_parallel_grads(all, ps.dp());
    expect(main_grad.at(0) == 2.0f, "main_grad " + std::to_string(main_grad.at(0)) + " != 2.0 (not 3.0)");
  };
  const std::string f = failures(run_ranks(2, fn, 30));
  CHECK_MESSAGE(f.empty(), f);
}

TEST_CASE("case: bf16 parameter, f32 main_grad: SP LayerNorm gradients 1.0 and 2^-10 sum to 1.0009765625") {
  // A bf16 buffer would round 1 + 2^-10 to 1.0 (bf16 keeps 8 significant bits).
  CHECK(Tensor::full({1}, 1.0009765625f).to(DType::bf16).value(0) == 1.0f);
  auto fn = [](int rank) {
    ParallelState ps(comm::init_from_env(), 2);
    const Tensor gamma = Tensor::full({4}, 1.f).to(DType::bf16);  // the parameter: bf16
    Tensor main_grad(gamma.shape());                              // its gradient: f32
    ops::add_(main_grad, Tensor::full({4}, rank == 0 ? 1.f : 1.f / 1024));
    model::allreduce_sequence_parallel_grads({&main_grad}, ps.tp());
    expect(main_grad.at(2) == 1.0009765625f, "main_grad " + std::to_string(main_grad.at(2)));
  };
  const std::string f = failures(run_ranks(2, fn, 30));
  CHECK_MESSAGE(f.empty(), f);
}

TEST_CASE("case: row-parallel bf16 at tp=4, partial sums [256, 1, 1, -256] reduce to 2.0 in f32") {
  auto fn = [](int rank) {
    ParallelState ps(comm::init_from_env(), 4);
    const float partial[] = {256.f, 1.f, 1.f, -256.f};
    // X·Bᵀ on rank r is partial[r] everywhere: X = [[1]], B_r = [[partial[r]]], both bf16.
    const Tensor x = Tensor::full({1, 1, 1}, 1.f).to(DType::bf16);
    const Tensor w = Tensor::full({3, 1}, partial[rank]).to(DType::bf16);
    Tensor dw({3, 1}), db({3});
    tensor_parallel::RowParallelLinear row(w, Tensor(), dw, db, {}, "case.row");
    tensor_parallel::LinearSaved saved;
    const Tensor y = row.forward(x, saved, ps.tp());
    expect(y.dtype() == DType::bf16 && y.value(2) == 2.0f,
           "y = " + std::to_string(y.value(2)) + " (bf16 ring: 0)");
  };
  const std::string f = failures(run_ranks(4, fn, 30));
  CHECK_MESSAGE(f.empty(), f);
}
