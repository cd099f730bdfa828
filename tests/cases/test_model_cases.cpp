// Known cases W1–W2 (docs/known_cases.md): the whole ParallelGPT.
//
// W1 tolerance (float32, u = 2^-24 ≈ 6e-8): the tp=2 run sums the same terms as tp=1 in another
// order (GEMMs split over the hidden/ffn dim, partial sums all-reduced), a few u per op over ~20
// ops. After AdamW steps the parameters differ where a gradient is rounding noise (the update
// lr·m̂/(√v̂+ε) turns noise into up to lr; docs/tolerances.md "Adam allowance"); such elements have
// ~0 influence on the loss. The losses (≈ log 37 ≈ 3.6) are compared with |Δ| ≤ 2e-6·|want|
// (≈ 30u, ~7e-6 absolute); a different model (another init, a padding column leaking into the
// softmax: log(38/37) ≈ 0.027, a missed reduction) moves it far more. Measured: the losses are
// bitwise equal (TPSP_CASES_REPORT=1 prints max|d| 0).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "engine/model/gpt.h"
#include "tests/cases/cases_util.h"

using namespace tpsp;
using namespace tpsp::cases;

namespace {

GPTConfig w_config() {
  // vocab: padded to 38 at tp=2
  return {.vocab = 37, .seq = 12, .hidden = 24, .heads = 4, .layers = 2, .ffn = 48, .dropout = 0.f};
}

constexpr int kSteps = 3;

/// kSteps training steps (forward, backward, AdamW) on one batch, then one more forward:
/// kSteps + 1 losses.
std::vector<float> train(model::ParallelGPT& gpt) {
  std::vector<float> losses;
  const ops::AdamWConfig adam{.lr = 3e-3f};
  TokenBatch ids, targets;
  testing::make_batch(2, 12, 37, 3, ids, targets);
  for (int step = 0; step <= kSteps; ++step) {
    losses.push_back(gpt.forward(ids, targets, step));
    if (step == kSteps) break;
    gpt.backward();
    gpt.step(adam);
  }
  return losses;
}

std::string scratch_file() {
  char tmpl[] = "/tmp/tpsp-cases-w1-XXXXXX";
  const int fd = mkstemp(tmpl);
  REQUIRE(fd >= 0);
  close(fd);
  return tmpl;
}

}  // namespace

TEST_CASE("case W1: ParallelGPT at tp=1 and tp=2 (SP off and on) gives the same losses for 3 steps") {
  // tp=1 in its own process; its losses go through a file to the tp=2 runs.
  const std::string path = scratch_file();
  run_case(1, [&](int) {
    ParallelState ps(comm::init_from_env(), 1);
    model::ParallelGPT gpt(w_config(), 2024, ps, {});
    std::ofstream out(path);
    for (float l : train(gpt)) out << std::hexfloat << l << "\n";
  });
  std::vector<float> tp1;
  {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) tp1.push_back(std::strtof(line.c_str(), nullptr));
  }
  std::remove(path.c_str());
  REQUIRE(tp1.size() == kSteps + 1);
  CHECK(tp1.back() < tp1.front());  // it trains
  for (bool sp : {false, true}) {
    CAPTURE(sp);
    run_case(2, [&](int) {
      ParallelState ps(comm::init_from_env(), 2);
      model::ParallelGPT gpt(w_config(), 2024, ps, {.sequence_parallel = sp});
      const std::vector<float> losses = train(gpt);
      expect_identical_across(ps.tp(), Tensor::from({kSteps + 1}, losses), "losses");
      expect_near(Tensor::from({kSteps + 1}, losses), Tensor::from({kSteps + 1}, tp1), 2e-6, 0,
                  std::string("losses at tp=2") + (sp ? " + SP" : "") + " vs tp=1");
    });
  }
}

namespace {
/// One forward where TP rank `odd_rank` of every TP group in `bad_groups` gets `perturb`ed inputs;
/// expects the W2 error on every rank of those groups and a normal forward everywhere else.
void check_replicated(int tp, int dp, const std::vector<int>& bad_groups, int odd_rank,
                      const std::function<void(TokenBatch&, TokenBatch&)>& perturb, const std::string& what) {
  run_case(tp * dp, [&](int) {
    ParallelState ps(comm::init_from_env(), tp);
    GPTConfig c = w_config();
    c.layers = 1;
    model::ParallelGPT gpt(c, 7, ps, {});
    TokenBatch ids, targets;
    testing::make_batch(2, 12, c.vocab, 10 + uint64_t(ps.dp_rank()), ids, targets);  // DP ranks differ: fine
    const bool bad = std::find(bad_groups.begin(), bad_groups.end(), ps.dp_rank()) != bad_groups.end();
    if (bad && ps.tp_rank() == odd_rank) perturb(ids, targets);
    if (bad)
      expect_throws([&] { gpt.forward(ids, targets); }, {"different token batches"}, what);
    else
      expect(std::isfinite(gpt.forward(ids, targets)), what + ": a replicated group failed");
  });
}
}  // namespace

TEST_CASE("case W2: a TP rank with a different batch is an error on every rank of its TP group") {
  // One token changed on TP rank 1.
  check_replicated(
      2, 1, {0}, 1, [](TokenBatch& ids, TokenBatch&) { ids.ids[5] = (ids.ids[5] + 1) % 37; },
      "one id changed");
  // A different target only.
  check_replicated(
      2, 1, {0}, 0, [](TokenBatch&, TokenBatch& t) { t.ids[3] = (t.ids[3] + 4) % 37; }, "one target changed");
  // A batch of another shape (b=1 instead of 2): the same error, not a collective mismatch or a hang.
  check_replicated(
      2, 1, {0}, 1, [](TokenBatch& ids, TokenBatch& t) { testing::make_batch(1, 12, 37, 10, ids, t); },
      "another batch shape");
  // dp=2 × tp=2: the replicas hold different batches (legitimately); only TP group 1 is broken.
  check_replicated(
      2, 2, {1}, 1, [](TokenBatch& ids, TokenBatch&) { ids.ids[0] = (ids.ids[0] + 1) % 37; },
      "dp=2 x tp=2, group 1 broken");
}

TEST_CASE("case W2: differences that cancel in a weighted sum, swapped positions and rows are caught") {
  // Two ids changed by +2 and −1 (22 → 24 and 29 → 28 in this batch): a sum weighted 1, 2 by
  // position is unchanged, so a position-weighted checksum would miss it.
  check_replicated(
      2, 1, {0}, 1,
      [](TokenBatch& ids, TokenBatch&) {
        ids.ids[0] += 2;
        ids.ids[1] -= 1;
      },
      "two ids changed, weighted sum kept");
  // A rank-dependent shuffle: the two batch rows swapped, on rank 1 of tp=4.
  check_replicated(
      4, 1, {0}, 1,
      [](TokenBatch& ids, TokenBatch& t) {
        std::swap_ranges(ids.ids.begin(), ids.ids.begin() + 12, ids.ids.begin() + 12);
        std::swap_ranges(t.ids.begin(), t.ids.begin() + 12, t.ids.begin() + 12);
      },
      "rows swapped");
}
