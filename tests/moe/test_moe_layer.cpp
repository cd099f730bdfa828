// The expert-parallel MoE layer (engine/moe/moe_layer.h) against the single-process MoE layer
// (reference/moe_layer.h) at every EP × ETP layout a world of at most 4 ranks allows, with sequence
// parallelism in front (each rank's tokens a sequence shard of its DP replica) and without: every rank's
// output and input gradient against the reference's rows, the aux loss summed over the sequence group,
// the router's gradient summed over the world and every expert shard's gradient summed over its edp
// group against the reference's gradients summed over the DP replicas (a tp_ep block can mix replicas).
// Routing skewed (expert 0 takes most choices, expert 3 none) and with exact ties in the logits.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "engine/error.h"
#include "engine/model/finalize_grads.h"
#include "engine/model/finalize_moe_grads.h"
#include "engine/moe/comm_volume.h"
#include "engine/moe/moe_layer.h"
#include "engine/ops/ops.h"
#include "engine/parallel_state.h"
#include "engine/random/init.h"
#include "reference/moe_layer.h"
#include "tests/support/local_backend.h"

using namespace tpsp;

namespace {

constexpr int64_t kS = 4, kB = 2, kH = 8, kF = 6, kE = 4, kK = 2;
constexpr float kCoeff = 0.1f;

struct Layout {
  int world, tp, ep, etp;
  bool sp;
};

/// N(0, scale²) from Philox, keyed by `seed` (engine/random/init.h).
Tensor randn(const Shape& shape, unsigned seed, float scale) {
  Tensor t(shape);
  random::init_normal(t, seed, "randn", scale);
  return t;
}

std::string expert_name(int64_t e, const char* part) {
  return "mlp.experts.local_experts." + std::to_string(e) + "." + part + ".weight";
}

/// Whole parameters: the router sends feature 0 (offset +3 in x) to expert 0, away from expert 3; with
/// `ties`, experts 1 and 2 have the same router row, so their logits tie exactly on every token.
reference::ParamMap make_params(bool ties) {
  reference::ParamMap p;
  Tensor router = randn({kE, kH}, 7, 0.5f);
  router.at({0, 0}) = 2.f;
  router.at({1, 0}) = 0.5f;
  router.at({3, 0}) = -5.f;
  if (ties)
    for (int64_t c = 0; c < kH; ++c) router.at({2, c}) = router.at({1, c});
  p["mlp.router.weight"] = router;
  for (int64_t e = 0; e < kE; ++e) {
    p[expert_name(e, "linear_gate")] = randn({kF, kH}, 100 + static_cast<unsigned>(e), 0.3f);
    p[expert_name(e, "linear_up")] = randn({kF, kH}, 200 + static_cast<unsigned>(e), 0.3f);
    p[expert_name(e, "linear_fc2")] = randn({kH, kF}, 300 + static_cast<unsigned>(e), 0.3f);
  }
  return p;
}

Tensor x_of(int replica) {
  Tensor x = randn({kS, kB, kH}, 1000 + static_cast<unsigned>(replica), 1.f);
  for (int64_t i = 0; i < kS * kB; ++i) x.data()[i * kH] += 3.f;
  return x;
}

/// Rows [first, first + n) of a [s, b, h] tensor flattened to tokens.
Tensor token_rows(const Tensor& t, int64_t first, int64_t n) {
  return t.reshape({kS * kB, kH}).slice0(first, first + n).clone();
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  REQUIRE_MESSAGE(got.shape() == want.shape(),
                  what << ": shape " << shape_str(got.shape()) << " vs " << shape_str(want.shape()));
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float g = got.data()[i], w = want.data()[i];
    // float32 sums in another order (ETP partial sums, grouped GEMMs): a few ulps of O(1)-O(10) values.
    if (!(std::abs(g - w) <= 1e-5f + 1e-5f * std::abs(w))) {
      FAIL_CHECK(what << ": element " << i << " is " << g << ", the reference has " << w);
      return;  // the first difference names the fault
    }
  }
}

struct RankOut {
  Tensor y, dx, router_grad;
  float aux = 0;
  int dp_rank = 0, ep_rank = 0, etp_rank = 0;
  int64_t first_expert = 0;
  std::vector<moe::ExpertShard> expert_grads;
  moe::MoEGrads finalized;  // after finalize_moe_grads and the dense DP average of the router
  std::vector<std::string> labels;
};

/// The recorder's bytes per collective against the closed forms of engine/moe/comm_volume.h, forward and
/// backward (each backward collective mirrors a forward one), and the expert GEMMs' shapes as they ran.
void check_volumes(comm::ProcessGroup& world, const moe::MoEState& st, moe::ExpertParallelState& eps) {
  const moe::MoEVolumeSpec spec{eps.ep_size(), eps.etp_size(), kE, kK, kH, kF, 4};
  const moe::MoEVolume v = moe::moe_volume(spec, st.plan.counts, eps.ep_rank(), eps.etp_rank());
  std::map<std::string, uint64_t> sent;
  for (const auto& rec : world.recorder().records()) sent[rec.label] += rec.bytes;
  const std::pair<const char*, uint64_t> want[] = {{"moe.dispatch", v.dispatch},
                                                   {"moe.combine", v.combine},
                                                   {"moe.etp_all_gather", v.etp_all_gather},
                                                   {"moe.etp_reduce_scatter", v.etp_reduce_scatter},
                                                   {"moe.combine.grad", v.dispatch},
                                                   {"moe.dispatch.grad", v.combine},
                                                   {"moe.etp_reduce_scatter.grad", v.etp_all_gather},
                                                   {"moe.etp_all_gather.grad", v.etp_reduce_scatter}};
  for (const auto& [label, bytes] : want)
    CHECK_MESSAGE(sent[label] == bytes, "rank " << world.rank() << " " << label << ": recorded "
                                                << sent[label] << " bytes, the closed form says " << bytes);
  REQUIRE(v.gemms.size() == 2 * st.xin.size());
  for (std::size_t e = 0; e < st.xin.size(); ++e) {
    const moe::GemmShape fc1 = v.gemms[2 * e], fc2 = v.gemms[2 * e + 1];
    CHECK(st.xin[e].shape() == Shape({fc1.m, fc1.k}));
    CHECK(st.gate_up[e].shape() == Shape({fc1.m, fc1.n}));
    CHECK(st.act[e].shape() == Shape({fc2.m, fc2.k}));
  }
}

void check_layout(const Layout& L, bool ties) {
  CAPTURE(L.world);
  CAPTURE(L.tp);
  CAPTURE(L.ep);
  CAPTURE(L.etp);
  CAPTURE(ties);
  const reference::ParamMap params = make_params(ties);
  const int dp = L.world / L.tp;
  reference::MoELayerSpec spec{kH, kF, kE, kK, kCoeff};
  reference::ParamMap grads;
  for (const auto& [name, shape] : reference::moe_layer_parameter_shapes(spec, ""))
    grads[name] = Tensor(shape);
  std::vector<Tensor> ys, dxs;
  std::vector<float> auxes;
  for (int d = 0; d < dp; ++d) {
    reference::MoELayerActs acts;
    ys.push_back(reference::moe_layer_forward(x_of(d), params, "", spec, acts));
    auxes.push_back(acts.aux_loss);
    const std::vector<int64_t>& n = acts.routing.tokens_per_expert;  // the skew the header promises
    CHECK(n[3] == 0);
    CHECK(n[0] == *std::max_element(n.begin(), n.end()));
    if (ties) CHECK(n[2] == 0);  // expert 2 ties with expert 1 on every token and always loses
    dxs.push_back(reference::moe_layer_backward(randn({kS, kB, kH}, 2000 + static_cast<unsigned>(d), 1.f),
                                                params, "", spec, acts, 1.f, grads));  // Σ over replicas
  }

  std::vector<RankOut> out(static_cast<std::size_t>(L.world));
  testing::run_local_ranks(L.world, [&](comm::ProcessGroup& world) {
    const int r = world.rank();
    ParallelState ps(world.shared_from_this(), L.tp);
    moe::ExpertParallelState eps(world.shared_from_this(), L.ep, L.etp);
    const int64_t per_rank = L.sp ? kS / L.tp * kB : kS * kB, first = L.sp ? ps.tp_rank() * per_rank : 0;
    moe::MoEWeights w;
    w.router = params.at("mlp.router.weight");
    const auto [first_e, local] = moe::ExpertParallelState::local_experts(kE, L.ep, eps.ep_rank());
    w.first_expert = first_e;
    const int64_t f = kF / L.etp, c0 = eps.etp_rank() * f;
    for (int64_t e = first_e; e < first_e + local; ++e)
      w.experts.push_back({params.at(expert_name(e, "linear_gate")).slice0(c0, c0 + f).clone(),
                           params.at(expert_name(e, "linear_up")).slice0(c0, c0 + f).clone(),
                           params.at(expert_name(e, "linear_fc2")).narrow_copy(1, c0, f)});
    moe::MoEOptions o{kE, kK, kCoeff, L.sp ? &ps.tp() : nullptr, "moe"};
    moe::MoEState st;
    RankOut& mine = out[static_cast<std::size_t>(r)];
    mine.y = moe::moe_forward(token_rows(x_of(ps.dp_rank()), first, per_rank), w, o, eps, st);
    moe::MoEGrads g;
    const Tensor dy = randn({kS, kB, kH}, 2000 + static_cast<unsigned>(ps.dp_rank()), 1.f);
    mine.dx = moe::moe_backward(token_rows(dy, first, per_rank), w, o, eps, st, 1.f, g);
    mine.aux = st.aux_loss;
    mine.router_grad = g.router.clone();
    for (const moe::ExpertShard& s : g.experts)
      mine.expert_grads.push_back({s.gate.clone(), s.up.clone(), s.fc2.clone()});
    if (L.sp || L.tp == 1) {
      model::finalize_moe_grads(g, eps, L.sp ? &ps.tp() : nullptr, ps.dp_size());
      std::vector<Tensor*> dense{&g.router};
      model::allreduce_data_parallel_grads(dense, ps.dp());
      mine.finalized = g;
    }
    mine.dp_rank = ps.dp_rank();
    mine.ep_rank = eps.ep_rank();
    mine.etp_rank = eps.etp_rank();
    mine.first_expert = first_e;
    for (const auto& rec : world.recorder().records()) mine.labels.push_back(rec.label);
    check_volumes(world, st, eps);
  });

  // Outputs and input gradients, row for row; the aux loss summed over each replica's sequence shards.
  std::vector<float> aux_sum(static_cast<std::size_t>(dp), 0.f);
  Tensor router_sum = Tensor::zeros({kE, kH});
  std::map<std::pair<int64_t, int>, std::vector<Tensor>> expert_sum;  // (expert, etp rank) → gate, up, fc2
  for (int r = 0; r < L.world; ++r) {
    const RankOut& o = out[static_cast<std::size_t>(r)];
    const int64_t per_rank = L.sp ? kS / L.tp * kB : kS * kB, first = L.sp ? (r % L.tp) * per_rank : 0;
    const auto d = static_cast<std::size_t>(o.dp_rank);
    expect_close(o.y, token_rows(ys[d], first, per_rank), "rank " + std::to_string(r) + " y");
    expect_close(o.dx, token_rows(dxs[d], first, per_rank), "rank " + std::to_string(r) + " dx");
    aux_sum[d] += o.aux;
    router_sum = ops::add(router_sum, o.router_grad);
    for (std::size_t e = 0; e < o.expert_grads.size(); ++e) {
      auto& s = expert_sum[{o.first_expert + static_cast<int64_t>(e), o.etp_rank}];
      const moe::ExpertShard& gsh = o.expert_grads[e];
      if (s.empty())
        s = {gsh.gate.clone(), gsh.up.clone(), gsh.fc2.clone()};
      else
        s = {ops::add(s[0], gsh.gate), ops::add(s[1], gsh.up), ops::add(s[2], gsh.fc2)};  // Σ over edp
    }
    const bool gathers = std::find(o.labels.begin(), o.labels.end(), "moe.etp_all_gather") != o.labels.end();
    CHECK_MESSAGE(gathers == (L.etp > 1), "rank " << r << ": ETP all-gather recorded only when ETP > 1");
  }
  // Without SP every rank holds its replica's whole sequence: each rank's aux is the replica's.
  for (int d = 0; d < dp; ++d)
    CHECK(aux_sum[static_cast<std::size_t>(d)] / (L.sp ? 1.f : static_cast<float>(L.tp)) ==
          doctest::Approx(auxes[static_cast<std::size_t>(d)]).epsilon(1e-5));
  if (!L.sp && L.tp > 1) return;  // replicated tokens: every TP rank computed the same gradients twice
  expect_close(router_sum, grads.at("mlp.router.weight"), "router gradient summed over the world");
  // After finalize_moe_grads: every rank holds the global batch's mean gradient of what it owns.
  const float mean = 1.f / static_cast<float>(dp);
  for (int r = 0; r < L.world; ++r) {
    const RankOut& o = out[static_cast<std::size_t>(r)];
    const std::string who = "rank " + std::to_string(r) + " after finalize_moe_grads: ";
    Tensor router = grads.at("mlp.router.weight").clone();
    ops::scale_(router, mean);
    expect_close(o.finalized.router, router, who + "router");
    const int64_t f = kF / L.etp, q = o.etp_rank;
    for (std::size_t k = 0; k < o.finalized.experts.size(); ++k) {
      const int64_t e = o.first_expert + static_cast<int64_t>(k);
      Tensor gate = grads.at(expert_name(e, "linear_gate")).slice0(q * f, (q + 1) * f).clone(),
             up = grads.at(expert_name(e, "linear_up")).slice0(q * f, (q + 1) * f).clone(),
             fc2 = grads.at(expert_name(e, "linear_fc2")).narrow_copy(1, q * f, f);
      for (Tensor* t : {&gate, &up, &fc2}) ops::scale_(*t, mean);
      expect_close(o.finalized.experts[k].gate, gate, who + "expert " + std::to_string(e) + " gate");
      expect_close(o.finalized.experts[k].up, up, who + "expert " + std::to_string(e) + " up");
      expect_close(o.finalized.experts[k].fc2, fc2, who + "expert " + std::to_string(e) + " fc2");
    }
  }
  REQUIRE(expert_sum.size() == static_cast<std::size_t>(kE * L.etp));
  for (const auto& [key, s] : expert_sum) {
    const auto [e, q] = key;
    const int64_t f = kF / L.etp;
    const std::string at = "expert " + std::to_string(e) + " ETP shard " + std::to_string(q);
    expect_close(s[0], grads.at(expert_name(e, "linear_gate")).slice0(q * f, (q + 1) * f).clone(),
                 at + " gate");
    expect_close(s[1], grads.at(expert_name(e, "linear_up")).slice0(q * f, (q + 1) * f).clone(), at + " up");
    expect_close(s[2], grads.at(expert_name(e, "linear_fc2")).narrow_copy(1, q * f, f), at + " fc2");
  }
}

}  // namespace

TEST_CASE("MoE layer equals the reference at every EP x ETP layout of 1, 2 and 4 ranks, SP on") {
  for (const Layout& L : {Layout{1, 1, 1, 1, true}, Layout{2, 2, 2, 1, true}, Layout{2, 2, 1, 2, true},
                          Layout{2, 1, 2, 1, true}, Layout{4, 2, 2, 1, true}, Layout{4, 2, 4, 1, true},
                          Layout{4, 2, 2, 2, true}, Layout{4, 1, 1, 2, true}, Layout{4, 4, 4, 1, true},
                          Layout{4, 4, 2, 2, true}})
    check_layout(L, false);
}

TEST_CASE("MoE layer with exact ties in the router's logits, and with whole (replicated) sequences") {
  check_layout({4, 2, 2, 2, true}, true);
  check_layout({4, 2, 4, 1, true}, true);
  check_layout({2, 1, 2, 1, false}, false);
  check_layout({2, 2, 2, 1, false}, false);  // tp 2 without SP: y and dx per rank (gradients count twice)
}

TEST_CASE("expert parallel state: groups as Megatron folds them, errors naming the rule") {
  using moe::ExpertParallelState;
  CHECK(ExpertParallelState::ep_group_ranks(3, 8, 2, 2) == std::vector<int>{1, 3});
  CHECK(ExpertParallelState::etp_group_ranks(3, 8, 2, 2) == std::vector<int>{2, 3});
  CHECK(ExpertParallelState::tp_ep_group_ranks(5, 8, 2, 2) == std::vector<int>{4, 5, 6, 7});
  CHECK(ExpertParallelState::edp_group_ranks(5, 8, 2, 2) == std::vector<int>{1, 5});
  CHECK(ExpertParallelState::ep_group_ranks(2, 4, 2, 1) == std::vector<int>{2, 3});
  CHECK(ExpertParallelState::edp_group_ranks(2, 4, 2, 1) == std::vector<int>{0, 2});
  CHECK_THROWS_WITH_AS(ExpertParallelState::check_layout(6, 2, 2),
                       doctest::Contains("world_size=6 is not divisible by expert_model_parallel_size (2) × "
                                         "expert_tensor_parallel_size (2) = 4"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(
      ExpertParallelState::local_experts(6, 4, 0),
      doctest::Contains("num_moe_experts=6 is not divisible by expert_model_parallel_size=4"), ShapeError);
}

TEST_CASE("MoE volumes: an even routing's exact volumes are the uniform closed form") {
  // 4 tp_ep ranks (EP 2 × ETP 2), 8 experts; every rank's 16 tokens × top-2 = 32 choices, 4 per expert.
  const moe::MoEVolumeSpec spec{2, 2, 8, 2, 64, 128, 2};
  const std::vector<int64_t> counts(4 * 8, 4);
  for (int j = 0; j < 2; ++j)
    for (int q = 0; q < 2; ++q) {
      const moe::MoEVolume exact = moe::moe_volume(spec, counts, j, q),
                           uniform = moe::moe_volume_uniform(spec, 16);
      CHECK(exact.dispatch == uniform.dispatch);
      CHECK(exact.combine == uniform.combine);
      CHECK(exact.etp_all_gather == uniform.etp_all_gather);
      CHECK(exact.etp_reduce_scatter == uniform.etp_reduce_scatter);
      REQUIRE(exact.gemms.size() == uniform.gemms.size());
      for (std::size_t g = 0; g < exact.gemms.size(); ++g) CHECK(exact.gemms[g].m == uniform.gemms[g].m);
    }
  // The closed forms' numbers: T·k·(EP−1)/EP·h·b = 32·½·64·2 = 2048; (ETP−1)·T·k·h·b = 4096;
  // M = T·k·EP·ETP/E = 16, fc1 [16, 2·128/2, 64], fc2 [16, 64, 64].
  const moe::MoEVolume u = moe::moe_volume_uniform(spec, 16);
  CHECK(u.dispatch == 2048);
  CHECK(u.etp_all_gather == 4096);
  CHECK(u.gemms[0].m == 16);
  CHECK(u.gemms[0].n == 128);
  CHECK(u.gemms[1].k == 64);
}

TEST_CASE("MoE layer refuses experts cut for another EP rank, and counts the loss over unequal shards") {
  const reference::ParamMap params = make_params(false);
  reference::MoELayerSpec spec{kH, kF, kE, kK, kCoeff};
  // The reference over 8 tokens; the engine over two sequence shards of 3 and 5 of them (EP 1).
  reference::MoELayerActs acts;
  const Tensor x = x_of(0);
  reference::moe_layer_forward(x, params, "", spec, acts);
  std::vector<float> aux(2);
  testing::run_local_ranks(2, [&](comm::ProcessGroup& world) {
    const int r = world.rank();
    moe::ExpertParallelState wrong(world.shared_from_this(), 2, 1), one(world.shared_from_this(), 1, 1);
    moe::MoEWeights w;
    w.router = params.at("mlp.router.weight");
    for (int64_t e = 0; e < 2; ++e)  // experts 0 and 1 on both ranks: rank 1 should hold 2 and 3
      w.experts.push_back({params.at(expert_name(e, "linear_gate")), params.at(expert_name(e, "linear_up")),
                           params.at(expert_name(e, "linear_fc2"))});
    const moe::MoEOptions o{kE, kK, kCoeff, &world, "moe"};
    if (r == 1)
      CHECK_THROWS_WITH_AS(
          moe::check_moe_weights(w, o, wrong, kH),
          doctest::Contains("EP rank 1 holds experts 2..3 (num_moe_experts=4 / "
                            "expert_model_parallel_size=2), the weights hold 2 from expert 0"),
          ShapeError);
    for (int64_t e = 2; e < kE; ++e)
      w.experts.push_back({params.at(expert_name(e, "linear_gate")), params.at(expert_name(e, "linear_up")),
                           params.at(expert_name(e, "linear_fc2"))});
    moe::MoEState st;
    const int64_t first = r == 0 ? 0 : 3, n = r == 0 ? 3 : 5;
    moe::moe_forward(token_rows(x, first, n), w, o, one, st);
    aux[static_cast<std::size_t>(r)] = st.aux_loss;
  });
  CHECK(aux[0] + aux[1] == doctest::Approx(acts.aux_loss).epsilon(1e-5));
}
