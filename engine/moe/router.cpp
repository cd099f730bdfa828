#include "engine/moe/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/error.h"

namespace tpsp::moe {

namespace {

/// Softmax of v[0..n) in double, written to out as float.
void softmax(const float* v, int64_t n, float* out) {
  double mx = v[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, static_cast<double>(v[i]));
  double sum = 0;
  std::vector<double> e(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) sum += e[static_cast<std::size_t>(i)] = std::exp(v[i] - mx);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(e[static_cast<std::size_t>(i)] / sum);
}

void check_terms(const AuxLossTerms& terms, int64_t experts, const char* what) {
  TPSP_CHECK(static_cast<int64_t>(terms.tokens_per_expert.size()) == experts, what,
             ": tokens_per_expert has ", terms.tokens_per_expert.size(), " entries, the router has ", experts,
             " experts");
  TPSP_CHECK(terms.total_tokens > 0, what, ": total_tokens=", terms.total_tokens, " must be positive");
  TPSP_CHECK(terms.topk >= 1, what, ": topk=", terms.topk, " must be at least 1");
}

/// E·coeff / (k·T²): the factor of Σ_e (Σ_t scores)·count.
double aux_factor(const AuxLossTerms& terms, int64_t experts) {
  const auto t = static_cast<double>(terms.total_tokens);
  return static_cast<double>(experts) * terms.coeff / (static_cast<double>(terms.topk) * t * t);
}

}  // namespace

Routing topk_route(const Tensor& logits_in, int64_t topk, TopkChoice choose) {
  TPSP_CHECK(logits_in.defined() && logits_in.dim() == 2,
             "TopKRouter: logits must be [tokens, experts], got ",
             logits_in.defined() ? shape_str(logits_in.shape()) : std::string("an undefined tensor"));
  TPSP_CHECK(logits_in.device() == Device::cpu, "TopKRouter: the router runs on the host, logits are on ",
             device_name(logits_in.device()));
  const Tensor logits = logits_in.to(DType::f32);
  const int64_t tokens = logits.size(0), experts = logits.size(1);
  TPSP_CHECK(topk >= 1, "TopKRouter: moe_router_topk=", topk, " must be at least 1");
  TPSP_CHECK(topk <= experts, "TopKRouter: moe_router_topk=", topk,
             " is larger than num_moe_experts=", experts);
  Routing r;
  r.num_experts = experts;
  r.topk = topk;
  r.indices.resize(static_cast<std::size_t>(tokens * topk));
  r.probs = Tensor::zeros({tokens, topk});
  r.scores = Tensor::zeros({tokens, experts});
  r.tokens_per_expert.assign(static_cast<std::size_t>(experts), 0);
  std::vector<int64_t> order(static_cast<std::size_t>(topk));
  std::vector<float> chosen(static_cast<std::size_t>(topk));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* l = logits.data() + t * experts;
    for (int64_t e = 0; e < experts; ++e)
      TPSP_CHECK(std::isfinite(l[e]), "TopKRouter: token ", t, "'s logit for expert ", e, " is ", l[e],
                 " (logits must be finite)");
    choose(l, experts, topk, order.data());
    for (int64_t j = 0; j < topk; ++j) {
      const int64_t e = order[static_cast<std::size_t>(j)];
      TPSP_CHECK(e >= 0 && e < experts && std::count(order.begin(), order.begin() + j, e) == 0,
                 "TopKRouter: the top-k choice gave expert ", e, " as choice ", j, " of token ", t,
                 ": the choices must be ", topk, " different experts in [0, ", experts, ")");
      r.indices[static_cast<std::size_t>(t * topk + j)] = e;
      chosen[static_cast<std::size_t>(j)] = l[e];
      ++r.tokens_per_expert[static_cast<std::size_t>(e)];
    }
    softmax(chosen.data(), topk, r.probs.data() + t * topk);
    softmax(l, experts, r.scores.data() + t * experts);
  }
  return r;
}

float switch_aux_loss(const Tensor& scores, const AuxLossTerms& terms) {
  TPSP_CHECK(scores.defined() && scores.dim() == 2, "switch_aux_loss: scores must be [tokens, experts]");
  const int64_t tokens = scores.size(0), experts = scores.size(1);
  check_terms(terms, experts, "switch_aux_loss");
  double sum = 0;
  for (int64_t e = 0; e < experts; ++e) {
    double mass = 0;  // Σ_t scores[t, e]
    for (int64_t t = 0; t < tokens; ++t) mass += scores.data()[t * experts + e];
    sum += mass * static_cast<double>(terms.tokens_per_expert[static_cast<std::size_t>(e)]);
  }
  return static_cast<float>(sum * aux_factor(terms, experts));
}

Tensor topk_route_backward(const Routing& r, const Tensor& dprobs, const AuxLossTerms& terms, float daux) {
  const int64_t tokens = r.num_tokens(), experts = r.num_experts, k = r.topk;
  TPSP_CHECK(dprobs.defined() && dprobs.shape() == Shape({tokens, k}),
             "TopKRouter backward: dprobs must be [", tokens, ", ", k, "] like the probs, got ",
             dprobs.defined() ? shape_str(dprobs.shape()) : std::string("an undefined tensor"));
  check_terms(terms, experts, "TopKRouter backward");
  const Tensor dp = dprobs.to(DType::f32);
  Tensor dlogits = Tensor::zeros({tokens, experts});
  // The loss's gradient with respect to scores[t, e] is the same for every token: daux·factor·count_e.
  std::vector<double> g(static_cast<std::size_t>(experts));
  const double f = aux_factor(terms, experts) * daux;
  for (int64_t e = 0; e < experts; ++e)
    g[static_cast<std::size_t>(e)] =
        f * static_cast<double>(terms.tokens_per_expert[static_cast<std::size_t>(e)]);
  for (int64_t t = 0; t < tokens; ++t) {
    float* dl = dlogits.data() + t * experts;
    const float* p = r.probs.data() + t * k;
    const float* d = dp.data() + t * k;
    double pd = 0;  // softmax backward over the k chosen logits: p_j·(d_j − Σ_i p_i·d_i)
    for (int64_t j = 0; j < k; ++j) pd += static_cast<double>(p[j]) * d[j];
    for (int64_t j = 0; j < k; ++j)
      dl[r.indices[static_cast<std::size_t>(t * k + j)]] += static_cast<float>(p[j] * (d[j] - pd));
    const float* s = r.scores.data() + t * experts;
    double sg = 0;  // and over all E logits for the loss: s_e·(g_e − Σ_e' s_e'·g_e')
    for (int64_t e = 0; e < experts; ++e) sg += s[e] * g[static_cast<std::size_t>(e)];
    for (int64_t e = 0; e < experts; ++e)
      dl[e] += static_cast<float>(s[e] * (g[static_cast<std::size_t>(e)] - sg));
  }
  return dlogits;
}

}  // namespace tpsp::moe
