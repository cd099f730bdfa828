// lab06 in the grader: expected tensors from the single-process MoE layer (reference/moe_layer.h: every
// expert local, no communication) and closed forms (the groups of Megatron's MoE folding, the tie rule,
// the dispatch plan of each rank's routing), with the calls of each EP × ETP layout on its groups.
#include <algorithm>
#include <numeric>

#include "checkers/lab06/lab06.h"
#include "checkers/scenario.h"
#include "reference/moe_layer.h"

namespace tpsp::checkers {

namespace {

using comm::OpKind;
using namespace lab06;

Tensor rows_of(const std::vector<std::vector<int>>& rows) {
  std::vector<float> f;
  for (const auto& r : rows) f.insert(f.end(), r.begin(), r.end());
  return Tensor::from({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows.at(0).size())}, f);
}

/// Rank r's ep group: the EP ranks of its block of EP·ETP with its etp rank; its edp group: every
/// EP·ETP-th rank from r % (EP·ETP).
ExpectedOutputs expected_expert_groups(uint64_t, int world, bool) {
  ExpectedOutputs out;
  std::vector<std::pair<MoeLayout, int>> all;  // (layout, its world)
  for (const MoeLayout& L : moe_layouts(world)) all.push_back({L, world});
  for (const MoeLayout& L : kWorld8Layouts) all.push_back({L, 8});
  for (const auto& [L, n] : all) {
    const int block = L.ep * L.etp;
    std::vector<std::vector<int>> ep, edp;
    for (int r = 0; r < n; ++r) {
      ep.emplace_back();
      for (int i = 0; i < L.ep; ++i) ep.back().push_back(r / block * block + i * L.etp + r % L.etp);
      edp.emplace_back();
      for (int q = r % block; q < n; q += block) edp.back().push_back(q);
    }
    const std::string where = " at world " + std::to_string(n) + ", EP=" + std::to_string(L.ep) +
                              ", ETP=" + std::to_string(L.etp) + " (EDP=" + std::to_string(n / block) + ")";
    // A layout of the ranks' own world: row r on rank r; of the world of 8: every rank's whole table.
    const Placement rows = n == world ? Placement::Shard(0) : Placement::Replicate();
    out[L.name + ".ep_group"] = {
        .whole = rows_of(ep),
        .placement = rows,
        .meaning =
            "row r = ep_group_ranks(r)" + where +
            ": the EP ranks of r's block of EP·ETP consecutive ranks that have r's etp rank (r % ETP)"};
    out[L.name + ".edp_group"] = {
        .whole = rows_of(edp),
        .placement = rows,
        .meaning = "row r = edp_group_ranks(r)" + where +
                   ": r % (EP·ETP), then every EP·ETP-th rank (the ranks holding the same expert shards)"};
  }
  return out;
}

ExpectedOutputs expected_topk_ties(uint64_t, int, bool) {
  ExpectedOutputs out;
  for (int64_t k = 1; k <= 3; ++k) {
    std::vector<float> f;
    for (const auto& row : kTieOrder) f.insert(f.end(), row.begin(), row.begin() + k);
    out["k" + std::to_string(k)] = {
        .whole = Tensor::from({static_cast<int64_t>(kTieOrder.size()), k}, f),
        .meaning = "row t = token t's " + std::to_string(k) +
                   " experts, largest logit first, equal logits in expert order (the lower expert first) on "
                   "every rank; the logits are tie_logits() in checkers/lab06/lab06.h"};
  }
  std::vector<float> wide;
  for (const auto& row : kWideTieOrder) wide.insert(wide.end(), row.begin(), row.end());
  out["wide_k3"] = {.whole = Tensor::from({2, 3}, wide),
                    .meaning =
                        "the top-3 of 24 experts: all logits equal, then three equal maxima at experts 3, "
                        "17 and 20 (wide_tie_logits() in checkers/lab06/lab06.h; a sort's order of equal "
                        "values changes with the length)"};
  return out;
}

/// The reference MoE layer's parameters (reference/moe_layer.h names, no prefix) from the seed.
reference::ParamMap whole_params(uint64_t seed) {
  reference::ParamMap P;
  P["mlp.router.weight"] = moe_router(seed);
  for (int64_t e = 0; e < E; ++e)
    for (const char* part : {"linear_gate", "linear_up", "linear_fc2"})
      P["mlp.experts.local_experts." + std::to_string(e) + "." + part + ".weight"] =
          moe_expert(seed, e, part);
  return P;
}
reference::MoELayerSpec spec_of(int64_t topk) {
  return {H, F, E, topk, kCoeff};
}

/// The reference router's top-k choices for each rank's tokens: rank r's s/n rows of x under SP, all
/// of x otherwise.
std::vector<std::vector<int64_t>> rank_choices(const Tensor& x, const reference::ParamMap& P, int n, bool sp,
                                               int64_t topk) {
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < n; ++r) {
    reference::MoELayerActs acts;
    reference::moe_layer_forward(sp ? chunk(x, 0, r, n) : x, P, "", spec_of(topk), acts);
    out.push_back(acts.routing.indices);
  }
  return out;
}

/// The plans of every layout for one router's choices (each rank's), names "<layout><infix>order", ...
void expect_plans(ExpectedOutputs& out, int n, const std::vector<std::vector<int64_t>>& choices,
                  const std::string& infix) {
  for (const MoeLayout& L : moe_layouts(n)) {
    const int64_t per = E / L.ep;
    auto count = [&](int rank, int64_t e) {
      const auto& c = choices[static_cast<std::size_t>(rank)];
      return static_cast<int64_t>(std::count(c.begin(), c.end(), e));
    };
    std::vector<float> order, in, outs, counts;
    for (int r = 0; r < n; ++r) {
      const auto& c = choices[static_cast<std::size_t>(r)];
      std::vector<int64_t> o(c.size());
      std::iota(o.begin(), o.end(), int64_t{0});
      std::stable_sort(o.begin(), o.end(), [&](int64_t a, int64_t b) {
        return c[static_cast<std::size_t>(a)] < c[static_cast<std::size_t>(b)];
      });
      order.insert(order.end(), o.begin(), o.end());
      const int block = r / (L.ep * L.etp) * (L.ep * L.etp), ep_rank = ep_rank_of(r, L);
      for (int j = 0; j < L.ep; ++j) {
        const int peer = block + j * L.etp + etp_rank_of(r, L);  // EP rank j of r's ep group
        int64_t to = 0, from = 0;
        for (int64_t e = 0; e < per; ++e) {
          to += count(r, j * per + e);
          from += count(peer, ep_rank * per + e);
        }
        in.push_back(static_cast<float>(to));
        outs.push_back(static_cast<float>(from));
      }
      for (int q = 0; q < L.ep * L.etp; ++q)
        for (int64_t e = 0; e < E; ++e) counts.push_back(static_cast<float>(count(block + q, e)));
    }
    const int64_t choices_per_rank = static_cast<int64_t>(choices[0].size());
    const std::string name = L.name + infix;
    out[name + "order"] = {
        .whole = Tensor::from({n * choices_per_rank}, order),
        .placement = Placement::Shard(0),
        .meaning =
            "each rank's permutation of its T·k choices c = t·k + j: sorted by expert, equal experts "
            "in token order (a stable sort)"};
    out[name + "input_splits"] = {
        .whole = Tensor::from({n, L.ep}, in),
        .placement = Placement::Shard(0),
        .meaning =
            "row r, column j = the choices rank r sends EP rank j (its own choices for j's experts); "
            "they differ from rank to rank and from j to j: the routing is uneven"};
    out[name + "output_splits"] = {
        .whole = Tensor::from({n, L.ep}, outs),
        .placement = Placement::Shard(0),
        .meaning =
            "row r, column j = the choices rank r receives from EP rank j (j's choices for r's "
            "experts), known only from the count exchange"};
    out[name + "counts"] = {
        .whole = Tensor::from({n, L.ep * L.etp * E}, counts),
        .placement = Placement::Shard(0),
        .meaning =
            "row r = counts[p·E + e]: tp_ep rank p's choices for expert e, for every rank p of r's "
            "tp_ep group (EP·ETP consecutive ranks), gathered in rank order"};
  }
}

ExpectedOutputs expected_dispatch_plan(uint64_t seed, int n, bool sp) {
  reference::ParamMap P = whole_params(seed);
  const Tensor x = moe_x(seed, sp);
  ExpectedOutputs out;
  expect_plans(out, n, rank_choices(x, P, n, sp, K), ".");
  P["mlp.router.weight"] = negated(P.at("mlp.router.weight"));  // the second routing (run.cpp)
  expect_plans(out, n, rank_choices(x, P, n, sp, kSecondTopk), ".second.");
  return out;
}

/// The count exchange of each layout: one all_gather of E float32 counts over the tp_ep group.
Pattern pattern_dispatch_plan(int n, bool) {
  Pattern pat;
  for (const MoeLayout& L : moe_layouts(n))
    for (const char* which : {"the router's", "the negated router's"})
      pat[L.name + ".plan"].push_back({.op = OpKind::all_gather,
                                       .tensor_bytes = static_cast<uint64_t>(L.ep * L.etp * E * 4),
                                       .what = std::string("the count exchange of ") + which +
                                               " plan: every tp_ep rank's choices per expert",
                                       .group = "tp_ep",
                                       .label = L.name + ".counts"});
  return pat;
}

ExpectedOutputs expected_uneven_collectives(uint64_t seed, int n, bool) {
  const std::vector<int64_t> counts = uneven_counts(n);
  const Tensor partials = reduce_inputs(seed, n);
  const int64_t rows = total(counts), pad = max_count(n);
  Tensor sum = Tensor::zeros({rows, CH});
  for (int r = 0; r < n; ++r)
    for (int64_t i = 0; i < rows * CH; ++i) sum.at(i) += partials.at(r * rows * CH + i);
  std::vector<Tensor> segments;
  for (int q = 0, start = 0; q < n; start += static_cast<int>(counts[static_cast<std::size_t>(q)]), ++q)
    segments.push_back(pad_rows(sum.slice0(start, start + counts[static_cast<std::size_t>(q)]), pad));
  return {{"all_gather_v",
           {.whole = uneven_rows(seed, n),
            .meaning = "every rank's rows in rank order (rank q brings q + 1 rows, the last rank none)"}},
          {"reduce_scatter_v",
           {.whole = cat(segments, 0),
            .placement = Placement::Shard(0),
            .meaning = "rank q's segment of the rows (q + 1 rows, the last rank none) summed over the ranks, "
                       "padded with zero rows to " +
                       std::to_string(pad) + " rows by the checker"}}};
}

/// The bytes are each call's input: all_gather_v sends its counts[r] rows to each of the n ranks
/// (n·counts[r] rows), reduce_scatter_v its Σ counts rows once: an all-reduce or padding carried by the
/// all_to_all moves more.
Pattern pattern_uneven_collectives(int n, bool) {
  if (n == 1) return {};
  const std::vector<int64_t> counts = uneven_counts(n);
  std::vector<uint64_t> gather;
  for (int64_t c : counts) gather.push_back(static_cast<uint64_t>(n * c * CH * 4));
  return {{"all_gather_v",
           {{.op = OpKind::all_to_all,
             .tensor_bytes = 0,
             .what = "all_gather_v: one all_to_all with split sizes, this rank's rows once to each rank",
             .rank_bytes = gather,
             .label = "lab06.all_gather_v"}}},
          {"reduce_scatter_v",
           {{.op = OpKind::all_to_all,
             .tensor_bytes = static_cast<uint64_t>(total(counts) * CH * 4),
             .what = "reduce_scatter_v: one all_to_all with split sizes, each segment once to its rank",
             .label = "lab06.reduce_scatter_v"}}}};
}

/// Rank r's local experts' gradients of `part`, stacked: its ETP rows of gate and up, columns of fc2.
Tensor expert_block(const reference::ParamMap& G, const MoeLayout& L, int r, const std::string& part) {
  const int64_t per = E / L.ep, f = F / L.etp, c0 = etp_rank_of(r, L) * f;
  std::vector<Tensor> parts;
  for (int64_t e = ep_rank_of(r, L) * per; e < (ep_rank_of(r, L) + 1) * per; ++e) {
    const Tensor& g = G.at("mlp.experts.local_experts." + std::to_string(e) + "." + part + ".weight");
    parts.push_back(part == "linear_fc2" ? g.narrow_copy(1, c0, f) : g.slice0(c0, c0 + f).clone());
  }
  return cat(parts, 0);
}

ExpectedOutputs expected_moe_layer(uint64_t seed, int n, bool sp) {
  const reference::ParamMap P = whole_params(seed);
  const Placement rows = sp ? Placement::Shard(0) : Placement::Replicate();
  ExpectedOutputs out;
  for (const MoeLayout& L : moe_layouts(n)) {
    reference::ParamMap G;
    for (const auto& [name, t] : P) G[name] = Tensor(t.shape());
    reference::MoELayerActs acts;
    const Tensor y = reference::moe_layer_forward(moe_x(seed, sp), P, "", spec_of(L.topk), acts);
    const Tensor dx = reference::moe_layer_backward(moe_dy(seed, sp), P, "", spec_of(L.topk), acts, 1.f, G);
    const std::string p = L.name + ".";
    out[p + "y"] = {y, rows};
    out[p + "dx"] = {dx, rows};
    out[p + "aux_loss"] = {
        .whole = Tensor::from({1}, {acts.aux_loss}),
        .placement = sp ? Placement::Partial() : Placement::Replicate(),
        .meaning =
            "the Switch load-balancing loss of the sequence (under SP each rank's share, their sum the "
            "loss; its counts all-reduced over the sequence's ranks)"};
    out[p + "grad.router"] = {G.at("mlp.router.weight")};
    if (!sp) continue;
    for (const char* part : {"linear_gate", "linear_up", "linear_fc2"}) {
      std::vector<Tensor> blocks;
      for (int r = 0; r < n; ++r) blocks.push_back(expert_block(G, L, r, part));
      Tensor whole = cat(blocks, 0);
      for (int64_t i = 0; i < whole.numel(); ++i) whole.at(i) /= static_cast<float>(kDenseDp);
      out[p + "grad.experts." + part] = {
          .whole = whole,
          .placement = Placement::Shard(0),
          .meaning = "rank r's local experts' " + std::string(part) +
                     " shards (ETP rows of gate and up, columns of fc2), stacked, after finalize_moe_grads: "
                     "summed over the edp group, then scaled by 1/dp_size = 1/" +
                     std::to_string(kDenseDp)};
    }
  }
  return out;
}

/// The rows each rank's all_to_all calls carry at layout L, from the reference routing's counts: what
/// dispatch sends (its T·k choices), what it receives (the choices of its ep group for its experts), and
/// what its ETP group received together.
struct A2aRows {
  std::vector<int64_t> choices, received, etp_received;  // per world rank
};
A2aRows a2a_rows(const std::vector<std::vector<int64_t>>& choices, const MoeLayout& L) {
  const int n = static_cast<int>(choices.size()), block = L.ep * L.etp;
  const int64_t per = E / L.ep;
  A2aRows a;
  for (int r = 0; r < n; ++r) {
    const int b0 = r / block * block, first = ep_rank_of(r, L) * static_cast<int>(per);
    int64_t got = 0;
    for (int j = 0; j < L.ep; ++j)
      for (int64_t c : choices[static_cast<std::size_t>(b0 + j * L.etp + etp_rank_of(r, L))])
        got += c >= first && c < first + per ? 1 : 0;
    a.choices.push_back(static_cast<int64_t>(choices[static_cast<std::size_t>(r)].size()));
    a.received.push_back(got);
  }
  for (int r = 0; r < n; ++r) {
    int64_t sum = 0;  // the ranks of r's etp group: r − etp_rank … + ETP − 1
    for (int q = 0; q < L.etp; ++q) sum += a.received[static_cast<std::size_t>(r - etp_rank_of(r, L) + q)];
    a.etp_received.push_back(sum);
  }
  return a;
}

/// One layer's calls at each layout on the expert groups, with their labels and, for the all_to_all
/// calls, each rank's input bytes from the seed's routing: padding, an all-reduce carried by an
/// all_to_all, or a mirror on the wrong side shows here even when the values come out right.
Pattern pattern_moe_layer(uint64_t seed, int n, bool sp) {
  const reference::ParamMap P = whole_params(seed);
  const Tensor x = moe_x(seed, sp);
  Pattern pat;
  for (const MoeLayout& L : moe_layouts(n)) {
    const A2aRows a = a2a_rows(rank_choices(x, P, n, sp, L.topk), L);
    auto bytes = [&](const std::vector<int64_t>& rows, int64_t times) {
      std::vector<uint64_t> b;
      for (int64_t r : rows) b.push_back(static_cast<uint64_t>(r * times * H * 4));
      return b;
    };
    auto a2a = [](const char* group, const std::string& label, std::vector<uint64_t> rank_bytes,
                  const char* what) {
      return ExpectedCall{.op = OpKind::all_to_all,
                          .tensor_bytes = 0,
                          .what = what,
                          .group = group,
                          .rank_bytes = std::move(rank_bytes),
                          .label = label};
    };
    auto& fwd = pat[L.name + ".forward"];
    auto& bwd = pat[L.name + ".backward"];
    fwd.push_back({.op = OpKind::all_gather,
                   .tensor_bytes = static_cast<uint64_t>(L.ep * L.etp * E * 4),
                   .what = "the count exchange: every tp_ep rank's choices per expert (float32 [E] each)",
                   .group = "tp_ep",
                   .label = "moe.counts"});
    fwd.push_back(a2a("ep", "moe.dispatch", bytes(a.choices, 1),
                      "dispatch: this rank's T·k permuted choices to the EP ranks that hold their experts"));
    fwd.push_back(a2a("ep", "moe.combine", bytes(a.received, 1),
                      "combine: the rows this rank received, back to their tokens' ranks"));
    bwd.push_back(a2a("ep", "moe.combine.grad", bytes(a.choices, 1),
                      "combine's backward: the T·k output gradients to the experts (dispatch's direction)"));
    bwd.push_back(a2a("ep", "moe.dispatch.grad", bytes(a.received, 1),
                      "dispatch's backward: the received rows' input gradients back (combine's direction)"));
    if (L.etp > 1) {
      fwd.push_back(a2a("etp", "moe.etp_all_gather", bytes(a.received, L.etp),
                        "all_gather_v over ETP: this rank's received rows once to each ETP rank"));
      fwd.push_back(a2a("etp", "moe.etp_reduce_scatter", bytes(a.etp_received, 1),
                        "reduce_scatter_v over ETP: fc2's partial sums of the ETP group's rows, each "
                        "segment once to its rank"));
      bwd.push_back(a2a("etp", "moe.etp_reduce_scatter.grad", bytes(a.received, L.etp),
                        "the ETP reduce-scatter's backward: an all_gather_v"));
      bwd.push_back(a2a("etp", "moe.etp_all_gather.grad", bytes(a.etp_received, 1),
                        "the ETP all-gather's backward: a reduce_scatter_v"));
    }
    auto& fin = pat[L.name + ".finalize"];
    if (sp && n > 1) {
      fwd.push_back({.op = OpKind::all_reduce,
                     .tensor_bytes = (E + 1) * 4,
                     .what = "the aux loss's counts and token count summed over the sequence's ranks",
                     .label = "moe.aux_counts"});
      fin.push_back({.op = OpKind::all_reduce,
                     .tensor_bytes = E * H * 4,
                     .what = "the router's gradient summed over the sequence's ranks (each saw its shard)",
                     .label = "grads.moe_router.sequence_parallel"});
    }
    if (n / (L.ep * L.etp) > 1)
      fin.push_back({.op = OpKind::all_reduce,
                     .tensor_bytes = static_cast<uint64_t>(E / L.ep * 3 * (F / L.etp) * H * 4),
                     .what = "the expert gradients summed over the edp group (the ranks holding the same "
                             "shards), in one coalesced all-reduce",
                     .group = "edp",
                     .label = "grads.expert_data_parallel"});
  }
  return pat;
}

void add_scenarios(std::vector<Scenario>& out) {
  out.push_back(
      {.lab = "lab06",
       .name = "expert_groups",
       .summary = "the ep and edp groups of every rank at each EP × ETP layout (MoE parallel folding)",
       .dp_layout = false,
       .host_code = true,
       .expected = expected_expert_groups});
  out.push_back({.lab = "lab06",
                 .name = "topk_ties",
                 .summary = "the router's top-k on equal logits: the lower expert first, on every rank",
                 .tp_sizes = {1, 2},
                 .dp_layout = false,
                 .host_code = true,
                 .expected = expected_topk_ties});
  out.push_back({.lab = "lab06",
                 .name = "uneven_collectives",
                 .summary = "all_gather_v and reduce_scatter_v with uneven counts (a rank with none)",
                 .dp_layout = false,
                 .host_code = true,
                 .expected = expected_uneven_collectives,
                 .pattern = pattern_uneven_collectives,
                 .pattern_labels = true});
  out.push_back({.lab = "lab06",
                 .name = "dispatch_plan",
                 .summary = "the permutation by expert, the count exchange and the all_to_all split sizes",
                 .sp_variants = true,
                 .dp_layout = false,
                 .host_code = true,
                 .expected = expected_dispatch_plan,
                 .pattern = pattern_dispatch_plan,
                 .pattern_labels = true});
  out.push_back({.lab = "lab06",
                 .name = "moe_layer",
                 .summary = "an MoE layer at every EP × ETP layout: outputs, the aux loss, router and expert "
                            "gradients after finalize",
                 .sp_variants = true,
                 .dp_layout = false,
                 .budget_s = 20,
                 .host_code = true,
                 .expected = expected_moe_layer,
                 .seeded_pattern = pattern_moe_layer,
                 .pattern_labels = true});
}

}  // namespace

const LabScenarios kScenarios("lab06", add_scenarios);

}  // namespace tpsp::checkers
