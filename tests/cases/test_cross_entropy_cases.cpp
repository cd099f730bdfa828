// Known cases C1–C5 (docs/known_cases.md): the dense ops::cross_entropy_* and the
// vocab-parallel cross entropy of engine/tensor_parallel/cross_entropy.h.
//
// Label smoothing α is PyTorch's (torch.nn.CrossEntropyLoss): target distribution
// (1−α)·onehot + α/V over the GLOBAL vocabulary V, so loss_i = (1−α)(lse − x_t) + (α/V)·Σ_j (lse − x_j).
// Tolerances (float32, u = 2^-24 ≈ 6e-8): the README's values are given to 6 decimals (±5e-7), so
// C1/C2 use |Δ| ≤ 1e-6 (C2: 2e-6, the losses are ~10 and one ulp of 10 is 9.5e-7). Comparisons with
// the double closed form or the dense op use |Δ| ≤ 1e-6 + 1e-6·|want|: a log-sum-exp over ≤ 37
// terms rounded to float32 a few times (~4u relative of the loss); dlogits (|g| ≤ 1) use
// 1e-7 + 1e-6·|want|. Measured (TPSP_CASES_REPORT=1): ≤ 10% of these bounds; the README's 6-decimal
// values use up to 48% (their own rounding is ±5e-7). Across TP ranks: bitwise.
#include "engine/model/gpt.h"
#include "engine/ops/cross_entropy.h"
#include "engine/tensor_parallel/cross_entropy.h"
#include "tests/cases/cases_util.h"

using namespace tpsp;
using namespace tpsp::cases;
using namespace tpsp::tensor_parallel;
using comm::OpKind;

namespace {

/// PyTorch's loss per row in double (0 for an ignored row).
std::vector<double> torch_losses(const Tensor& logits, const std::vector<int64_t>& t, double alpha) {
  const int64_t n = logits.size(0), V = logits.size(1);
  std::vector<double> out(static_cast<std::size_t>(n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    if (t[std::size_t(i)] == kIgnoreIndex) continue;
    double mx = -1e300, se = 0, sx = 0;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, double(logits.at(i * V + j)));
    for (int64_t j = 0; j < V; ++j) se += std::exp(logits.at(i * V + j) - mx), sx += logits.at(i * V + j);
    const double lse = mx + std::log(se);
    out[std::size_t(i)] =
        (1 - alpha) * (lse - logits.at(i * V + t[std::size_t(i)])) + alpha / V * (V * lse - sx);
  }
  return out;
}

/// The columns [rank·vl, rank·vl + vl) of whole [n, V]; columns past V (padding) are filled with
/// `pad` — garbage that the loss must ignore.
Tensor vocab_slice(const Tensor& whole, int rank, int64_t vl, float pad) {
  const int64_t n = whole.size(0), V = whole.size(1);
  Tensor out({n, vl});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < vl; ++j) {
      const int64_t col = rank * vl + j;
      out.at(i * vl + j) = col < V ? whole.at(i * V + col) : pad;
    }
  return out;
}

/// Runs the vocab-parallel CE on this rank's slice of `whole` and checks it against the dense op:
/// per-row losses (bitwise identical on every rank), mean, dlogits slice (0 in padding columns),
/// exactly 3 all-reduces on the TP group in forward (tp > 1) and none in backward.
void check_vocab_parallel(comm::ProcessGroup& tp, const Tensor& whole, const std::vector<int64_t>& targets,
                          float alpha, const std::string& what) {
  const int64_t n = whole.size(0), V = whole.size(1), vl = (V + tp.size() - 1) / tp.size();
  const Tensor local = vocab_slice(whole, tp.rank(), vl, 1e4f);
  VocabParallelCESaved saved;
  const std::size_t before = tp.recorder().size();
  const auto out = vocab_parallel_cross_entropy_forward(local, targets, V, alpha, tp, saved, what);
  const auto fwd = records_since(tp, before);
  const std::size_t want_calls = tp.size() > 1 ? 3 : 0;
  expect(fwd.size() == want_calls, what + ": forward made " + std::to_string(fwd.size()) + " calls, want " +
                                       std::to_string(want_calls) + " all-reduces");
  for (const auto& r : fwd)
    expect(r.op == OpKind::all_reduce && r.group == "tp",
           what + ": '" + r.label + "' is not a TP all-reduce");
  const std::size_t mid = tp.recorder().size();
  const Tensor grad = vocab_parallel_cross_entropy_backward(saved, 1.f, tp);
  expect(tp.recorder().size() == mid, what + ": backward communicated");

  const auto dense = ops::cross_entropy_forward(whole, targets, alpha);
  const auto exact = torch_losses(whole, targets, alpha);
  expect(out.n_valid == dense.n_valid, what + ": n_valid differs from the dense op");
  Tensor want_losses({n});
  for (int64_t i = 0; i < n; ++i) want_losses.at(i) = float(exact[std::size_t(i)]);
  expect_near(out.losses, want_losses, 1e-6, 1e-6, what + ": losses vs PyTorch's definition");
  expect_near(out.losses, dense.losses, 1e-6, 1e-6, what + ": losses vs the dense op");
  expect(std::fabs(out.loss - dense.loss) <= 1e-6 + 1e-6 * std::fabs(dense.loss), what + ": mean loss");
  expect_identical_across(tp, out.losses, what + ": losses");
  const Tensor dgrad = ops::cross_entropy_backward(whole, targets, 1.f, alpha);
  expect_near(grad, vocab_slice(dgrad, tp.rank(), vl, 0.f), 1e-6, 1e-7, what + ": dlogits slice");
}

}  // namespace

TEST_CASE("case C1: dense cross entropy values") {
  const Tensor logits = Tensor::from({2, 3}, {1, 2, 3, 0.5f, -0.5f, 1});
  const std::vector<int64_t> targets{2, 0};
  const auto out = ops::cross_entropy_forward(logits, targets);
  CHECK(std::fabs(out.losses.at(0) - 0.407606) <= 1e-6);
  CHECK(std::fabs(out.losses.at(1) - 1.104131) <= 1e-6);
  CHECK(std::fabs(out.loss - (0.407606 + 1.104131) / 2) <= 1e-6);
  // The README's gradients are those of the SUM of the losses: dloss = n_valid = 2 undoes the mean.
  const Tensor g = ops::cross_entropy_backward(logits, targets, 2.f);
  const std::vector<double> want{0.090031, 0.244728, -0.334759, -0.668501, 0.121952, 0.546549};
  for (int64_t i = 0; i < 6; ++i)
    CHECK_MESSAGE(std::fabs(g.at(i) - want[std::size_t(i)]) <= 1e-6, "dlogits ", i);
}

TEST_CASE("case C1: vocab-parallel values, 3 all-reduces forward, none backward, tp=1, 2 and 3") {
  for (int tp_size : {1, 2, 3}) {
    CAPTURE(tp_size);
    run_case(tp_size, [tp_size](int) {
      ParallelState ps(comm::init_from_env(), tp_size);
      const Tensor logits = Tensor::from({2, 3}, {1, 2, 3, 0.5f, -0.5f, 1});
      check_vocab_parallel(ps.tp(), logits, {2, 0}, 0.f, "C1 tp=" + std::to_string(tp_size));
      // The README's values: losses and the gradient of their sum (dloss = 2 = n_valid).
      VocabParallelCESaved saved;
      const int64_t vl = (3 + tp_size - 1) / tp_size;
      const auto out = vocab_parallel_cross_entropy_forward(vocab_slice(logits, ps.tp_rank(), vl, -7.f),
                                                            {2, 0}, 3, 0.f, ps.tp(), saved);
      expect_near(out.losses, Tensor::from({2}, {0.407606f, 1.104131f}), 0, 1e-6, "C1 losses");
      const Tensor want =
          Tensor::from({2, 3}, {0.090031f, 0.244728f, -0.334759f, -0.668501f, 0.121952f, 0.546549f});
      expect_near(vocab_parallel_cross_entropy_backward(saved, 2.f, ps.tp()),
                  vocab_slice(want, ps.tp_rank(), vl, 0.f), 0, 1e-6, "C1 dlogits");
    });
  }
}

TEST_CASE("case C2: peer suite value at tp=4, V=128") {
  run_case(4, [](int) {
    ParallelState ps(comm::init_from_env(), 4);
    Tensor local({16, 32});  // 16 rows of [0..7] repeated 4 times, on every rank
    for (int64_t i = 0; i < local.numel(); ++i) local.at(i) = float(i % 8);
    std::vector<int64_t> targets;
    for (int64_t i = 0; i < 16; ++i) targets.push_back(2 * i);  // all in rank 0's slice
    VocabParallelCESaved saved;
    const auto out = vocab_parallel_cross_entropy_forward(local, targets, 128, 0.f, ps.tp(), saved);
    const float base[4] = {10.230928f, 8.230928f, 6.230928f, 4.230928f};
    Tensor want({16});
    for (int64_t i = 0; i < 16; ++i) want.at(i) = base[i % 4];
    expect_near(out.losses, want, 0, 2e-6, "C2 losses");
    expect_identical_across(ps.tp(), out.losses, "C2 losses");
  });
}

TEST_CASE("case C3: label smoothing uses the global vocabulary, identical on every TP rank") {
  for (int tp_size : {2, 4}) {
    CAPTURE(tp_size);
    run_case(tp_size, [tp_size](int) {
      ParallelState ps(comm::init_from_env(), tp_size);
      const Tensor even = pattern({6, 12}, 41);  // V=12: 6 or 3 columns per rank
      check_vocab_parallel(ps.tp(), even, {0, 11, 5, 7, 2, 9}, 0.1f, "C3 V=12 α=0.1");
      const Tensor odd = pattern({5, 37}, 42);  // V=37 padded to 38 or 40
      check_vocab_parallel(ps.tp(), odd, {36, 0, 18, -100, 20}, 0.25f, "C3 V=37 α=0.25");
      check_vocab_parallel(ps.tp(), odd, {36, 0, 18, 3, 20}, 1.f, "C3 V=37 α=1");
    });
  }
}

TEST_CASE("case C4: ignore_index -100 and out-of-range targets") {
  // Dense: ignored rows give 0 loss and 0 gradient and leave the mean; 40 with V=37 is an error.
  const Tensor logits = pattern({4, 37}, 51);
  const std::vector<int64_t> t{3, -100, 30, -100};
  const auto out = ops::cross_entropy_forward(logits, t);
  CHECK(out.n_valid == 2);
  CHECK(out.losses.at(1) == 0.f);
  CHECK(out.losses.at(3) == 0.f);
  CHECK(std::fabs(out.loss - (out.losses.at(0) + out.losses.at(2)) / 2) <= 1e-6);
  const Tensor g = ops::cross_entropy_backward(logits, t);
  for (int64_t j = 0; j < 37; ++j) CHECK((g.at(37 + j) == 0.f && g.at(3 * 37 + j) == 0.f));
  for (int64_t bad : {40, 37, -1}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(ops::cross_entropy_forward(logits, {3, bad, 30, 1}),
                         doctest::Contains(("target " + std::to_string(bad)).c_str()), ShapeError);
    CHECK_THROWS_WITH_AS(ops::cross_entropy_backward(logits, {3, bad, 30, 1}),
                         doctest::Contains(("target " + std::to_string(bad)).c_str()), ShapeError);
  }
  // Vocab-parallel at tp=2 (V=37 padded to 38): same semantics; a bad target raises on every rank
  // before any collective (37 is the padding column: still out of range).
  run_case(2, [](int) {
    ParallelState ps(comm::init_from_env(), 2);
    const Tensor logits = pattern({4, 37}, 51);
    check_vocab_parallel(ps.tp(), logits, {3, -100, 30, -100}, 0.f, "C4 ignore");
    check_vocab_parallel(ps.tp(), logits, {-100, -100, -100, -100}, 0.f, "C4 all ignored");
    for (int64_t bad : {40, 37, -1}) {
      VocabParallelCESaved saved;
      const std::size_t before = ps.world().recorder().size();
      expect_throws(
          [&] {
            vocab_parallel_cross_entropy_forward(vocab_slice(logits, ps.tp_rank(), 19, 0.f), {3, bad, 30, 1},
                                                 37, 0.f, ps.tp(), saved);
          },
          {"target " + std::to_string(bad), "37"}, "vocab-parallel CE target " + std::to_string(bad));
      expect(ps.world().recorder().size() == before, "a collective ran before the bad-target error");
    }
    // The model raises it too, naming the value, before any collective.
    GPTConfig c;
    c.vocab = 37;
    c.seq = 4;
    c.hidden = 8;
    c.heads = 2;
    c.layers = 1;
    c.ffn = 16;
    model::ParallelGPT gpt(c, 1, ps, {});
    const std::size_t before = ps.world().recorder().size();
    expect_throws(
        [&] {
          gpt.forward({1, 4, {1, 2, 3, 4}}, {1, 4, {2, 40, 4, -100}});
        },
        {"40"}, "ParallelGPT target 40");
    expect(ps.world().recorder().size() == before, "ParallelGPT communicated before the bad-target error");
  });
}

TEST_CASE("case C5: V=37 at tp=2 is padded to 38 and equals tp=1") {
  run_case(2, [](int) {
    ParallelState ps(comm::init_from_env(), 2);
    // The loss: padding logits (set to 1e4 here) are masked out; equals the dense tp=1 values.
    const Tensor logits = pattern({6, 37}, 61);
    check_vocab_parallel(ps.tp(), logits, {36, 18, 19, 0, -100, 35}, 0.f, "C5 V=37 tp=2");
    // The model: the padded vocabulary's real rows are the tp=1 rows; the padding row gets no gradient.
    GPTConfig c;
    c.vocab = 37;
    c.seq = 6;
    c.hidden = 8;
    c.heads = 2;
    c.layers = 1;
    c.ffn = 16;
    model::ParallelGPT gpt(c, 8, ps, {});
    expect(gpt.padded_vocab() == 38, "padded vocabulary " + std::to_string(gpt.padded_vocab()) + ", want 38");
    reference::GPT ref(c, 8);
    const std::string wte = "embedding.word_embeddings.weight";
    const Tensor mine = gpt.params().at(wte);
    expect(mine.size(0) == 19, "word embedding shard rows " + std::to_string(mine.size(0)) + ", want 19");
    const int64_t real = ps.tp_rank() == 0 ? 19 : 18;
    expect_equal(mine.slice0(0, real),
                 ref.params().at(wte).slice0(19 * ps.tp_rank(), 19 * ps.tp_rank() + real),
                 "word embedding rows = tp=1 rows");
    TokenBatch ids, targets;
    testing::make_batch(2, 6, 37, 2, ids, targets);
    targets.ids[0] = 36;  // the last real id, next to the padding column
    const float loss = gpt.forward(ids, targets), ref_loss = ref.forward(ids, targets);
    expect(std::fabs(loss - ref_loss) <= 1e-6 + 1e-6 * std::fabs(ref_loss), "loss at tp=2 != tp=1");
    gpt.backward();
    if (ps.tp_rank() == 1)
      expect_equal(gpt.grads().at(wte).slice0(18, 19), Tensor({1, 8}), "padding row gradient");
  });
}
