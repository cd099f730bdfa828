// The reference GPT's own checks (its numerical proof is the PyTorch golden test in tests/golden).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "engine/error.h"
#include "reference/gpt.h"

using namespace tpsp;

namespace {
GPTConfig small() {
  return {.vocab = 37, .seq = 13, .hidden = 24, .heads = 3, .layers = 2};
}
void batch(TokenBatch& ids, TokenBatch& targets) {
  ids = {2, 13, {}};
  targets = {2, 13, {}};
  for (int64_t k = 0; k < 26; ++k) {
    ids.ids.push_back((k * 5 + 1) % 37);
    targets.ids.push_back((k * 3 + 2) % 37);
  }
}
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("reference: loss at init is close to ln V (init std 0.02 gives near-uniform logits)") {
  reference::GPT gpt(small(), 7);
  TokenBatch ids, targets;
  batch(ids, targets);
  const float loss = gpt.forward(ids, targets);
  // With σ=0.02 weights the logits are O(0.1): the loss stays within 0.05 of ln 37 = 3.6109.
  CHECK(std::fabs(loss - std::log(37.f)) < 0.05f);
  CHECK(gpt.logits().shape() == Shape{2, 13, 37});
}

TEST_CASE("reference: deterministic for a seed, different across seeds") {
  TokenBatch ids, targets;
  batch(ids, targets);
  reference::GPT a(small(), 7), b(small(), 7), c(small(), 8);
  CHECK(a.forward(ids, targets) == b.forward(ids, targets));
  CHECK(a.forward(ids, targets) != c.forward(ids, targets));
}

TEST_CASE("reference: training steps lower the loss on a fixed batch") {
  reference::GPT gpt(small(), 7);
  TokenBatch ids, targets;
  batch(ids, targets);
  const float first = gpt.forward(ids, targets);
  for (int i = 0; i < 20; ++i) {
    gpt.forward(ids, targets);
    gpt.backward();
    gpt.step({.lr = 1e-2f});
  }
  CHECK(gpt.forward(ids, targets) < first - 0.5f);
}

TEST_CASE("reference: bad input gets a clear error naming the values") {
  TokenBatch ids, targets;
  batch(ids, targets);
  GPTConfig bad = small();
  bad.heads = 5;
  CHECK(message_of([&] { reference::GPT g(bad, 1); }) == "hidden=24 is not divisible by heads=5");
  reference::GPT gpt(small(), 7);
  TokenBatch wrong = ids;
  wrong.ids[14] = 40;
  CHECK(message_of([&] { gpt.forward(wrong, targets); }) ==
        "input ids: token id 40 at [1, 1] is outside [0, 37)");
  TokenBatch wrong_t = targets;
  wrong_t.ids[3] = -5;
  CHECK(message_of([&] { gpt.forward(ids, wrong_t); }) ==
        "targets: token id -5 at [0, 3] is outside [0, 37) and is not ignore_index -100");
  gpt.params().at("decoder.final_layernorm.bias").at(0) = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_AS(gpt.forward(ids, targets), NumericError);
}
