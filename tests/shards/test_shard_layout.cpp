// tpsp-shards' layout (tools/shards/layout.h) against the engine itself and against hand-written
// numbers. Oracles: a real ParallelGPT's layer-0 parameters on forked Gloo ranks at tp=2 (each shard's
// shape, and its values equal to the whole initialised tensor cut at the layout's ranges, exactly), a
// real TransformerLayer forward on those shards (every LayerSaved tensor's shape and the output's), and
// the ranges of the lessons' small layer written out by hand (h=8, 4 heads, ffn=32, s=8, b=1, tp=2); the
// same for the Llama block (a ParallelGPT of llama_config, its fused weights built from the unfused
// parts as ParallelGPT draws them, and a LlamaLayer forward), with groups below, at and above tp.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <tuple>

#include "engine/comm/env.h"
#include "engine/error.h"
#include "engine/model/gpt.h"
#include "engine/model/llama_layer.h"
#include "engine/model/transformer_layer.h"
#include "engine/parallel_state.h"
#include "engine/random/init.h"
#include "tests/support/ranks.h"
#include "tools/shards/layout.h"

using namespace tpsp;
using namespace tpsp::testing;

namespace {

/// The lessons' small layer: h=8, 4 heads, ffn=4h=32, s=8, b=1 (tpsp-shards' defaults), with a second
/// micro-batch row when `batch` is 2.
shards::LayoutConfig small(int tp, bool sp, int64_t batch = 1) {
  shards::LayoutConfig c;
  c.gpt.vocab = 16;
  c.gpt.layers = 1;
  c.gpt.hidden = 8;
  c.gpt.heads = 4;
  c.gpt.seq = 8;
  c.batch = batch;
  c.tp = tp;
  c.sequence_parallel = sp;
  return c;
}

const shards::TensorLayout& find(const std::vector<shards::TensorLayout>& layout, const std::string& name) {
  for (const auto& t : layout)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor '" + name + "' in the layout");
}

/// whole[start:stop] on every dim for each of the rank's boxes, concatenated along the split dim.
Tensor cut(const Tensor& whole, const shards::RankSlice& s, const Placement& placement) {
  std::vector<Tensor> parts;
  for (const shards::Box& box : s.boxes) {
    Tensor t = whole;
    for (std::size_t d = 0; d < box.start.size(); ++d)
      t = t.narrow_copy(static_cast<int64_t>(d), box.start[d], box.stop[d] - box.start[d]);
    parts.push_back(t);
  }
  return parts.size() == 1 ? parts[0] : cat(parts, placement.dim);
}

/// Every (layout name, the layer's tensor) of `seen` has rank r's shape in the layout.
void expect_shapes(const std::vector<shards::TensorLayout>& layout, int r,
                   const std::vector<std::pair<std::string, const Tensor*>>& seen) {
  for (const auto& [name, t] : seen)
    expect(t->shape() == find(layout, name).ranks[r].shape, name + ": the layer's tensor is " +
                                                                shape_str(t->shape()) + ", the layout says " +
                                                                shape_str(find(layout, name).ranks[r].shape));
}

/// Layer 0's parameter shards of `gpt` on rank r against the layout: each shard's shape, and for the
/// tensors whole_of(t, full name) draws (an undefined tensor: none), its values equal the whole tensor
/// cut at the layout's boxes. Fills params and grads (zeros) under the full names; returns how many
/// weights the layout lists.
int check_layer0_shards(
    model::ParallelGPT& gpt, const std::vector<shards::TensorLayout>& layout, int r,
    const std::function<Tensor(const shards::TensorLayout&, const std::string&)>& whole_of,
    std::map<std::string, Tensor>& params, std::map<std::string, Tensor>& grads) {
  int weights = 0;
  for (const auto& t : layout) {
    if (t.kind != "weight") continue;
    ++weights;
    const std::string full = "decoder.layers.0." + t.name;
    const Tensor& p = gpt.params().at(full);
    expect(p.shape() == t.ranks[r].shape, t.name + ": the model's shard is " + shape_str(p.shape()) +
                                              ", the layout says " + shape_str(t.ranks[r].shape));
    params[full] = p;
    grads[full] = Tensor(p.shape());
    const Tensor whole = whole_of(t, full);
    if (!whole.defined()) continue;
    const Tensor want = cut(whole, t.ranks[r], t.placement);
    for (int64_t i = 0; i < p.numel(); ++i)
      expect(p.at(i) == want.at(i), t.name + ": rank " + std::to_string(r) +
                                        "'s shard is not the whole weight at the layout's boxes (element " +
                                        std::to_string(i) + ")");
  }
  return weights;
}

/// Layer 0 of a ParallelGPT at tp (SP on or off) on forked ranks: every parameter's shard against the
/// layout (shape; for the four weight matrices, values too), then a TransformerLayer forward on
/// those shards and every saved activation's shape against the layout.
void check_against_engine(int tp, bool sp) {
  auto fn = [tp, sp](int) {
    const shards::LayoutConfig lc = small(tp, sp, 2);
    const auto layout = shards::layer_layout(lc);
    ParallelState ps(comm::init_from_env(), tp);
    const int r = ps.tp_rank();
    model::ParallelGPT gpt(lc.gpt, 3, ps, {.sequence_parallel = sp});
    std::map<std::string, Tensor> params, grads;
    const auto draw = [&](const shards::TensorLayout& t, const std::string& full) {
      if (!t.name.ends_with(".weight") || t.layer == "LayerNorm") return Tensor();
      const bool scaled = t.name.ends_with("linear_proj.weight") || t.name.ends_with("linear_fc2.weight");
      Tensor whole(t.global_shape);  // ParallelGPT::init_parameters' whole tensor (1 layer)
      random::init_normal(whole, 3, full, scaled ? lc.gpt.init_std / std::sqrt(2.f) : lc.gpt.init_std);
      return whole;
    };
    const int weights = check_layer0_shards(gpt, layout, r, draw, params, grads);
    expect_eq(weights, 12, "layer-0 parameters in the layout");

    model::TransformerLayer layer(lc.gpt, 0, params, grads, sp);
    const auto& x_layout = find(layout, "x");
    Tensor x(x_layout.ranks[r].shape);
    random::init_normal(x, 6, "x", 1.f);
    const model::LayerContext ctx{&ps.tp(), sp, 1, 0, lc.gpt.seq, lc.batch, Tensor(), {}};
    model::LayerSaved saved;
    const Tensor y = layer.forward(x, saved, ctx);
    const std::vector<std::pair<std::string, const Tensor*>> seen{{"x", &saved.x_in},
                                                                  {"ln1", &saved.ln1.y},
                                                                  {"qkv", &saved.qkv},
                                                                  {"attention_probs", &saved.attn.probs},
                                                                  {"attention_out", &saved.attn.out},
                                                                  {"fc1", &saved.fc1},
                                                                  {"gelu", &saved.fc2_in.input},
                                                                  {"y", &y}};
    expect_shapes(layout, r, seen);
  };
  const std::string f = failures(run_ranks(tp, fn, 60));
  CHECK_MESSAGE(f.empty(), f);
}

/// The lessons' small layer as the Llama block with `groups` key/value groups.
shards::LayoutConfig small_llama(int tp, bool sp, int64_t groups, int64_t batch = 1) {
  shards::LayoutConfig c = small(tp, sp, batch);
  c.gpt = llama_config(16, 8, 8, 4, groups, 1, 0);
  return c;
}

/// check_against_engine for the Llama block: ParallelGPT's layer-0 shards equal the whole FUSED weights
/// (fuse_llama_weight of the unfused parts drawn as init_parameters draws them) cut at the layout's boxes,
/// and a LlamaLayer forward's saved tensors have the layout's shapes on every rank.
void check_llama_against_engine(int tp, bool sp, int64_t groups) {
  auto fn = [tp, sp, groups](int) {
    const shards::LayoutConfig lc = small_llama(tp, sp, groups, 2);
    const auto layout = shards::layer_layout(lc);
    ParallelState ps(comm::init_from_env(), tp);
    const int r = ps.tp_rank();
    model::ParallelGPT gpt(lc.gpt, 3, ps, {.sequence_parallel = sp});
    std::map<std::string, Shape> unfused;
    for (const auto& [name, shape] : gpt_parameter_shapes(lc.gpt)) unfused[name] = shape;
    const auto draw = [&](const std::string& name) {
      const bool scaled = name.ends_with("linear_proj.weight") || name.ends_with("linear_fc2.weight");
      Tensor whole(unfused.at(name));
      random::init_normal(whole, 3, name, scaled ? lc.gpt.init_std / std::sqrt(2.f) : lc.gpt.init_std);
      return whole;
    };
    std::map<std::string, Tensor> params, grads;
    const auto whole_of = [&](const shards::TensorLayout& t, const std::string& full) {
      if (t.layer == "RMSNorm") return Tensor();
      const bool fused = t.name.ends_with("linear_qkv.weight") || t.name.ends_with("linear_fc1.weight");
      return fused ? model::fuse_llama_weight(full, model::llama_layer_config(lc.gpt), draw) : draw(full);
    };
    check_layer0_shards(gpt, layout, r, whole_of, params, grads);
    model::LlamaLayer layer(model::llama_layer_config(lc.gpt), "decoder.layers.0.", params, grads, tp, sp);
    Tensor x(find(layout, "x").ranks[r].shape);
    random::init_normal(x, 6, "x", 1.f);
    const model::LayerContext ctx{&ps.tp(), sp, 1, 0, lc.gpt.seq, lc.batch, Tensor(), {}};
    model::LlamaLayerSaved saved;
    const Tensor y = layer.forward(x, saved, ctx);
    const std::vector<std::pair<std::string, const Tensor*>> seen{{"x", &saved.x_in},
                                                                  {"ln1", &saved.ln1.y},
                                                                  {"q", &saved.q_raw},
                                                                  {"k", &saved.k_raw},
                                                                  {"v", &saved.v},
                                                                  {"attention_probs", &saved.attn.probs},
                                                                  {"attention_out", &saved.attn.out},
                                                                  {"fc1", &saved.gate_up},
                                                                  {"swiglu", &saved.fc2_in.input},
                                                                  {"y", &y}};
    expect_shapes(layout, r, seen);
    // The fused QKV linear's output is not kept; its width is the local weight's rows.
    expect(find(layout, "qkv").ranks[r].shape.back() ==
               params.at("decoder.layers.0.self_attention.linear_qkv.weight").size(0),
           "qkv: the layout's width differs from the local fused weight's rows");
  };
  const std::string f = failures(run_ranks(tp, fn, 60));
  CHECK_MESSAGE(f.empty(), f);
}

std::vector<int64_t> v(std::initializer_list<int64_t> x) {
  return x;
}

}  // namespace

TEST_CASE("the layout equals a ParallelGPT's layer-0 shards and a TransformerLayer's activations at tp=2") {
  check_against_engine(2, false);
}

TEST_CASE(
    "the layout equals a ParallelGPT's layer-0 shards and a TransformerLayer's activations at tp=2, SP") {
  check_against_engine(2, true);
}

TEST_CASE("the lessons' layer at tp=2: ranges written out by hand (h=8, ffn=32, s=8)") {
  const auto no_sp = shards::layer_layout(small(2, false));
  const auto& qkv_w = find(no_sp, "self_attention.linear_qkv.weight");  // [3h, h] = [24, 8]
  CHECK(qkv_w.layer == "ColumnParallelLinear");
  CHECK(qkv_w.ranks[1].boxes[0].start == v({12, 0}));
  CHECK(qkv_w.ranks[1].boxes[0].stop == v({24, 8}));
  const auto& fc2_w = find(no_sp, "mlp.linear_fc2.weight");  // [h, ffn] = [8, 32]
  CHECK(fc2_w.layer == "RowParallelLinear");
  CHECK(fc2_w.ranks[0].boxes[0].start == v({0, 0}));
  CHECK(fc2_w.ranks[0].boxes[0].stop == v({8, 16}));
  CHECK(fc2_w.ranks[1].boxes[0].start == v({0, 16}));
  CHECK(find(no_sp, "mlp.linear_fc2.bias").ranks[1].boxes[0].stop == v({8}));  // replicated
  CHECK(find(no_sp, "x").ranks[1].boxes[0].start == v({0, 0, 0}));
  CHECK(find(no_sp, "x").ranks[1].boxes[0].stop == v({8, 1, 8}));
  CHECK(find(no_sp, "fc1").ranks[1].boxes[0].start == v({0, 0, 16}));  // [s, b, 4h/tp]
  CHECK(find(no_sp, "fc1").ranks[1].boxes[0].stop == v({8, 1, 32}));
  CHECK(find(no_sp, "attention_probs").ranks[1].boxes[0].start == v({0, 2, 0, 0}));  // heads 2, 3

  const auto sp = shards::layer_layout(small(2, true));
  CHECK(find(sp, "x").ranks[1].boxes[0].start == v({4, 0, 0}));  // [s/tp, b, h]
  CHECK(find(sp, "x").ranks[1].boxes[0].stop == v({8, 1, 8}));
  CHECK(find(sp, "y").ranks[0].boxes[0].stop == v({4, 1, 8}));
  CHECK(find(sp, "qkv").ranks[0].boxes[0].stop == v({8, 1, 12}));  // QKV runs on all s tokens
}

TEST_CASE("the Llama layout equals a ParallelGPT's layer-0 shards and a LlamaLayer's activations") {
  for (const auto& [tp, sp, groups] :
       {std::tuple{2, false, 1}, std::tuple{2, true, 1}, std::tuple{2, true, 2}, std::tuple{2, false, 4},
        std::tuple{4, true, 2}}) {
    CAPTURE(tp);
    CAPTURE(sp);
    CAPTURE(groups);
    check_llama_against_engine(tp, sp, groups);
  }
}

TEST_CASE("the lessons' Llama layer at tp=4, 2 groups: stride-2 fc1 and k/v over groups, by hand") {
  const auto l = shards::layer_layout(small_llama(4, false, 2));
  using Boxes = std::vector<shards::Box>;
  // fc1 [2·ffn, h] = [64, 8]: rank 1 holds gate rows 8-15 and up rows 40-47.
  const auto& fc1_w = find(l, "mlp.linear_fc1.weight");
  CHECK(fc1_w.placement == Placement::Shard(0, 2));
  CHECK(fc1_w.ranks[1].boxes == Boxes{{v({8, 0}), v({16, 8})}, {v({40, 0}), v({48, 8})}});
  CHECK(fc1_w.ranks[1].shape == Shape{16, 8});
  // Its output [s, b, 2·ffn]: [gate_r | up_r] along the last dim.
  CHECK(find(l, "fc1").ranks[3].boxes ==
        Boxes{{v({0, 0, 24}), v({8, 1, 32})}, {v({0, 0, 56}), v({8, 1, 64})}});
  // Fused QKV [groups·(heads/groups + 2)·d, h] = [2·4·2, 8] = [16, 8]: an even split of 4 rows per rank.
  CHECK(find(l, "self_attention.linear_qkv.weight").ranks[2].boxes == Boxes{{v({8, 0}), v({12, 8})}});
  // k [s, b, groups·d] = [8, 1, 4]: ranks 0 and 1 hold group 0's columns 0-1, ranks 2 and 3 group 1's.
  const auto& k = find(l, "k");
  CHECK(k.placement == Placement::ShardOverGroups(2, 2));
  for (int r = 0; r < 4; ++r)
    CHECK(k.ranks[r].boxes == Boxes{{v({0, 0, 2 * (r / 2)}), v({8, 1, 2 * (r / 2) + 2})}});
  CHECK(find(l, "q").ranks[3].boxes == Boxes{{v({0, 0, 6}), v({8, 1, 8})}});  // head 3 of 4
  const auto json = shards::to_json(small_llama(4, false, 2), l);
  CHECK(json["config"]["model"] == "llama");
  CHECK(json["config"]["query_groups"] == 2);
  for (const auto& t : json["tensors"])
    if (t["name"] == "mlp.linear_fc1.weight") CHECK(t["placement"] == "Shard(0, stride=2)");
}

TEST_CASE("tpsp-shards refuses a layout the engine refuses, naming the rule") {
  shards::LayoutConfig c = small(2, false);
  c.gpt.heads = 2;
  c.tp = 4;
  c.gpt.hidden = 8;
  CHECK_THROWS_WITH_AS(shards::layer_layout(c), "heads=2 is not divisible by tp=4", ShapeError);
  c = small(2, true);
  c.gpt.seq = 7;
  CHECK_THROWS_WITH_AS(shards::layer_layout(c),
                       "s=7 is not divisible by tp=2 (sequence parallelism splits the sequence)", ShapeError);
  CHECK_THROWS_AS(shards::slice_of({4097, 4097}, Placement::Replicate(), 0, 1), ShapeError);
  CHECK_THROWS_WITH_AS(shards::layer_layout(small_llama(4, false, 3)),
                       doctest::Contains("num_query_groups=3"), ShapeError);
}
