// The MoE router (engine/moe/router.h) and the reference MoE layer (reference/moe_layer.h) against
// PyTorch's float64 oracle (tools/goldens_moe.py: torch.topk, a softmax of the gathered logits, the
// Switch loss from bincount, autograd; the layer token by token where the reference groups by expert),
// then the closed forms the goldens cannot hold: tie-breaking, the loss's value on a collapsed routing,
// and the errors. Tolerances: docs/tolerances.md ("moe_router", "moe_layer").
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "engine/error.h"
#include "engine/moe/router.h"
#include "reference/moe_layer.h"
#include "tests/golden/golden_util.h"

using namespace tpsp;
using golden::case_params;
using golden::check_close;
using golden::load;
using golden::load_ints;
using golden::Tol;

TEST_CASE("golden: the top-k router, its load-balancing loss and dlogits") {
  const std::string c = "moe_router";
  const auto& p = case_params(c);
  const int64_t k = p.at("topk").get<int64_t>();
  const Tensor logits = load(c, "logits");
  const moe::Routing r = moe::topk_route(logits, k);
  CHECK(r.indices == load_ints(c, "indices"));
  CHECK(r.tokens_per_expert == load_ints(c, "tokens_per_expert"));
  // Softmax over ≤ 5 exponentials in double, rounded once: within an ulp or two of the float64 oracle.
  const Tol tol{2e-6, 1e-7};
  check_close(c + "/probs", r.probs, load(c, "probs"), tol);
  check_close(c + "/scores", r.scores, load(c, "scores"), tol);
  const moe::AuxLossTerms terms{r.tokens_per_expert, logits.size(0), k, p.at("coeff").get<float>()};
  check_close(c + "/aux", moe::switch_aux_loss(r.scores, terms), load(c, "aux").data()[0], tol);
  check_close(c + "/dlogits", moe::topk_route_backward(r, load(c, "dprobs"), terms, 1.f), load(c, "dlogits"),
              tol);
}

TEST_CASE("golden: the reference MoE layer forward+backward, routing skewed to one expert, one idle") {
  const std::string c = "moe_layer";
  const auto& p = case_params(c);
  const Tensor x = load(c, "x");
  reference::MoELayerSpec spec;
  spec.hidden = x.size(2);
  spec.ffn = p.at("ffn").get<int64_t>();
  spec.num_experts = p.at("num_experts").get<int64_t>();
  spec.topk = p.at("topk").get<int64_t>();
  spec.aux_loss_coeff = p.at("coeff").get<float>();
  reference::ParamMap params, grads;
  for (const auto& [name, shape] : reference::moe_layer_parameter_shapes(spec, "")) {
    params[name] = load(c, "w." + name);
    REQUIRE(params[name].shape() == shape);
    grads[name] = Tensor(shape);
  }
  reference::MoELayerActs acts;
  // GEMMs of ≤ 8 O(1) terms, SwiGLU, a 2-term weighted sum per token, a 4-way softmax in double.
  const Tol tol{1e-5, 2e-6};
  check_close(c + "/y", reference::moe_layer_forward(x, params, "", spec, acts), load(c, "y"), tol);
  CHECK(acts.routing.tokens_per_expert == load_ints(c, "tokens_per_expert"));
  CHECK(acts.choices[3].empty());  // the idle expert: zero rows through its GEMMs
  check_close(c + "/aux", acts.aux_loss, load(c, "aux").data()[0], tol);
  check_close(c + "/dx", reference::moe_layer_backward(load(c, "dy"), params, "", spec, acts, 1.f, grads),
              load(c, "dx"), tol);
  for (const auto& [name, g] : grads) check_close(c + "/g." + name, g, load(c, "g." + name), tol);
}

TEST_CASE("router: equal logits go to the lower expert, on every call") {
  const moe::Routing r = moe::topk_route(Tensor::from({3, 4}, {1, 1, 1, 0,    // three-way tie for 2 places
                                                               0, 2, 2, 2,    // the lower two of the three
                                                               5, 5, 5, 5}),  // all equal
                                         2);
  CHECK(r.indices == std::vector<int64_t>{0, 1, 1, 2, 0, 1});
  for (int64_t i = 0; i < 6; ++i) CHECK(r.probs.data()[i] == 0.5f);
  CHECK(r.tokens_per_expert == std::vector<int64_t>{2, 3, 1, 0});
  CHECK(moe::topk_route(Tensor::from({1, 3}, {0, 7, 7}), 1).indices == std::vector<int64_t>{1});
}

TEST_CASE("router: the load-balancing loss is E·coeff·p when every token picks one expert with score p") {
  // logits [ln 3, 0, 0, 0]: scores [1/2, 1/6, 1/6, 1/6], all 5 tokens on expert 0 (k = 1):
  // E·coeff/(k·T²)·(T·1/2)·T = 4·coeff·1/2 = 2·coeff. Balanced (one token per expert, uniform scores):
  // E·coeff/(1·E²)·Σ_e (E·1/E)·1 = coeff.
  const float ln3 = std::log(3.f), coeff = 0.01f;
  Tensor skew({5, 4});
  for (int64_t t = 0; t < 5; ++t) skew.at({t, 0}) = ln3;
  const moe::Routing r = moe::topk_route(skew, 1);
  CHECK(r.tokens_per_expert == std::vector<int64_t>{5, 0, 0, 0});
  CHECK(moe::switch_aux_loss(r.scores, {r.tokens_per_expert, 5, 1, coeff}) ==
        doctest::Approx(2 * coeff).epsilon(1e-6));
  Tensor balanced({4, 4});
  for (int64_t t = 0; t < 4; ++t) balanced.at({t, t}) = 1e-3f;  // a nudge picks expert t; scores ≈ uniform
  const moe::Routing b = moe::topk_route(balanced, 1);
  CHECK(b.tokens_per_expert == std::vector<int64_t>{1, 1, 1, 1});
  CHECK(moe::switch_aux_loss(b.scores, {b.tokens_per_expert, 4, 1, coeff}) ==
        doctest::Approx(coeff).epsilon(1e-6));
}

TEST_CASE("router and MoE layer refuse bad input naming the rule and the values") {
  CHECK_THROWS_WITH_AS(moe::topk_route(Tensor({4, 2}), 3),
                       doctest::Contains("moe_router_topk=3 is larger than num_moe_experts=2"), ShapeError);
  CHECK_THROWS_WITH_AS(moe::topk_route(Tensor({4, 2}), 0),
                       doctest::Contains("moe_router_topk=0 must be at least 1"), ShapeError);
  CHECK_THROWS_WITH_AS(moe::topk_route(Tensor({8}), 1),
                       doctest::Contains("logits must be [tokens, experts], got [8]"), ShapeError);
  Tensor nan({2, 3});
  nan.at({1, 2}) = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(moe::topk_route(nan, 1), doctest::Contains("token 1's logit for expert 2 is nan"),
                       ShapeError);
  for (const float inf : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    const Tensor t = Tensor::from({1, 3}, {inf, 1.f, 2.f});  // its softmax would be NaN
    CHECK_THROWS_WITH_AS(moe::topk_route(t, 2), doctest::Contains("token 0's logit for expert 0 is"),
                         ShapeError);
  }
  const moe::Routing r = moe::topk_route(Tensor({2, 3}), 2);
  CHECK_THROWS_WITH_AS(moe::topk_route_backward(r, Tensor({2, 3}), {r.tokens_per_expert, 2, 2, 0.f}, 1.f),
                       doctest::Contains("dprobs must be [2, 2] like the probs, got [2, 3]"), ShapeError);
  CHECK_THROWS_WITH_AS(moe::switch_aux_loss(r.scores, {{1, 1}, 2, 2, 0.f}),
                       doctest::Contains("tokens_per_expert has 2 entries, the router has 3 experts"),
                       ShapeError);
  reference::MoELayerSpec spec{8, 4, 2, 3, 0.f};
  CHECK_THROWS_WITH_AS(spec.validate(),
                       doctest::Contains("moe_router_topk=3 must be between 1 and num_moe_experts=2"),
                       ShapeError);
  // bf16 logits are routed as their float32 values.
  const moe::Routing h = moe::topk_route(Tensor::from({1, 3}, {0.5f, -1.f, 2.f}).to(DType::bf16), 2);
  CHECK(h.indices == std::vector<int64_t>{2, 0});
}
