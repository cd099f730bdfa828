// The whole Llama model (GPTConfig llama_config: RMSNorm, SwiGLU with a fused stride-2 fc1, RoPE, GQA with a
// per-group fused QKV, no biases, untied) in the TP (+SP, +DP) engine equals the single-process reference
// with UNFUSED weights: loss, logits, every gradient (the reference's gradients fused the engine's way,
// then sliced as the engine's ShardSpec says, stride included) and the parameters after one AdamW step,
// at tp = 1, 2, 4, SP off and on, key/value groups above, equal to and below tp, qk_layernorm, dp = 2.
// Tolerances as test_gpt_equivalence.cpp (float32, partial GEMM sums all-reduced in another order).
#include <doctest/doctest.h>

#include <algorithm>

#include "engine/error.h"
#include "engine/model/llama_layer.h"
#include "engine/packed_seq.h"
#include "engine/parallel_state.h"
#include "tests/tp/tp_util.h"

using namespace tpsp;
using namespace tpsp::testing;

namespace {

struct Case {
  int tp, dp;
  int64_t groups;
  bool sp, qk_layernorm;
  bool overlap = false;  ///< tp_comm_overlap
  int64_t s = 12;        ///< below the position table's 12 and not divisible by tp under SP: pad_sequence
};

GPTConfig config_of(const Case& k) {
  // tp = 3 needs heads divisible by 3: 6 heads of 4 (h = 24) there, else 4 heads of 4 (h = 16).
  GPTConfig c =
      k.tp == 3 ? llama_config(37, 12, 24, 6, k.groups, 2, 24) : llama_config(37, 12, 16, 4, k.groups, 2, 24);
  c.qk_layernorm = k.qk_layernorm;
  return c;
}

void check_step(const Case& k) {
  const GPTConfig c = config_of(k);
  const int64_t b_global = 2 * k.dp, s = k.s;
  auto rank_fn = [&](int) {
    TokenBatch ids, targets;
    make_batch(b_global, s, c.vocab, 3, ids, targets);
    reference::GPT ref(c, 42);
    const float ref_loss = ref.forward(ids, targets, 0);
    const Tensor ref_logits = ref.logits();
    ref.backward();

    ParallelState ps(comm::init_from_env(), k.tp);
    model::ParallelGPT gpt(
        c, 42, ps, {.sequence_parallel = k.sp, .pad_sequence = s % k.tp != 0, .tp_comm_overlap = k.overlap});
    const int64_t b = b_global / k.dp;
    const TokenBatch my_ids{
        b, s, {ids.ids.begin() + ps.dp_rank() * b * s, ids.ids.begin() + (ps.dp_rank() + 1) * b * s}};
    const TokenBatch my_targets{
        b, s, {targets.ids.begin() + ps.dp_rank() * b * s, targets.ids.begin() + (ps.dp_rank() + 1) * b * s}};
    const float loss = gpt.forward(my_ids, my_targets, 0);
    expect_step_equals_reference(gpt, ref, loss, ref_loss, ref_logits, ps, k.dp, b);
  };
  const std::string f = failures(run_ranks(k.tp * k.dp, rank_fn, 120));
  CHECK_MESSAGE(f.empty(), f);
}

}  // namespace

TEST_CASE("llama gpt: one TP (+SP) step equals the unfused reference, groups above, equal to and below tp") {
  for (const Case k : {Case{1, 1, 2, false, false}, Case{2, 1, 2, false, false}, Case{2, 1, 2, true, true},
                       Case{2, 1, 1, true, false}, Case{4, 1, 2, true, false}, Case{4, 1, 4, false, true},
                       Case{4, 1, 1, false, false}, Case{2, 2, 1, true, true}, Case{3, 1, 3, true, true},
                       Case{3, 1, 6, false, false}}) {
    CAPTURE(k.tp);
    CAPTURE(k.dp);
    CAPTURE(k.groups);
    CAPTURE(k.sp);
    CAPTURE(k.qk_layernorm);
    check_step(k);
  }
}

TEST_CASE(
    "llama gpt: with tp_comm_overlap, and with a sequence padded for SP, groups equal to and below tp") {
  for (const Case k :
       {Case{2, 1, 2, true, false, true}, Case{2, 1, 1, true, true, true}, Case{2, 1, 1, false, false, true},
        Case{2, 1, 2, true, false, false, 11}, Case{4, 1, 1, true, true, false, 11}}) {
    CAPTURE(k.tp);
    CAPTURE(k.groups);
    CAPTURE(k.sp);
    CAPTURE(k.overlap);
    CAPTURE(k.s);
    check_step(k);
  }
}

TEST_CASE("llama gpt: packed sequences under SP restart RoPE's positions, and equal each sequence alone") {
  const GPTConfig c = config_of({2, 1, 1, true, false});
  auto rank_fn = [&](int) {
    // Two sequences of 6 tokens; run packed at tp=2 + SP and each alone in the reference.
    TokenBatch ids, targets;
    make_batch(1, 12, c.vocab, 4, ids, targets);
    const PackedSeqParams packed{{0, 6, 12}};
    ParallelState ps(comm::init_from_env(), 2);
    model::ParallelGPT gpt(c, 42, ps, {.sequence_parallel = true});
    const float loss = gpt.forward_packed(ids, targets, packed, 0);
    // RoPE is relative: positions 6..11 for the second sequence would give the same loss, so check them.
    const std::vector<int64_t> want_positions{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5};
    expect(gpt.rope_positions() == want_positions, "RoPE positions do not restart at the packed boundary");
    double sum = 0;
    int64_t count = 0;
    for (const auto& [lo, hi] : {std::pair<int64_t, int64_t>{0, 6}, {6, 12}}) {
      reference::GPT ref(c, 42);
      const TokenBatch one{1, hi - lo, {ids.ids.begin() + lo, ids.ids.begin() + hi}};
      const TokenBatch tgt{1, hi - lo, {targets.ids.begin() + lo, targets.ids.begin() + hi}};
      int64_t n = 0;
      for (int64_t t : tgt.ids) n += t != kIgnoreIndex;
      sum += ref.forward(one, tgt, 0) * static_cast<double>(n);
      count += n;
    }
    const double want = sum / static_cast<double>(count);
    expect(std::fabs(loss - want) <= 1e-5 + 1e-5 * std::fabs(want),
           "packed loss " + std::to_string(loss) + " != the sequences' " + std::to_string(want));
  };
  const std::string f = failures(run_ranks(2, rank_fn, 120));
  CHECK_MESSAGE(f.empty(), f);
}

TEST_CASE(
    "llama config: mixed blocks, dropout, heads % groups, groups dividing neither way with tp are refused") {
  GPTConfig c = llama_config(37, 12, 16, 4, 2, 2, 24);
  CHECK_NOTHROW(c.validate());
  c.activation = "gelu";
  CHECK_THROWS_WITH_AS(
      c.validate(), doctest::Contains("unsupported block normalization=RMSNorm activation=gelu"), ShapeError);
  c = llama_config(37, 12, 16, 4, 2, 2, 24);
  c.dropout = 0.1f;
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("the Llama block has no dropout"), ShapeError);
  c = llama_config(37, 12, 16, 4, 3, 2, 24);
  CHECK_THROWS_WITH_AS(c.validate(), doctest::Contains("heads=4 is not divisible by num_query_groups=3"),
                       ShapeError);
  c = llama_config(37, 12, 24, 6, 3, 2, 24);
  auto rank_fn = [&](int) {
    ParallelState ps(comm::init_from_env(), 2);
    bool refused = false;
    try {
      model::ParallelGPT gpt(c, 1, ps, {});
    } catch (const ShapeError& e) {
      refused = contains(e.what(), "num_query_groups=3 and tp=2: one must divide the other");
    }
    expect(refused, "groups=3 at tp=2 was not refused with the rule");
  };
  const std::string f = failures(run_ranks(2, rank_fn, 60));
  CHECK_MESSAGE(f.empty(), f);
}
