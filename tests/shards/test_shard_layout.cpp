// tpsp-shards' layout (tools/shards/layout.h) against the engine itself and against hand-written
// numbers. Oracles: a real ParallelGPT's layer-0 parameters on forked Gloo ranks at tp=2 (each shard's
// shape, and its values equal to the whole initialised tensor cut at the layout's ranges, exactly), a
// real TransformerLayer forward on those shards (every LayerSaved tensor's shape and the output's), and
// the ranges of the lessons' small layer written out by hand (h=8, 4 heads, ffn=32, s=8, b=1, tp=2).
#include <doctest/doctest.h>

#include <cmath>

#include "engine/comm/env.h"
#include "engine/error.h"
#include "engine/model/gpt.h"
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

/// whole[start:stop] on every dim.
Tensor cut(const Tensor& whole, const shards::RankSlice& s) {
  Tensor t = whole;
  for (std::size_t d = 0; d < s.start.size(); ++d)
    t = t.narrow_copy(static_cast<int64_t>(d), s.start[d], s.stop[d] - s.start[d]);
  return t;
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
      if (!t.name.ends_with(".weight") || t.layer == "LayerNorm") continue;
      const bool scaled = t.name.ends_with("linear_proj.weight") || t.name.ends_with("linear_fc2.weight");
      Tensor whole(t.global_shape);  // ParallelGPT::init_parameters' whole tensor (1 layer)
      random::init_normal(whole, 3, full, scaled ? lc.gpt.init_std / std::sqrt(2.f) : lc.gpt.init_std);
      const Tensor want = cut(whole, t.ranks[r]);
      for (int64_t i = 0; i < p.numel(); ++i)
        expect(p.at(i) == want.at(i),
               t.name + ": rank " + std::to_string(r) +
                   "'s shard is not the whole weight at the layout's ranges (element " + std::to_string(i) +
                   ")");
    }
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
    for (const auto& [name, t] : seen)
      expect(t->shape() == find(layout, name).ranks[r].shape,
             name + ": the layer's tensor is " + shape_str(t->shape()) + ", the layout says " +
                 shape_str(find(layout, name).ranks[r].shape));
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
  CHECK(qkv_w.ranks[1].start == v({12, 0}));
  CHECK(qkv_w.ranks[1].stop == v({24, 8}));
  const auto& fc2_w = find(no_sp, "mlp.linear_fc2.weight");  // [h, ffn] = [8, 32]
  CHECK(fc2_w.layer == "RowParallelLinear");
  CHECK(fc2_w.ranks[0].start == v({0, 0}));
  CHECK(fc2_w.ranks[0].stop == v({8, 16}));
  CHECK(fc2_w.ranks[1].start == v({0, 16}));
  CHECK(find(no_sp, "mlp.linear_fc2.bias").ranks[1].stop == v({8}));  // replicated
  CHECK(find(no_sp, "x").ranks[1].start == v({0, 0, 0}));
  CHECK(find(no_sp, "x").ranks[1].stop == v({8, 1, 8}));
  CHECK(find(no_sp, "fc1").ranks[1].start == v({0, 0, 16}));  // [s, b, 4h/tp]
  CHECK(find(no_sp, "fc1").ranks[1].stop == v({8, 1, 32}));
  CHECK(find(no_sp, "attention_probs").ranks[1].start == v({0, 2, 0, 0}));  // heads 2, 3

  const auto sp = shards::layer_layout(small(2, true));
  CHECK(find(sp, "x").ranks[1].start == v({4, 0, 0}));  // [s/tp, b, h]
  CHECK(find(sp, "x").ranks[1].stop == v({8, 1, 8}));
  CHECK(find(sp, "y").ranks[0].stop == v({4, 1, 8}));
  CHECK(find(sp, "qkv").ranks[0].stop == v({8, 1, 12}));  // QKV runs on all s tokens
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
}
