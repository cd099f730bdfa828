// Issue #4: how the model communicates, read from the recorder, bytes exact.
// Per transformer layer at tp=2 (s=12, b=2, h=24, one [s, b, h] f32 tensor = 2304 bytes):
//   without SP: forward 2 all-reduces of [s, b, h] (the two g's), backward 2 (the two f's);
//   with SP:    forward 2 all-gathers into [s, b, h] + 2 reduce-scatters of [s, b, h];
//               backward 2 reduce-scatters + 2 all-gathers (the conjugates), plus 2 all-gathers that
//               re-gather the column-parallel inputs for the weight gradients (Megatron keeps only
//               the [s/tp, b, h] shard in memory and gathers it again in backward).
// Vocab-parallel cross entropy: 3 small all-reduces in forward (max, predicted logit, Σexp), none
// in backward.
#include <doctest/doctest.h>

#include <functional>
#include <map>

#include "engine/comm/cost_model.h"
#include "engine/parallel_state.h"
#include "tests/tp/tp_util.h"

using namespace tpsp;
using namespace tpsp::testing;

namespace {

GPTConfig cfg() {
  return {.vocab = 37, .seq = 12, .hidden = 24, .heads = 4, .layers = 2, .ffn = 48};
}

/// "op label" → count, for records whose label starts with prefix; also checks every record's
/// bytes against the closed form of cost_model.h.
std::map<std::string, int> pattern(const std::vector<trace::CommRecord>& recs, const std::string& prefix) {
  std::map<std::string, int> out;
  for (const trace::CommRecord& r : recs) {
    if (r.label.rfind(prefix, 0) != 0) continue;
    out[std::string(comm::op_name(r.op)) + " " + r.label.substr(prefix.size())] += 1;
    expect(r.group == "tp", r.label + " ran on group " + r.group + ", not tp");
    expect(r.bytes == comm::wire_bytes(r.op, r.group_size, r.tensor_bytes, r.group_rank),
           r.label + ": recorded bytes differ from the closed form");
  }
  return out;
}

void check_pattern(bool sp) {
  auto fn = [sp](int) {
    const GPTConfig c = cfg();
    ParallelState ps(comm::init_from_env(), 2);
    model::ParallelGPT gpt(c, 3, ps, {.sequence_parallel = sp});
    TokenBatch ids, targets;
    make_batch(2, 12, c.vocab, 0, ids, targets);
    trace::Recorder& rec = ps.world().recorder();
    rec.clear();
    gpt.forward(ids, targets);
    const auto fwd = rec.records();
    rec.clear();
    gpt.backward();
    const auto bwd = rec.records();

    const uint64_t sbh = 12 * 2 * 24 * 4;
    const std::string L = "decoder.layers.1.";
    std::map<std::string, int> want_f, want_b;
    if (!sp) {
      want_f = {{"all_reduce self_attention.linear_proj.g", 1}, {"all_reduce mlp.linear_fc2.g", 1}};
      want_b = {{"all_reduce self_attention.linear_qkv.f", 1}, {"all_reduce mlp.linear_fc1.f", 1}};
    } else {
      want_f = {{"all_gather self_attention.linear_qkv.ag", 1},
                {"all_gather mlp.linear_fc1.ag", 1},
                {"reduce_scatter self_attention.linear_proj.rs", 1},
                {"reduce_scatter mlp.linear_fc2.rs", 1}};
      want_b = {
          {"reduce_scatter self_attention.linear_qkv.ag", 1},   {"reduce_scatter mlp.linear_fc1.ag", 1},
          {"all_gather self_attention.linear_proj.rs", 1},      {"all_gather mlp.linear_fc2.rs", 1},
          {"all_gather self_attention.linear_qkv.ag_wgrad", 1}, {"all_gather mlp.linear_fc1.ag_wgrad", 1}};
    }
    expect(pattern(fwd, L) == want_f, "forward pattern of layer 1 differs");
    expect(pattern(bwd, L) == want_b, "backward pattern of layer 1 differs");
    for (const auto& recs : {fwd, bwd})
      for (const trace::CommRecord& r : recs)
        if (r.label.rfind(L, 0) == 0)
          expect(r.tensor_bytes == sbh, r.label + " moved a tensor that is not [s, b, h]");

    const auto ce = pattern(fwd, "cross_entropy");
    expect(ce == std::map<std::string, int>{{"all_reduce .max", 1},
                                            {"all_reduce .predicted_logit", 1},
                                            {"all_reduce .sum_exp", 1}},
           "cross entropy forward is not 3 all-reduces");
    expect(pattern(bwd, "cross_entropy").empty(), "cross entropy backward communicated");
    for (const trace::CommRecord& r : fwd)
      if (r.label.rfind("cross_entropy", 0) == 0)
        expect(r.tensor_bytes == 12 * 2 * 4, r.label + ": not [s·b] floats");
  };
  const std::string f = failures(run_ranks(2, fn, 60));
  CHECK_MESSAGE(f.empty(), f);
}

}  // namespace

TEST_CASE("communication pattern per layer without SP: 2 all-reduces each way") {
  check_pattern(false);
}
TEST_CASE("communication pattern per layer with SP: all-gathers and reduce-scatters") {
  check_pattern(true);
}

TEST_CASE("bad layouts are refused with a clear error before any collective") {
  auto fn = [](int) {
    auto world = comm::init_from_env();
    auto message = [](const std::function<void()>& f) {
      try {
        f();
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    };
    expect(message([&] { ParallelState bad(world, 4); }).find("world_size=2 is not divisible by tp=4") !=
               std::string::npos,
           "dp*tp != world not refused clearly");
    ParallelState ps(world, 2);
    const std::size_t before = world->recorder().size();
    GPTConfig c = cfg();
    c.heads = 3;
    expect(message([&] { model::ParallelGPT g(c, 1, ps, {}); }) == "heads=3 is not divisible by tp=2",
           "heads % tp");
    c = cfg();
    c.ffn = 49;
    c.heads = 4;
    expect(message([&] { model::ParallelGPT g(c, 1, ps, {}); }) == "ffn=49 is not divisible by tp=2",
           "ffn % tp");
    model::ParallelGPT gpt(cfg(), 1, ps, {.sequence_parallel = true});
    TokenBatch ids, targets;
    make_batch(2, 11, 37, 0, ids, targets);
    expect(message([&] {
             gpt.forward(ids, targets);
           }).rfind("sequence parallelism: s=11 is not divisible by tp=2", 0) == 0,
           "s % tp under SP");
    make_batch(2, 12, 37, 0, ids, targets);
    ids.ids[5] = 37;
    expect(
        message([&] { gpt.forward(ids, targets); }) == "input ids: token id 37 at [0, 5] is outside [0, 37)",
        "ids out of range");
    expect(world->recorder().size() == before, "a collective ran before the error");
  };
  const std::string f = failures(run_ranks(2, fn, 60));
  CHECK_MESSAGE(f.empty(), f);
}
