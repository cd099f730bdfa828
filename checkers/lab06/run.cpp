// lab06 on the ranks: the learner's expert groups, top-k choice, uneven all-gather / reduce-scatter, and
// the token dispatcher and expert gradients inside the engine's MoE layer (engine/moe/moe_layer.h), at
// every EP × ETP layout of the world. The MoE layer is host code by design (its lesson is the routing and
// the exchanges); the weights are cut here from whole weights both halves draw from the seed.
#include <algorithm>

#include "checkers/lab06/lab06.h"
#include "checkers/run_context.h"
#include "engine/error.h"
#include "engine/model/finalize_moe_grads.h"
#include "engine/moe/moe_layer.h"
#include "engine/moe/uneven_collectives.h"
#include "engine/ops/ops.h"

namespace tpsp::checkers {

namespace {

using namespace lab06;

Tensor as_row(const std::vector<int>& v) {
  std::vector<float> f(v.begin(), v.end());
  return Tensor::from({1, static_cast<int64_t>(f.size())}, f);
}
Tensor as_row(const std::vector<int64_t>& v) {
  std::vector<float> f;
  for (int64_t x : v) f.push_back(static_cast<float>(x));
  return Tensor::from({1, static_cast<int64_t>(f.size())}, f);
}

/// The ep and edp groups of this rank at every layout, as the learner's rank lists say.
RankOutputs run_expert_groups(RunContext& ctx) {
  ctx.run_on_host();
  RankOutputs out;
  for (const MoeLayout& L : moe_layouts(ctx.size())) {
    using moe::ExpertParallelState;
    out[L.name + ".ep_group"] =
        as_row(ExpertParallelState::ep_group_ranks(ctx.rank(), ctx.size(), L.ep, L.etp));
    out[L.name + ".edp_group"] =
        as_row(ExpertParallelState::edp_group_ranks(ctx.rank(), ctx.size(), L.ep, L.etp));
  }
  for (const MoeLayout& L : kWorld8Layouts) {  // every rank answers for all 8 ranks of a larger world
    std::vector<Tensor> ep, edp;
    for (int r = 0; r < 8; ++r) {
      ep.push_back(as_row(moe::ExpertParallelState::ep_group_ranks(r, 8, L.ep, L.etp)));
      edp.push_back(as_row(moe::ExpertParallelState::edp_group_ranks(r, 8, L.ep, L.etp)));
    }
    out[L.name + ".ep_group"] = cat(ep, 0);
    out[L.name + ".edp_group"] = cat(edp, 0);
  }
  return out;
}

/// topk_route of the fixed logits with equal values (lab06.h's kTieLogits) for k = 1, 2, 3: the experts.
RankOutputs run_topk_ties(RunContext& ctx) {
  ctx.run_on_host();
  RankOutputs out;
  const Tensor logits = tie_logits();
  for (int64_t k = 1; k <= 3; ++k)
    out["k" + std::to_string(k)] = as_row(moe::topk_route(logits, k).indices).reshape({logits.size(0), k});
  out["wide_k3"] = as_row(moe::topk_route(wide_tie_logits(), 3).indices).reshape({2, 3});
  return out;
}

/// This rank's tokens [T, h]: its sequence shard under SP (flattened [s/tp·b, h]), else all of them.
Tensor tokens(const Tensor& sbh) {
  return sbh.reshape({sbh.size(0) * sbh.size(1), sbh.size(2)});
}

/// The dispatch plan of this rank's routing at every layout: the permutation, the split sizes, the counts.
RankOutputs run_dispatch_plan(RunContext& ctx) {
  ctx.run_on_host();
  RankOutputs out;
  const Tensor x = tokens(moe_x(ctx.in, ctx.sp)), router = moe_router(ctx.in);
  // Two routings per layout, one after the other in this process: the router, then its negation (the
  // favoured expert becomes the least chosen), so that nothing of one plan can serve the next.
  const moe::Routing routings[] = {moe::topk_route(ops::matmul_forward(x, router), K),
                                   moe::topk_route(ops::matmul_forward(x, negated(router)), kSecondTopk)};
  for (const MoeLayout& L : moe_layouts(ctx.size())) {
    moe::ExpertParallelState eps(ctx.ps->world_ptr(), L.ep, L.etp);
    ctx.begin_phase(L.name + ".plan");
    for (int i = 0; i < 2; ++i) {
      const moe::DispatchPlan p = moe::plan_dispatch(routings[i], eps, L.name);
      const std::string n = L.name + (i == 0 ? "." : ".second.");
      out[n + "order"] = as_row(p.order).reshape({static_cast<int64_t>(p.order.size())});
      out[n + "input_splits"] = as_row(p.input_splits);
      out[n + "output_splits"] = as_row(p.output_splits);
      out[n + "counts"] = as_row(p.counts);
    }
  }
  return out;
}

/// all_gather_v and reduce_scatter_v over the TP group with uneven counts (one rank brings none).
RankOutputs run_uneven_collectives(RunContext& ctx) {
  ctx.run_on_host();
  const int n = ctx.size(), r = ctx.rank();
  const std::vector<int64_t> counts = uneven_counts(n);
  const int64_t start = total({counts.begin(), counts.begin() + r}),
                mine = counts[static_cast<std::size_t>(r)];
  const Tensor gathered_whole = uneven_rows(ctx.in, n);
  const Tensor rows = gathered_whole.slice0(start, start + mine).clone(),
               partial = reduce_inputs(ctx.in, n).slice0(r, r + 1).reshape({total(counts), CH}).clone();
  ctx.begin_phase("all_gather_v");
  const Tensor gathered = guarded("all_gather_v", {{"x", &rows}}, [&] {
    return moe::all_gather_v(*ctx.tp, rows, counts, {"lab06.all_gather_v"});
  });
  ctx.begin_phase("reduce_scatter_v");
  const Tensor reduced = guarded("reduce_scatter_v", {{"x", &partial}}, [&] {
    return moe::reduce_scatter_v(*ctx.tp, partial, counts, {"lab06.reduce_scatter_v"});
  });
  TPSP_CHECK(reduced.dim() == 2 && reduced.size(0) == mine && reduced.size(1) == CH,
             "reduce_scatter_v returned ", shape_str(reduced.shape()), " on rank ", r,
             "; this rank's segment is [", mine, ", ", CH, "]");
  return {{"all_gather_v", gathered.clone()}, {"reduce_scatter_v", pad_rows(reduced, max_count(n))}};
}

/// This rank's weights at layout L: the whole router, and the local experts' ETP shards.
moe::MoEWeights rank_weights(const InputDraw& d, const MoeLayout& L, int rank) {
  moe::MoEWeights w;
  w.router = moe_router(d);
  const int64_t per = E / L.ep, f = F / L.etp, c0 = etp_rank_of(rank, L) * f;
  w.first_expert = ep_rank_of(rank, L) * per;
  for (int64_t e = w.first_expert; e < w.first_expert + per; ++e)
    w.experts.push_back({moe_expert(d, e, "linear_gate").slice0(c0, c0 + f).clone(),
                         moe_expert(d, e, "linear_up").slice0(c0, c0 + f).clone(),
                         moe_expert(d, e, "linear_fc2").narrow_copy(1, c0, f)});
  return w;
}

/// Forward, backward and finalize_moe_grads of the MoE layer at every layout (phases "<layout>.forward",
/// ".backward", ".finalize").
RankOutputs run_moe_layer(RunContext& ctx) {
  ctx.run_on_host();
  RankOutputs out;
  const Tensor x = moe_x(ctx.in, ctx.sp), dy = moe_dy(ctx.in, ctx.sp);
  for (const MoeLayout& L : moe_layouts(ctx.size())) {
    moe::ExpertParallelState eps(ctx.ps->world_ptr(), L.ep, L.etp);
    const moe::MoEWeights w = rank_weights(ctx.in, L, ctx.rank());
    comm::ProcessGroup* seq = ctx.sp ? ctx.tp : nullptr;
    const moe::MoEOptions o{E, L.topk, kCoeff, seq, "moe"};
    moe::MoEState st;
    ctx.begin_phase(L.name + ".forward");
    const Tensor x2 = tokens(x), dy2 = tokens(dy);
    const Tensor y = guarded("moe_forward", {{"x", &x2}, {"router", &w.router}}, [&] {
                       return moe::moe_forward(x2, w, o, eps, st);
                     }).reshape(x.shape());
    ctx.begin_phase(L.name + ".backward");
    moe::MoEGrads g;
    const Tensor dx =
        guarded("moe_backward", {{"dy", &dy2}, {"x", &x2}, {"the forward's combined rows", &st.combined}},
                [&] { return moe::moe_backward(dy2, w, o, eps, st, 1.f, g); })
            .reshape(x.shape());
    ctx.begin_phase(L.name + ".finalize");
    model::finalize_moe_grads(g, eps, seq, kDenseDp);
    const std::string p = L.name + ".";
    out[p + "y"] = y;
    out[p + "dx"] = dx;
    out[p + "aux_loss"] = Tensor::from({1}, {st.aux_loss});
    out[p + "grad.router"] = g.router;
    if (!ctx.sp) continue;  // replicated tokens: every tp_ep rank sent the same tokens to the experts
    std::vector<Tensor> gate, up, fc2;
    for (const moe::ExpertShard& s : g.experts) {
      gate.push_back(s.gate);
      up.push_back(s.up);
      fc2.push_back(s.fc2);
    }
    out[p + "grad.experts.linear_gate"] = cat(gate, 0);
    out[p + "grad.experts.linear_up"] = cat(up, 0);
    out[p + "grad.experts.linear_fc2"] = cat(fc2, 0);
  }
  return out;
}

void add_runs(std::map<std::string, RunFn>& out) {
  out["lab06/expert_groups"] = run_expert_groups;
  out["lab06/topk_ties"] = run_topk_ties;
  out["lab06/uneven_collectives"] = run_uneven_collectives;
  out["lab06/dispatch_plan"] = run_dispatch_plan;
  out["lab06/moe_layer"] = run_moe_layer;
}

}  // namespace

const LabRuns kRuns(add_runs);

}  // namespace tpsp::checkers
