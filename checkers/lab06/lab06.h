// lab06 scenarios, shared by the ranks and the grader: one MoE layer (12 experts, top-2, SwiGLU experts)
// on a world of 1 to 4 ranks, run at every EP × ETP layout that world allows, the tokens a sequence shard
// under SP or whole (replicated) without it. The router is drawn so that its choices are uneven on
// purpose: expert 0 is most tokens' first choice, expert 11 is never chosen, and experts 1 and 2 have the
// same router row, so every token's logits for them tie exactly (the lower expert must win, on every rank).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "checkers/inputs.h"

namespace tpsp::checkers::lab06 {

/// Sequence, batch, hidden, each expert's ffn (divisible by every ETP below), experts (divisible by every
/// EP below), moe_router_topk, moe_aux_loss_coeff (the aux loss's gradient is checked with daux = 1).
constexpr int64_t S = 12, B = 2, H = 8, F = 12, E = 12, K = 2;
constexpr float kCoeff = 0.1f;
/// The experts the drawn router favours, ties (with kTiedLoser, which must lose), and never chooses.
constexpr int64_t kFavoured = 0, kTiedWinner = 1, kTiedLoser = 2, kUnused = E - 1;

/// One EP × ETP layout of the world (EDP = world / (EP·ETP)); its phases are "<name>.forward", ...
struct MoeLayout {
  std::string name;
  int ep, etp;
  int64_t topk = K;  ///< moe_router_topk of the moe_layer scenario at this layout
};
/// The layouts of a world of n ranks: EP = n with ETP = 1, ETP = n with EP = 1 (n > 1, top-3: code that
/// takes k = 2 for granted fails there), and at n = 4 also EP = ETP = 2 and EP = 2 with two
/// expert-data-parallel replicas (EDP = 2: the edp group is not the ep group's complement in rank order,
/// it is every EP·ETP-th rank).
inline std::vector<MoeLayout> moe_layouts(int n) {
  std::vector<MoeLayout> out{{"ep" + std::to_string(n) + "_etp1", n, 1}};
  if (n > 1) out.push_back({"ep1_etp" + std::to_string(n) + "_top3", 1, n, 3});
  if (n == 4) {
    out.push_back({"ep2_etp2", 2, 2});
    out.push_back({"ep2_etp1_edp2", 2, 1});
  }
  return out;
}

/// The layer's input x [s, b, h] (split along s under SP): N(0, 1), its last column 1 (the router's bias
/// column below). dy: its output gradient, N(0, 1).
inline Tensor moe_x(const InputDraw& d, bool sp) {
  Tensor x = (sp ? d.split(0) : d)({"lab06.x", {S, B, H}});
  for (int64_t i = H - 1; i < x.numel(); i += H) x.at(i) = 1.f;
  return x;
}
inline Tensor moe_dy(const InputDraw& d, bool sp) {
  return (sp ? d.split(0) : d)({"lab06.dy", {S, B, H}});
}

/// The router [E, h], N(0, 0.5²), with a bias through x's constant column: +3 for kFavoured, +1.5 for
/// kTiedWinner, −8 for kUnused; row kTiedLoser a copy of row kTiedWinner (bit-equal logits for every
/// token, and the pair is most tokens' second choice: the tie rule decides most tokens' second expert).
inline Tensor moe_router(const InputDraw& d) {
  Tensor w = input_tensor({E, H}, d, "lab06.router", 0.5f);
  w.at(kFavoured * H + H - 1) += 3.f;
  w.at(kTiedWinner * H + H - 1) += 1.5f;  // often the second choice: the tie decides
  w.at(kUnused * H + H - 1) -= 8.f;
  for (int64_t j = 0; j < H; ++j) w.at(kTiedLoser * H + j) = w.at(kTiedWinner * H + j);
  return w;
}
/// The dispatch_plan scenario's second routing: the negated router, top-k as the first (the same T·k: a
/// permutation kept from the first plan has the right size).
constexpr int64_t kSecondTopk = K;
/// -t (a copy): the dispatch_plan scenario's second router.
inline Tensor negated(const Tensor& t) {
  Tensor out = t.clone();
  for (int64_t i = 0; i < out.numel(); ++i) out.at(i) = -out.at(i);
  return out;
}
/// Expert e's whole weight `part` ("linear_gate", "linear_up": [F, h]; "linear_fc2": [h, F]), N(0, 0.3²).
inline Tensor moe_expert(const InputDraw& d, int64_t e, const std::string& part) {
  const Shape shape = part == "linear_fc2" ? Shape{H, F} : Shape{F, H};
  return input_tensor(shape, d, "lab06.expert" + std::to_string(e) + "." + part, 0.3f);
}

/// Where a world rank sits in a layout: ETP innermost, then EP, then EDP (Megatron's MoE folding).
inline int ep_rank_of(int rank, const MoeLayout& L) {
  return rank / L.etp % L.ep;
}
inline int etp_rank_of(int rank, const MoeLayout& L) {
  return rank % L.etp;
}

/// The uneven_collectives scenario's counts: rank q of n brings q + 1 rows, except the last, which brings
/// none (a zero-row split). Rows [count, CH] drawn as "lab06.rows"; the whole gathered [Σ counts, CH].
constexpr int64_t CH = 3;
inline std::vector<int64_t> uneven_counts(int n) {
  std::vector<int64_t> c;
  for (int q = 0; q < n; ++q) c.push_back(q == n - 1 && n > 1 ? 0 : q + 1);
  return c;
}
inline int64_t total(const std::vector<int64_t>& c) {
  int64_t t = 0;
  for (int64_t v : c) t += v;
  return t;
}
inline int64_t max_count(int n) {
  const std::vector<int64_t> c = uneven_counts(n);
  return *std::max_element(c.begin(), c.end());
}
/// Every rank's rows of all_gather_v, whole [Σ counts, CH] (exact values: any order of sums is exact).
inline Tensor uneven_rows(const InputDraw& d, int n) {
  return input_tensor({total(uneven_counts(n)), CH}, d, "lab06.rows", 1.f, true);
}
/// reduce_scatter_v's inputs, rank r's at [r]: [n, Σ counts, CH] (exact values).
inline Tensor reduce_inputs(const InputDraw& d, int n) {
  return input_tensor({n, total(uneven_counts(n)), CH}, d, "lab06.partials", 1.f, true);
}
/// t [m, CH] padded with zero rows to [rows, CH] (each rank's reduce_scatter_v segment, to equal shards).
inline Tensor pad_rows(const Tensor& t, int64_t rows) {
  Tensor out = Tensor::zeros({rows, t.size(1)});
  for (int64_t i = 0; i < t.numel(); ++i) out.at(i) = t.at(i);
  return out;
}

/// The topk_ties scenario's logits [7, 5], with equal values where a rule must decide, and each row's
/// experts in the order the rule gives (the first 3: k = 1, 2, 3 take a prefix). The last row's values
/// differ by one float32 ulp: not a tie (a rule with a tolerance orders them wrongly).
inline Tensor tie_logits() {
  const float one = 1.f, up1 = std::nextafter(one, 2.f), up2 = std::nextafter(up1, 2.f);
  return Tensor::from({7, 5}, {1,   2,   2,   0,  2,    // 1, 2, 4: three equal maxima, lower first
                               .5,  .5,  .5,  .5, .5,   // 0, 1, 2: all equal
                               -1,  3,   -1,  3,  3,    // 1, 3, 4
                               2,   1,   0,   -1, -2,   // 0, 1, 2: no tie
                               0,   0,   1,   1,  0,    // 2, 3, 0: the tie below the maxima
                               -2,  -1,  -1,  4,  -1,   // 3, 1, 2
                               one, up1, up2, 0,  0});  // 2, 1, 0: one ulp apart
}
inline const std::vector<std::vector<int64_t>> kTieOrder{{1, 2, 4}, {0, 1, 2}, {1, 3, 4}, {0, 1, 2},
                                                         {2, 3, 0}, {3, 1, 2}, {2, 1, 0}};
/// Wider rows [2, 24] (a sort switches algorithm above 16 elements): all equal, and three equal maxima
/// at experts 3, 17 and 20 among equal others; their top-3 {0, 1, 2} and {3, 17, 20}.
inline Tensor wide_tie_logits() {
  std::vector<float> v(48, .25f);
  for (int64_t e : {3, 17, 20}) v[static_cast<std::size_t>(24 + e)] = 2.f;
  return Tensor::from({2, 24}, v);
}
inline const std::vector<std::vector<int64_t>> kWideTieOrder{{0, 1, 2}, {3, 17, 20}};

/// Layouts of a world of 8 ranks for the expert_groups scenario's closed forms (no communication: the
/// rank lists are a function of (rank, world, EP, ETP), so every rank answers for all 8), where EDP and
/// ETP are both above 1 or EDP is 4.
inline const std::vector<MoeLayout> kWorld8Layouts{{"w8_ep2_etp2_edp2", 2, 2},
                                                   {"w8_ep2_etp1_edp4", 2, 1},
                                                   {"w8_ep4_etp2", 4, 2},
                                                   {"w8_ep1_etp2_edp4", 1, 2}};

/// The dense data-parallel size the moe_layer scenario passes to finalize_moe_grads: the expert gradients
/// are scaled by 1/kDenseDp (as if the batch were one of kDenseDp replicas').
constexpr int kDenseDp = 2;

}  // namespace tpsp::checkers::lab06
