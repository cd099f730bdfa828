#include "engine/moe/moe_layer.h"

#include "engine/error.h"
#include "engine/ops/ops.h"

namespace tpsp::moe {

void check_moe_weights(const MoEWeights& w, const MoEOptions& o, ExpertParallelState& eps, int64_t h) {
  TPSP_CHECK(w.router.defined() && w.router.shape() == Shape({o.num_experts, h}),
             "MoE layer: the router must be [", o.num_experts, ", ", h, "], got ",
             w.router.defined() ? shape_str(w.router.shape()) : "nothing");
  const auto [first, local] = ExpertParallelState::local_experts(o.num_experts, eps.ep_size(), eps.ep_rank());
  TPSP_CHECK(static_cast<int64_t>(w.experts.size()) == local && w.first_expert == first,
             "MoE layer: EP rank ", eps.ep_rank(), " holds experts ", first, "..", first + local - 1,
             " (num_moe_experts=", o.num_experts, " / expert_model_parallel_size=", eps.ep_size(),
             "), the weights hold ", w.experts.size(), " from expert ", w.first_expert);
  for (const ExpertShard& s : w.experts) {
    const int64_t f = s.gate.defined() ? s.gate.size(0) : -1;
    TPSP_CHECK(f >= 0 && s.gate.shape() == Shape({f, h}) && s.up.defined() && s.up.shape() == Shape({f, h}) &&
                   s.fc2.defined() && s.fc2.shape() == Shape({h, f}),
               "MoE layer: an expert shard must be gate, up [f/etp, ", h, "] and fc2 [", h, ", f/etp]");
  }
}

namespace {

/// The expert's partial output (its ETP shard of fc2's input columns): (silu(x·gateᵀ) ⊙ x·upᵀ)·fc2ᵀ.
Tensor expert_forward(const Tensor& x, const ExpertShard& s, Tensor& gate_up, Tensor& act) {
  gate_up = cat({ops::matmul_forward(x, s.gate), ops::matmul_forward(x, s.up)}, 1);
  act = ops::swiglu_forward(gate_up);
  return ops::matmul_forward(act, s.fc2);
}

}  // namespace

Tensor moe_forward(const Tensor& x, const MoEWeights& w, const MoEOptions& o, ExpertParallelState& eps,
                   MoEState& st) {
  TPSP_CHECK(x.dim() == 2, "MoE layer: x must be [tokens, h], got ", shape_str(x.shape()));
  check_moe_weights(w, o, eps, x.size(1));
  st = MoEState{};
  st.x = x.to(DType::f32);
  st.routing = topk_route(ops::matmul_forward(st.x, w.router), o.topk);
  // The loss balances the whole sequence: counts over the sequence group, tokens of every shard.
  std::vector<int64_t> counts = st.routing.tokens_per_expert;
  int64_t total = st.x.size(0);
  if (o.sequence_group != nullptr && o.sequence_group->size() > 1) {  // [counts | tokens], summed
    Tensor c({o.num_experts + 1});
    for (int64_t e = 0; e < o.num_experts; ++e)
      c.data()[e] = static_cast<float>(counts[static_cast<std::size_t>(e)]);
    c.data()[o.num_experts] = static_cast<float>(total);
    o.sequence_group->all_reduce(c, comm::ReduceOp::sum, {o.label + ".aux_counts"});
    for (int64_t e = 0; e < o.num_experts; ++e)
      counts[static_cast<std::size_t>(e)] = static_cast<int64_t>(c.data()[e]);
    total = static_cast<int64_t>(c.data()[o.num_experts]);
  }
  st.aux = {counts, total, o.topk, o.aux_loss_coeff};
  st.aux_loss = total > 0 ? switch_aux_loss(st.routing.scores, st.aux) : 0.f;

  st.plan = plan_dispatch(st.routing, eps, o.label);
  const Tensor rows = dispatch(st.x, st.plan, eps, o.label);
  std::vector<Tensor> outs;
  int64_t at = 0;
  for (std::size_t e = 0; e < w.experts.size(); ++e) {
    const int64_t n = st.plan.rows_per_expert[e];
    Tensor gate_up, act;
    st.xin.push_back(rows.slice0(at, at + n));
    outs.push_back(expert_forward(st.xin.back(), w.experts[e], gate_up, act));
    st.gate_up.push_back(gate_up);
    st.act.push_back(act);
    at += n;
  }
  const Tensor out = outs.empty() ? Tensor::zeros({0, x.size(1)}) : cat(outs, 0);
  st.combined = combine_rows(out, st.plan, eps, o.label);
  return unpermute(st.combined, st.routing.probs, st.plan);
}

Tensor moe_backward(const Tensor& dy, const MoEWeights& w, const MoEOptions& o, ExpertParallelState& eps,
                    const MoEState& st, float daux, MoEGrads& g) {
  TPSP_CHECK(dy.shape() == st.x.shape(), "MoE layer backward: dy must be ", shape_str(st.x.shape()), ", got ",
             shape_str(dy.shape()));
  if (!g.router.defined()) {
    g.router = Tensor::zeros(w.router.shape());
    for (const ExpertShard& s : w.experts)
      g.experts.push_back(
          {Tensor::zeros(s.gate.shape()), Tensor::zeros(s.up.shape()), Tensor::zeros(s.fc2.shape())});
  }
  TPSP_CHECK(g.router.shape() == w.router.shape() && g.experts.size() == w.experts.size(),
             "MoE layer backward: the gradients hold ", g.experts.size(), " experts and a router of ",
             shape_str(g.router.shape()), ", the weights ", w.experts.size(), " and ",
             shape_str(w.router.shape()));
  Tensor dprobs;
  const Tensor d_rows = unpermute_backward(dy.to(DType::f32), st.combined, st.routing.probs, st.plan, dprobs);
  const Tensor d_out = combine_rows_backward(d_rows, st.plan, eps, o.label);
  std::vector<Tensor> d_in;
  int64_t at = 0;
  for (std::size_t e = 0; e < w.experts.size(); ++e) {
    const int64_t n = st.plan.rows_per_expert[e];
    const Tensor dy_e = d_out.slice0(at, at + n);
    at += n;
    const ExpertShard& s = w.experts[e];
    ops::matmul_wgrad(dy_e, st.act[e], g.experts[e].fc2);
    const Tensor dgate_up = ops::swiglu_backward(ops::matmul_dgrad(dy_e, s.fc2), st.gate_up[e]);
    const int64_t f = s.gate.size(0);
    const Tensor dgate = dgate_up.narrow_copy(1, 0, f), dup = dgate_up.narrow_copy(1, f, f);
    ops::matmul_wgrad(dgate, st.xin[e], g.experts[e].gate);
    ops::matmul_wgrad(dup, st.xin[e], g.experts[e].up);
    d_in.push_back(ops::add(ops::matmul_dgrad(dgate, s.gate), ops::matmul_dgrad(dup, s.up)));  // ETP partial
  }
  const int64_t h = st.x.size(1);
  const Tensor dx_experts =
      dispatch_backward(d_in.empty() ? Tensor::zeros({0, h}) : cat(d_in, 0), st.plan, eps, o.label);
  const Tensor dlogits = st.x.size(0) > 0 ? topk_route_backward(st.routing, dprobs, st.aux, daux)
                                          : Tensor::zeros({0, o.num_experts});
  ops::matmul_wgrad(dlogits, st.x, g.router);
  return ops::add(dx_experts, ops::matmul_dgrad(dlogits, w.router));
}

}  // namespace tpsp::moe
