// The tensor-parallel Llama layer (engine/model/llama_layer.h: fused per-group QKV, stride-2 fused fc1)
// against the single-process reference with UNFUSED weights (reference/llama_layer.h), element by element:
// the output, dx and every parameter gradient on every rank, at tp = 1, 2, 4 (and 3), SP off and on, key/
// value groups above, equal to and below tp (whole groups per rank, or tp/groups ranks sharing one through
// the gathered QKV activation), qk_layernorm, packed sequences with restarting positions. Gradients of
// replicated norm weights are this rank's share where the layer says so (SP; q/k_layernorm always) and are
// summed over TP here as Megatron's finalize_model_grads does. Tolerance: both sides are float32 with the
// same ops; TP splits GEMM sums (proj, fc2, dX) into per-rank partials added by the collectives, a
// reassociation of ≤ 24-term O(1) sums: ≤ 1e-6 relative measured, 2e-5 allowed.
#include <doctest/doctest.h>

#include <numeric>

#include "engine/comm/process_group.h"
#include "engine/error.h"
#include "engine/model/llama_layer.h"
#include "reference/llama_layer.h"
#include "tests/ops/helpers.h"
#include "tests/tp/tp_util.h"

using namespace tpsp;
using namespace tpsp::testing;

namespace {

struct Layout {
  int tp;
  int64_t heads, groups;
  bool sp, qk_layernorm, packed;
};

reference::LlamaLayerSpec spec_of(const Layout& l) {
  reference::LlamaLayerSpec spec;
  spec.hidden = l.heads * 4;
  spec.heads = l.heads;
  spec.query_groups = l.groups;
  spec.ffn = 24;
  spec.qk_layernorm = l.qk_layernorm;
  if (l.packed) {
    spec.cu_seqlens = {0, 5, 12};
    spec.positions = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6};
  }
  return spec;
}

model::LlamaLayerConfig config_of(const reference::LlamaLayerSpec& s) {
  return {.hidden = s.hidden,
          .heads = s.heads,
          .num_query_groups = s.query_groups,
          .ffn = s.ffn,
          .norm_eps = s.norm_eps,
          .rotary_base = s.rotary_base,
          .qk_layernorm = s.qk_layernorm};
}

/// The whole unfused parameters: matrices U(−0.4, 0.4), norm weights U(0.8, 1.2).
reference::ParamMap whole_params(const reference::LlamaLayerSpec& spec) {
  reference::ParamMap P;
  uint32_t seed = 300;
  for (const auto& [name, shape] : reference::llama_layer_parameter_shapes(spec, ""))
    P[name] = name.find("layernorm") != std::string::npos ? test::rand_tensor(shape, seed++, 0.8f, 1.2f)
                                                          : test::rand_tensor(shape, seed++, -0.4f, 0.4f);
  return P;
}

Tensor rows_of(const Tensor& t, bool sp, int r, int tp) {
  if (!sp) return t;
  const int64_t n = t.size(0) / tp;
  return t.slice0(r * n, (r + 1) * n).clone();
}

/// Runs the layout on tp forked ranks; each rank compares its y, dx and gradients with the reference.
std::string run_layout(const Layout& l) {
  const reference::LlamaLayerSpec spec = spec_of(l);
  const model::LlamaLayerConfig cfg = config_of(spec);
  const int64_t s = 12, b = l.packed ? 1 : 2;
  const Tensor x = test::rand_tensor({s, b, spec.hidden}, 41),
               dy = test::rand_tensor({s, b, spec.hidden}, 42);
  const reference::ParamMap W = whole_params(spec);
  reference::ParamMap ref_grads;
  for (const auto& [name, t] : W) ref_grads[name] = Tensor(t.shape());
  reference::LlamaLayerActs acts;
  const Tensor y_ref = reference::llama_layer_forward(x, W, "", spec, acts);
  const Tensor dx_ref = reference::llama_layer_backward(dy, W, "", spec, acts, ref_grads);
  auto body = [&](int) {
    auto tp = comm::init_from_env();
    const int r = tp->rank(), n = tp->size();
    std::map<std::string, Tensor> P = model::shard_llama_layer(W, cfg, "", r, n), G;
    for (const auto& [name, t] : P) G[name] = Tensor(t.shape());
    model::LlamaLayer layer(cfg, "", P, G, n, l.sp);
    const model::LayerContext ctx{tp.get(), l.sp, 0, 0, s, b, Tensor(), spec.cu_seqlens};
    model::LlamaLayerSaved saved;
    const Tensor y = layer.forward(rows_of(x, l.sp, r, n), saved, ctx, spec.positions);
    const Tensor dx = layer.backward(rows_of(dy, l.sp, r, n), saved, ctx);
    const double rtol = 2e-5, atol = 2e-5;
    expect_close(y, rows_of(y_ref, l.sp, r, n), rtol, atol, "y");
    expect_close(dx, rows_of(dx_ref, l.sp, r, n), rtol, atol, "dx");
    const std::map<std::string, Tensor> want = model::shard_llama_layer(ref_grads, cfg, "", r, n);
    for (auto& [name, g] : G) {
      const bool partial = name.find("self_attention.q_layernorm") == 0 ||
                           name.find("self_attention.k_layernorm") == 0 ||
                           (l.sp && name.find("layernorm") != std::string::npos);
      if (partial) tp->all_reduce(g);  // finalize_model_grads
      expect_close(g, want.at(name), rtol, atol, "gradient of " + name);
    }
  };
  return failures(run_ranks(l.tp, body, 60));
}

}  // namespace

TEST_CASE("llama layer: TP (+SP) equals the unfused reference, groups above, equal to and below tp") {
  for (const Layout l : {Layout{1, 4, 2, false, false, false}, Layout{2, 4, 2, false, false, false},
                         Layout{2, 4, 2, true, false, false}, Layout{2, 4, 4, true, false, false},
                         Layout{2, 4, 1, false, false, false}, Layout{2, 4, 1, true, true, false},
                         Layout{4, 4, 2, true, false, false}, Layout{4, 4, 2, false, true, false},
                         Layout{4, 4, 1, true, false, false}, Layout{4, 4, 4, false, false, false},
                         Layout{3, 6, 3, true, true, false}, Layout{3, 6, 6, false, false, false}}) {
    CAPTURE(l.tp);
    CAPTURE(l.groups);
    CAPTURE(l.sp);
    CAPTURE(l.qk_layernorm);
    const std::string f = run_layout(l);
    CHECK_MESSAGE(f.empty(), f);
  }
}

TEST_CASE("llama layer: packed sequences with restarting positions, under SP, groups below tp") {
  for (const Layout l : {Layout{2, 4, 1, true, false, true}, Layout{4, 4, 2, true, true, true}}) {
    CAPTURE(l.tp);
    const std::string f = run_layout(l);
    CHECK_MESSAGE(f.empty(), f);
  }
}

TEST_CASE(
    "llama layer: a contiguous split of the fused [W_gate; W_up] is caught (rank 0 would get only gate)") {
  const reference::LlamaLayerSpec spec = spec_of({2, 4, 2, false, false, false});
  const model::LlamaLayerConfig cfg = config_of(spec);
  const reference::ParamMap W = whole_params(spec);
  reference::LlamaLayerActs acts;
  const Tensor x = test::rand_tensor({4, 1, spec.hidden}, 43);
  const Tensor y_ref = reference::llama_layer_forward(x, W, "", spec, acts);
  auto body = [&](int) {
    auto tp = comm::init_from_env();
    const int r = tp->rank();
    std::map<std::string, Tensor> P = model::shard_llama_layer(W, cfg, "", r, 2), G;
    const Tensor fused = cat({W.at("mlp.linear_gate.weight"), W.at("mlp.linear_up.weight")}, 0);
    P["mlp.linear_fc1.weight"] = fused.narrow_copy(0, r * spec.ffn, spec.ffn);  // the wrong, contiguous split
    for (const auto& [name, t] : P) G[name] = Tensor(t.shape());
    model::LlamaLayer layer(cfg, "", P, G, 2, false);
    const model::LayerContext ctx{tp.get(), false, 0, 0, 4, 1, Tensor(), {}};
    model::LlamaLayerSaved saved;
    bool differs = false;
    try {
      expect_close(layer.forward(x, saved, ctx), y_ref, 2e-5, 2e-5, "y");
    } catch (const std::runtime_error&) {
      differs = true;
    }
    expect(differs, "a contiguous split of [W_gate; W_up] gave the reference's output");
  };
  const std::string f = failures(run_ranks(2, body, 60));
  CHECK_MESSAGE(f.empty(), f);
}

TEST_CASE(
    "llama layer config: groups dividing neither way with tp, heads % groups, odd head_dim are ShapeErrors") {
  model::LlamaLayerConfig cfg{.hidden = 24, .heads = 6, .num_query_groups = 3, .ffn = 24};
  CHECK_NOTHROW(cfg.validate(3));
  CHECK_THROWS_WITH_AS(cfg.validate(2),
                       doctest::Contains("num_query_groups=3 and tp=2: one must divide the other"),
                       ShapeError);
  cfg.num_query_groups = 4;
  CHECK_THROWS_WITH_AS(cfg.validate(1), doctest::Contains("heads=6 is not divisible by num_query_groups=4"),
                       ShapeError);
  cfg = {.hidden = 18, .heads = 6, .num_query_groups = 6, .ffn = 24};
  CHECK_THROWS_WITH_AS(cfg.validate(1), doctest::Contains("head_dim=3 is odd"), ShapeError);
  cfg = {.hidden = 24, .heads = 6, .num_query_groups = 1, .ffn = 24};
  CHECK_THROWS_WITH_AS(cfg.validate(3),
                       doctest::Contains("fused QKV weight's 32 rows are not divisible by tp=3"), ShapeError);
}
