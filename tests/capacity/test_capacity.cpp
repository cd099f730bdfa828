// The capacity formulas (engine/model/capacity.h) against the engine itself, and the seed's §6
// numbers. Oracles: a real ParallelGPT step on forked Gloo ranks (its parameters' nbytes,
// activation_bytes_per_layer() and every call in the communication recorder, in order, with label,
// op, tensor bytes and wire bytes), a bf16 TransformerLayer's LayerSaved::bytes() and records, and
// closed-form numbers written out by hand (Llama-70B sizes of seed §6). All comparisons are exact:
// these are integer byte counts; the one time check is a closed form at 1e-12 relative.
#include <doctest/doctest.h>

#include <sstream>

#include "engine/comm/env.h"
#include "engine/error.h"
#include "engine/model/capacity.h"
#include "engine/model/gpt.h"
#include "engine/model/sharding.h"
#include "engine/model/transformer_layer.h"
#include "engine/parallel_state.h"
#include "engine/random/init.h"
#include "tests/tp/tp_util.h"

using namespace tpsp;
using namespace tpsp::testing;

namespace {

constexpr uint64_t MiB = 1024 * 1024;

/// Seed §6: h = 8192, ffn = 28672, 64 heads, s = 4096, b = 1, bf16, tp = 8.
model::CapacityConfig llama70b(bool sp) {
  model::CapacityConfig c;
  c.gpt.hidden = 8192;
  c.gpt.ffn = 28672;
  c.gpt.heads = 64;
  c.gpt.layers = 80;
  c.gpt.vocab = 32000;
  c.gpt.seq = 4096;
  c.gpt.tied = false;
  c.batch = 1;
  c.tp = 8;
  c.sequence_parallel = sp;
  c.dtype = DType::bf16;
  return c;
}

/// A small GPT every layout below divides: tp 1, 2, 3 (the vocabulary 37 is padded), 4 with or
/// without SP (heads 12, ffn 48, s 12).
model::CapacityConfig small(int tp, bool sp, DType dtype = DType::f32) {
  model::CapacityConfig c;
  c.gpt.vocab = 37;
  c.gpt.seq = 12;
  c.gpt.hidden = 24;
  c.gpt.heads = 12;
  c.gpt.layers = 2;
  c.gpt.ffn = 48;
  c.batch = 2;
  c.tp = tp;
  c.sequence_parallel = sp;
  c.dtype = dtype;
  return c;
}

std::string line(const std::string& label, comm::OpKind op, uint64_t tensor_bytes, uint64_t bytes) {
  std::ostringstream os;
  os << label << " " << comm::op_name(op) << " S=" << tensor_bytes << " sent=" << bytes;
  return os.str();
}

/// The recorded calls as lines, in completion order (every call here is synchronous).
std::vector<std::string> recorded(const std::vector<trace::CommRecord>& recs) {
  std::vector<std::string> out;
  for (const trace::CommRecord& r : recs) out.push_back(line(r.label, r.op, r.tensor_bytes, r.bytes));
  return out;
}

/// The modelled calls of `phases` as lines, in order.
std::vector<std::string> modelled(const std::vector<model::CollectiveCall>& calls,
                                  const std::vector<std::string>& phases) {
  std::vector<std::string> out;
  for (const model::CollectiveCall& c : calls)
    if (std::find(phases.begin(), phases.end(), c.phase) != phases.end())
      out.push_back(line(c.label, c.op, c.tensor_bytes, c.wire_bytes));
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += "\n  " + x;
  return s;
}

void expect_same_calls(const std::vector<std::string>& got, const std::vector<std::string>& want,
                       const std::string& what) {
  expect(got == want, what + ": recorded" + join(got) + "\nmodelled" + join(want));
}

/// Parameter bytes of a ParallelGPT's shards on this rank: the whole model and layer 0.
std::pair<uint64_t, uint64_t> shard_bytes(model::ParallelGPT& gpt) {
  uint64_t total = 0, layer0 = 0;
  for (const auto& [name, p] : gpt.params()) {
    total += p.nbytes();
    if (name.rfind("decoder.layers.0.", 0) == 0) layer0 += p.nbytes();
  }
  return {total, layer0};
}

/// One ParallelGPT step of `cap` (f32): parameters (f32, and bf16 for a second model built beside it),
/// saved activations and every collective against the formulas.
void check_step(const model::CapacityConfig& cap) {
  const int tp = cap.tp;
  const bool sp = cap.sequence_parallel;
  auto fn = [&cap, tp, sp](int) {
    ParallelState ps(comm::init_from_env(), tp);
    model::ParallelGPT gpt(cap.gpt, 3, ps, {.sequence_parallel = sp});
    TokenBatch ids, targets;
    make_batch(cap.batch, cap.gpt.seq, cap.gpt.vocab, 0, ids, targets);

    const model::ParameterBytes pb = model::parameter_bytes(cap);
    expect_eq(shard_bytes(gpt).first, pb.total, "parameter bytes of the model on one rank");
    expect_eq(shard_bytes(gpt).second, pb.per_layer, "parameter bytes of layer 0 on one rank");
    {  // bf16 parameters (the constructor communicates nothing)
      model::CapacityConfig cap16 = cap;
      cap16.dtype = DType::bf16;
      model::ParallelGPT gpt16(cap.gpt, 3, ps, {.sequence_parallel = sp, .param_dtype = DType::bf16});
      expect_eq(shard_bytes(gpt16).first, model::parameter_bytes(cap16).total, "bf16 parameter bytes");
    }

    trace::Recorder& rec = ps.world().recorder();
    rec.clear();
    gpt.forward(ids, targets);
    const auto fwd = rec.records();
    rec.clear();
    gpt.backward();
    const auto bwd = rec.records();

    const uint64_t want = model::activation_bytes_per_layer(cap).total();
    for (std::size_t got : gpt.activation_bytes_per_layer())
      expect_eq(static_cast<uint64_t>(got), want, "activation bytes of a layer (ParallelGPT)");
    const auto calls = model::step_collectives(cap, comm::LinkModel{});
    expect_same_calls(recorded(fwd), modelled(calls, {"forward"}), "forward");
    expect_same_calls(recorded(bwd), modelled(calls, {"backward", "finalize_grads"}), "backward");
    for (const auto& recs : {fwd, bwd})
      for (const trace::CommRecord& r : recs) expect(r.group == "tp", r.label + " ran on " + r.group);
  };
  const std::string f = failures(run_ranks(tp, fn, 60));
  CHECK_MESSAGE(f.empty(), f);
}

/// One step of the small GPT at `tp` (+SP; optionally an untied output layer and label smoothing, which
/// widens the Σexp all-reduce).
void check_gpt_step(int tp, bool sp, bool untied_smoothed = false) {
  model::CapacityConfig cap = small(tp, sp);
  if (untied_smoothed) {
    cap.gpt.tied = false;
    cap.gpt.label_smoothing = 0.1f;
  }
  check_step(cap);
}

/// A small Llama block (h=32, 8 heads of 4, `groups` key/value groups, ffn 48, s 12, b 2, untied).
model::CapacityConfig small_llama(int tp, bool sp, int64_t groups, bool qk_layernorm) {
  model::CapacityConfig c;
  c.gpt = llama_config(37, 12, 32, 8, groups, 2, 48);
  c.gpt.qk_layernorm = qk_layernorm;
  c.batch = 2;
  c.tp = tp;
  c.sequence_parallel = sp;
  c.dtype = DType::f32;
  return c;
}

/// Layer 0 of the small GPT with bf16 parameters and a bf16 input (activations in bf16, LayerNorm
/// statistics and attention probabilities in f32 by the dispatch rule): one forward and backward,
/// LayerSaved::bytes() and the layer's recorded calls against the bf16 formulas.
void check_bf16_layer(int tp, bool sp) {
  auto fn = [tp, sp](int) {
    const model::CapacityConfig cap = small(tp, sp, DType::bf16);
    ParallelState ps(comm::init_from_env(), tp);
    std::map<std::string, Tensor> params, grads;
    for (const auto& [name, spec] : model::gpt_shard_specs(cap.gpt, tp, sp)) {
      if (name.rfind("decoder.layers.0.", 0) != 0) continue;
      Tensor whole(spec.global_shape);
      random::init_normal(whole, 5, name, 0.2f);
      params[name] = shard_of(whole, spec.placement, ps.tp_rank(), tp).to(DType::bf16);
      grads[name] = Tensor(params[name].shape());
    }
    model::TransformerLayer layer(cap.gpt, 0, params, grads, sp);
    Tensor x({cap.rows(), cap.batch, cap.gpt.hidden});
    random::init_normal(x, 6, "x", 1.f);
    const Tensor x16 = x.to(DType::bf16);
    const model::LayerContext ctx{&ps.tp(), sp, 1, 0, cap.gpt.seq, cap.batch, Tensor(), {}};
    trace::Recorder& rec = ps.world().recorder();
    rec.clear();
    model::LayerSaved saved;
    const Tensor y = layer.forward(x16, saved, ctx);
    expect(y.dtype() == DType::bf16, "the layer's output is not bf16");
    const auto fwd = rec.records();
    rec.clear();
    layer.backward(y, saved, ctx);
    const auto bwd = rec.records();

    expect_eq(static_cast<uint64_t>(saved.bytes()), model::activation_bytes_per_layer(cap).total(),
              "LayerSaved::bytes() of a bf16 layer");
    const auto calls = model::layer_collectives(cap, comm::LinkModel{});
    expect_same_calls(recorded(fwd), modelled(calls, {"forward"}), "bf16 layer forward");
    expect_same_calls(recorded(bwd), modelled(calls, {"backward"}), "bf16 layer backward");
  };
  const std::string f = failures(run_ranks(tp, fn, 60));
  CHECK_MESSAGE(f.empty(), f);
}

}  // namespace

TEST_CASE("seed §6: a bf16 [4096, 1, 8192] activation is 64 MiB, 8 MiB per rank with SP at tp=8") {
  CHECK(model::sbh_bytes(llama70b(false)) == 64 * MiB);
  CHECK(model::sbh_bytes_per_rank(llama70b(false)) == 64 * MiB);
  CHECK(model::sbh_bytes_per_rank(llama70b(true)) == 8 * MiB);
}

TEST_CASE(
    "seed §6: a layer's forward is 2 all-reduces of [s, b, h] without SP, the same bytes as 2 AG + 2 RS") {
  const auto tp_calls = model::layer_collectives(llama70b(false), comm::LinkModel{});
  const auto sp_calls = model::layer_collectives(llama70b(true), comm::LinkModel{});
  const auto tp_tot = model::totals_by_collective(tp_calls);
  const auto sp_tot = model::totals_by_collective(sp_calls);
  // without SP: forward 2 all_reduce of 64 MiB, each 2·7/8·64 = 112 MiB on the wire; backward the same
  REQUIRE(tp_tot.size() == 2);
  CHECK(tp_tot[0].phase == "forward");
  CHECK(tp_tot[0].op == comm::OpKind::all_reduce);
  CHECK(tp_tot[0].calls == 2);
  CHECK(tp_tot[0].tensor_bytes == 2 * 64 * MiB);
  CHECK(tp_tot[0].wire_bytes == 224 * MiB);
  CHECK(tp_tot[1].phase == "backward");
  CHECK(tp_tot[1].wire_bytes == 224 * MiB);
  // with SP: forward 2 all_gather + 2 reduce_scatter of 64 MiB, each 7/8·64 = 56 MiB: 224 MiB again;
  // backward 2 reduce_scatter + 4 all_gather (2 re-gather the inputs for the weight gradients): 336 MiB
  REQUIRE(sp_tot.size() == 4);
  uint64_t fwd = 0, bwd = 0;
  for (const model::CollectiveTotal& t : sp_tot) {
    CAPTURE(t.phase);
    CAPTURE(comm::op_name(t.op));
    const int64_t want_calls = t.phase == "backward" && t.op == comm::OpKind::all_gather ? 4 : 2;
    CHECK(t.calls == want_calls);
    CHECK(t.tensor_bytes == static_cast<uint64_t>(want_calls) * 64 * MiB);
    (t.phase == "forward" ? fwd : bwd) += t.wire_bytes;
  }
  CHECK(fwd == 224 * MiB);
  CHECK(bwd == 336 * MiB);
}

TEST_CASE("Llama-70B sizes at tp=8: activations and parameters per layer per rank, closed forms by hand") {
  // bf16; stats and probabilities f32. Without SP: 4·64 MiB (residual, LN outputs) + 24 (qkv) + 8
  // (attention out) + 512 (probabilities [1, 8, 4096, 4096] f32) + 2·28 (fc1, GELU) = 856 MiB, plus
  // 4·4096·4 B = 64 KiB of LN statistics. With SP the first and the statistics are /8.
  const model::ActivationBytes off = model::activation_bytes_per_layer(llama70b(false));
  const model::ActivationBytes on = model::activation_bytes_per_layer(llama70b(true));
  CHECK(off.total() == 856 * MiB + 64 * 1024);
  CHECK(on.total() == (856 - 224) * MiB + 8 * 1024);
  CHECK(on.probs == 512 * MiB);
  // parameters of a layer: (4h + 2h) replicated + (4h² + 3h + 2fh + f)/8, bf16
  const uint64_t h = 8192, f = 28672;
  CHECK(model::parameter_bytes(llama70b(true)).per_layer ==
        (6 * h + (4 * h * h + 3 * h + 2 * f * h + f) / 8) * 2);
}

TEST_CASE("ring-model time of a layer's collectives at a link, from cost_model's closed forms") {
  const comm::LinkModel link = comm::LinkModel::parse("2GB/s,50us");
  const auto calls = model::layer_collectives(llama70b(false), link);
  REQUIRE(calls.size() == 4);
  // all_reduce at n = 8: 2(n−1) = 14 steps of 50 µs + 2·7/8·64 MiB / 2e9 B/s
  const double want = 14 * 50e-6 + (2.0 * 7 / 8 * 64 * MiB) / 2e9;
  for (const model::CollectiveCall& c : calls) CHECK(c.seconds == doctest::Approx(want).epsilon(1e-12));
  for (const model::CollectiveCall& c : model::layer_collectives(llama70b(false), comm::LinkModel{}))
    CHECK(c.seconds == 0.0);
}

TEST_CASE("bad sizes are refused naming the rule and the values") {
  model::CapacityConfig c = llama70b(false);
  c.gpt.heads = 10;
  c.gpt.hidden = 8190;
  c.tp = 4;
  CHECK_THROWS_WITH_AS(model::activation_bytes_per_layer(c), "heads=10 is not divisible by tp=4",
                       tpsp::ShapeError);
  c = llama70b(false);
  c.gpt.ffn = 28670;
  CHECK_THROWS_WITH_AS(model::parameter_bytes(c), "ffn=28670 is not divisible by tp=8", tpsp::ShapeError);
  c = llama70b(true);
  c.gpt.seq = 4100;
  CHECK_THROWS_WITH_AS(model::layer_collectives(c, comm::LinkModel{}),
                       "sequence parallelism: s=4100 is not divisible by tp=8", tpsp::ShapeError);
  c = llama70b(false);
  c.batch = 0;
  CHECK_THROWS_WITH_AS(model::step_collectives(c, comm::LinkModel{}), "batch b=0 must be at least 1",
                       tpsp::ShapeError);
  c = llama70b(false);
  c.tp = 0;
  CHECK_THROWS_WITH_AS(model::parameter_bytes(c), "tp=0 must be at least 1", tpsp::ShapeError);
}

TEST_CASE("the formulas equal a ParallelGPT step at tp=1 (nothing communicated)") {
  check_gpt_step(1, false);
}
TEST_CASE("the formulas equal a ParallelGPT step at tp=2 without SP") {
  check_gpt_step(2, false);
}
TEST_CASE("the formulas equal a ParallelGPT step at tp=2 with SP") {
  check_gpt_step(2, true);
}
TEST_CASE("the formulas equal a ParallelGPT step at tp=3 with SP (vocabulary padded)") {
  check_gpt_step(3, true);
}
TEST_CASE("the formulas equal a ParallelGPT step at tp=4 without SP") {
  check_gpt_step(4, false);
}
TEST_CASE("the formulas equal a ParallelGPT step at tp=2 with SP, untied output, label smoothing") {
  check_gpt_step(2, true, true);
}
TEST_CASE("the bf16 formulas equal a bf16 TransformerLayer at tp=2 without SP") {
  check_bf16_layer(2, false);
}
TEST_CASE("the bf16 formulas equal a bf16 TransformerLayer at tp=2 with SP") {
  check_bf16_layer(2, true);
}

TEST_CASE("the Llama formulas equal a ParallelGPT step: whole groups, gathered groups, SP, qk_layernorm") {
  check_step(small_llama(1, false, 2, false));
  check_step(small_llama(2, false, 2, true));  // q/k_layernorm's gradients summed over TP without SP
  check_step(small_llama(2, true, 2, false));
  check_step(small_llama(4, true, 2, false));  // groups < tp: the QKV activation gathered
  check_step(small_llama(4, false, 1, true));
}

TEST_CASE("Llama-2-70B in the Llama block: 68,976,648,192 parameters, and its activations at tp=8 by hand") {
  model::CapacityConfig c;
  c.gpt = llama_config(32000, 4096, 8192, 64, 8, 80, 28672);
  c.dtype = DType::bf16;
  // Per layer: q and proj 2·h², k and v 2·h·(8·128), gate, up and down 3·h·ffn, two RMSNorms 2h; embeddings
  // and the untied output 2·V·h; the final RMSNorm h (Touvron et al. 2023's 70B).
  const uint64_t h = 8192, f = 28672, V = 32000, kv = 8 * 128;
  const uint64_t per_layer = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h;
  CHECK(per_layer == 855654400);
  CHECK(model::parameter_bytes(c).total == (80 * per_layer + 2 * V * h + h) * 2);
  CHECK(model::parameter_bytes(c).total / 2 == 68976648192ull);
  // tp = 8 keeps one group of 8 query heads: residual and norm outputs 4·64 MiB, q/k/v before and after
  // RoPE 2·10 MiB ([4096, 1, (8 + 2)·128] bf16), attention out 8, probabilities [1, 8, 4096, 4096] f32
  // 512, [gate | up] 56, SwiGLU 28: 880 MiB, plus 2·4096·4 B of rstd. With SP the first four are /8.
  c.tp = 8;
  CHECK(model::activation_bytes_per_layer(c).total() == 880 * MiB + 32 * 1024);
  c.sequence_parallel = true;
  CHECK(model::activation_bytes_per_layer(c).total() == 656 * MiB + 4 * 1024);
  CHECK(model::sbh_bytes_per_rank(c) == 8 * MiB);  // seed §6: 8 MiB per rank under SP at tp = 8
  c.sequence_parallel = false;
  CHECK(model::sbh_bytes(c) == 64 * MiB);
}

TEST_CASE(
    "Korthikanti et al. 2022 for GPT-3 175B at tp=8: 552 / 342 MiB per layer; this engine keeps 456 / 288") {
  model::CapacityConfig c;
  c.gpt.hidden = 12288;
  c.gpt.heads = 96;
  c.gpt.layers = 96;
  c.gpt.vocab = 50257;
  c.gpt.seq = 2048;
  c.batch = 1;
  c.tp = 8;
  c.dtype = DType::bf16;
  // sbh(10 + 24/8 + 5·96·2048/(12288·8)) = 23·sbh; with SP sbh/8·(34 + 80) = 14.25·sbh; sbh = 24 Mi.
  CHECK(model::korthikanti_bytes_per_layer(c) == 23ull * 24 * MiB);
  CHECK(model::activation_bytes_per_layer(c).total() == 456 * MiB + 32 * 1024);
  c.sequence_parallel = true;
  CHECK(model::korthikanti_bytes_per_layer(c) == 342ull * MiB);
  CHECK(model::activation_bytes_per_layer(c).total() == 288 * MiB + 4 * 1024);
}
