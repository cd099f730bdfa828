// A Llama layer whose MLP is an MoE layer (LlamaLayerConfig::num_moe_experts > 0: attention TP + SP as
// before, the MoE layer on each rank's sequence shard) against the single-process Llama layer with the
// reference MoE layer in its place: every rank's output rows and input gradient, the load-balancing loss
// summed over each replica's shards, and the MoE weights' gradients after finalize_moe_grads against the
// reference's batch mean, at EP × ETP layouts of 1, 2 and 4 ranks folded over TP × DP. (Attention's own
// gradients are the dense layer's, tested in tests/tp and by lab05.)
#include <doctest/doctest.h>

#include "engine/error.h"
#include "engine/model/finalize_grads.h"
#include "engine/model/finalize_moe_grads.h"
#include "engine/model/llama_layer.h"
#include "engine/ops/ops.h"
#include "engine/parallel_state.h"
#include "engine/random/init.h"
#include "reference/llama_layer.h"
#include "tests/support/local_backend.h"

using namespace tpsp;

namespace {

constexpr int64_t kS = 4, kB = 2, kH = 16, kHeads = 4, kGroups = 2, kE = 4, kK = 2, kF = 6;
constexpr float kCoeff = 0.1f;

model::LlamaLayerConfig config() {
  model::LlamaLayerConfig c;
  c.hidden = kH;
  c.heads = kHeads;
  c.num_query_groups = kGroups;
  c.qk_layernorm = true;
  c.num_moe_experts = kE;
  c.moe_router_topk = kK;
  c.moe_ffn_hidden_size = kF;
  c.moe_aux_loss_coeff = kCoeff;
  return c;
}

reference::LlamaLayerSpec spec() {
  reference::LlamaLayerSpec s;
  s.hidden = kH;
  s.heads = kHeads;
  s.query_groups = kGroups;
  s.qk_layernorm = true;
  s.moe = {kH, kF, kE, kK, kCoeff};
  return s;
}

Tensor normal(const Shape& shape, uint64_t seed, const std::string& name, float std, float shift = 0.f) {
  Tensor t(shape);
  random::init_normal(t, seed, name, std);
  if (shift != 0.f)
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] += shift;
  return t;
}

reference::ParamMap whole_params() {
  reference::ParamMap p;
  for (const auto& [name, shape] : reference::llama_layer_parameter_shapes(spec(), "")) {
    const bool norm = name.find("layernorm") != std::string::npos;
    p[name] = norm ? normal(shape, 5, name, 0.1f, 1.f) : normal(shape, 5, name, 0.3f);
  }
  return p;
}

Tensor rows_of(const Tensor& t, int64_t first, int64_t n) {
  return t.slice0(first, first + n).clone();
}

bool close(const Tensor& got, const Tensor& want, std::string& why) {
  if (got.shape() != want.shape()) {
    why = "shape " + shape_str(got.shape()) + " vs " + shape_str(want.shape());
    return false;
  }
  for (int64_t i = 0; i < got.numel(); ++i)
    if (!(std::abs(got.data()[i] - want.data()[i]) <= 1e-5f + 1e-4f * std::abs(want.data()[i]))) {
      why = "element " + std::to_string(i) + " is " + std::to_string(got.data()[i]) + ", the reference has " +
            std::to_string(want.data()[i]);
      return false;
    }
  return true;
}

struct Layout {
  int world, tp, ep, etp;
};

struct RankOut {
  Tensor y, dx;
  float aux = 0;
  int dp_rank = 0, tp_rank = 0;
  std::map<std::string, Tensor> moe_grads;  // after finalize_moe_grads and the router's DP mean
};

void check(const Layout& L) {
  CAPTURE(L.world);
  CAPTURE(L.tp);
  CAPTURE(L.ep);
  CAPTURE(L.etp);
  const int dp = L.world / L.tp;
  const reference::ParamMap whole = whole_params();
  reference::ParamMap grads;
  for (const auto& [name, t] : whole) grads[name] = Tensor(t.shape());
  std::vector<Tensor> ys, dxs;
  std::vector<float> aux;
  for (int d = 0; d < dp; ++d) {
    reference::LlamaLayerActs acts;
    ys.push_back(
        reference::llama_layer_forward(normal({kS, kB, kH}, 100 + d, "x", 1.f), whole, "", spec(), acts));
    aux.push_back(acts.moe.aux_loss);
    dxs.push_back(reference::llama_layer_backward(normal({kS, kB, kH}, 200 + d, "dy", 1.f), whole, "", spec(),
                                                  acts,
                                                  grads));  // Σ over replicas
  }
  const int64_t rows = kS / L.tp;
  std::vector<RankOut> out(static_cast<std::size_t>(L.world));
  testing::run_local_ranks(L.world, [&](comm::ProcessGroup& world) {
    ParallelState ps(world.shared_from_this(), L.tp);
    moe::ExpertParallelState eps(world.shared_from_this(), L.ep, L.etp);
    const model::LlamaLayerConfig cfg = config();
    std::map<std::string, Tensor> P = model::shard_llama_layer(whole, cfg, "", ps.tp_rank(), L.tp), G;
    P.merge(model::shard_moe_layer(whole, cfg, "", L.ep, L.etp, eps.ep_rank(), eps.etp_rank()));
    for (const auto& [name, t] : P) G[name] = Tensor(t.shape());
    model::LlamaLayer layer(cfg, "", P, G, L.tp, true);
    const model::LayerContext ctx{&ps.tp(), true, 0, 0, kS, kB, Tensor(), {}, &eps};
    model::LlamaLayerSaved saved;
    RankOut& o = out[static_cast<std::size_t>(world.rank())];
    const int64_t first = ps.tp_rank() * rows;
    o.y = layer.forward(rows_of(normal({kS, kB, kH}, 100 + ps.dp_rank(), "x", 1.f), first, rows), saved, ctx);
    o.dx =
        layer.backward(rows_of(normal({kS, kB, kH}, 200 + ps.dp_rank(), "dy", 1.f), first, rows), saved, ctx);
    o.aux = saved.aux_loss;
    o.dp_rank = ps.dp_rank();
    o.tp_rank = ps.tp_rank();
    moe::MoEGrads g;
    g.router = G.at("mlp.router.weight");
    for (int64_t e = 0; e < kE; ++e) {
      const std::string p = model::moe_expert_prefix("", e);
      if (G.count(p + "linear_gate.weight"))
        g.experts.push_back(
            {G.at(p + "linear_gate.weight"), G.at(p + "linear_up.weight"), G.at(p + "linear_fc2.weight")});
    }
    model::finalize_moe_grads(g, eps, &ps.tp(), dp);
    std::vector<Tensor*> dense{&g.router};
    model::allreduce_data_parallel_grads(dense, ps.dp());
    for (const auto& [name, t] : G)
      if (name.rfind("mlp.", 0) == 0) o.moe_grads[name] = t.clone();  // the handles g reduced in place
  });

  std::vector<float> aux_sum(static_cast<std::size_t>(dp), 0.f);
  for (int r = 0; r < L.world; ++r) {
    const RankOut& o = out[static_cast<std::size_t>(r)];
    std::string why;
    const auto d = static_cast<std::size_t>(o.dp_rank);
    CHECK_MESSAGE(close(o.y, rows_of(ys[d], o.tp_rank * rows, rows), why), "rank " << r << " y: " << why);
    CHECK_MESSAGE(close(o.dx, rows_of(dxs[d], o.tp_rank * rows, rows), why), "rank " << r << " dx: " << why);
    aux_sum[d] += o.aux;
    // Expected gradients: the reference's batch mean, cut like this rank's weights.
    reference::ParamMap mean;
    for (const auto& [name, g] : grads) {
      Tensor m = g.clone();
      ops::scale_(m, 1.f / static_cast<float>(dp));
      mean[name] = m;
    }
    const int ep_rank = r / L.etp % L.ep, etp_rank = r % L.etp;
    for (const auto& [name, want] :
         model::shard_moe_layer(mean, config(), "", L.ep, L.etp, ep_rank, etp_rank)) {
      REQUIRE_MESSAGE(o.moe_grads.count(name), "rank " << r << " has no gradient " << name);
      CHECK_MESSAGE(close(o.moe_grads.at(name), want, why), "rank " << r << " " << name << ": " << why);
    }
  }
  for (int d = 0; d < dp; ++d)
    CHECK(aux_sum[static_cast<std::size_t>(d)] ==
          doctest::Approx(aux[static_cast<std::size_t>(d)]).epsilon(1e-5));
}

}  // namespace

TEST_CASE("Llama layer with an MoE MLP equals the reference at EP x ETP layouts folded over TP x DP") {
  for (const Layout& L : {Layout{1, 1, 1, 1}, Layout{2, 2, 2, 1}, Layout{2, 2, 1, 2}, Layout{4, 2, 4, 1},
                          Layout{4, 2, 2, 2}, Layout{4, 4, 2, 2}, Layout{4, 1, 2, 1}})
    check(L);
}

TEST_CASE("Llama layer with an MoE MLP refuses tp > 1 without SP and a context without expert groups") {
  testing::run_local_ranks(2, [](comm::ProcessGroup& world) {
    ParallelState ps(world.shared_from_this(), 2);
    moe::ExpertParallelState eps(world.shared_from_this(), 2, 1);
    const reference::ParamMap whole = whole_params();
    std::map<std::string, Tensor> P = model::shard_llama_layer(whole, config(), "", ps.tp_rank(), 2), G;
    P.merge(model::shard_moe_layer(whole, config(), "", 2, 1, eps.ep_rank(), 0));
    for (const auto& [name, t] : P) G[name] = Tensor(t.shape());
    model::LlamaLayer layer(config(), "", P, G, 2, false);
    model::LlamaLayerSaved saved;
    const model::LayerContext no_sp{&ps.tp(), false, 0, 0, kS, kB, Tensor(), {}, &eps};
    CHECK_THROWS_WITH_AS(layer.forward(normal({kS, kB, kH}, 1, "x", 1.f), saved, no_sp),
                         doctest::Contains("an MoE layer at tp=2 needs sequence parallelism"), ShapeError);
    const model::LayerContext no_groups{&ps.tp(), true, 0, 0, kS, kB, Tensor(), {}, nullptr};
    CHECK_THROWS_WITH_AS(layer.forward(normal({kS / 2, kB, kH}, 1, "x", 1.f), saved, no_groups),
                         doctest::Contains("an MoE layer needs LayerContext.experts"), ShapeError);
  });
}

TEST_CASE("MoE Llama config and shard_moe_layer refuse bad values naming the rule") {
  model::LlamaLayerConfig c = config();
  c.moe_aux_loss_coeff = -1.f;
  CHECK_THROWS_WITH_AS(
      c.validate(2), doctest::Contains("moe_aux_loss_coeff=-1 must be finite and not negative"), ShapeError);
  c = config();
  c.num_moe_experts = -2;
  c.ffn = 8;  // a dense width, so that only the expert count is wrong
  CHECK_THROWS_WITH_AS(c.validate(2), doctest::Contains("num_moe_experts=-2 must not be negative"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(model::shard_moe_layer(whole_params(), config(), "", 2, 0, 0, 0),
                       doctest::Contains("etp_rank=0 is not a rank of expert_tensor_parallel_size=0"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(
      model::shard_moe_layer(whole_params(), config(), "", 3, 1, 0, 0),
      doctest::Contains("num_moe_experts=4 is not divisible by expert_model_parallel_size=3"), ShapeError);
}
