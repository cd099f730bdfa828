#include "reference/moe_layer.h"

#include <cstring>

#include "engine/error.h"
#include "engine/model/config.h"
#include "engine/ops/ops.h"
#include "reference/linear.h"

namespace tpsp::reference {

namespace {

std::string expert(const std::string& prefix, int64_t e, const char* part) {
  return prefix + "mlp.experts.local_experts." + std::to_string(e) + "." + part + ".weight";
}

/// Rows `rows` of m [n, w], in that order.
Tensor gather_rows(const Tensor& m, const std::vector<int64_t>& rows) {
  const int64_t w = m.size(1);
  Tensor out = Tensor::zeros({static_cast<int64_t>(rows.size()), w});
  for (std::size_t i = 0; i < rows.size(); ++i)
    std::memcpy(out.data() + static_cast<int64_t>(i) * w, m.data() + rows[i] * w,
                sizeof(float) * static_cast<std::size_t>(w));
  return out;
}

/// The reference's own top-k (the engine's topk_experts is lab06's code): k passes of an argmax over the
/// experts not chosen yet, a strictly larger logit replacing the best so far, so that of equal logits the
/// lower expert wins.
void reference_topk(const float* logits, int64_t experts, int64_t topk, int64_t* chosen) {
  std::vector<bool> taken(static_cast<std::size_t>(experts), false);
  for (int64_t j = 0; j < topk; ++j) {
    int64_t best = -1;
    for (int64_t e = 0; e < experts; ++e)
      if (!taken[static_cast<std::size_t>(e)] && (best < 0 || logits[e] > logits[best])) best = e;
    taken[static_cast<std::size_t>(best)] = true;
    chosen[j] = best;
  }
}

/// The token of each choice t·k + j.
std::vector<int64_t> tokens_of(const std::vector<int64_t>& choices, int64_t k) {
  std::vector<int64_t> t;
  for (int64_t c : choices) t.push_back(c / k);
  return t;
}

}  // namespace

void MoELayerSpec::validate() const {
  TPSP_CHECK(hidden > 0 && ffn > 0 && num_experts > 0, "MoE layer: hidden=", hidden, ", ffn=", ffn,
             " and num_moe_experts=", num_experts, " must be positive");
  TPSP_CHECK(topk >= 1 && topk <= num_experts, "MoE layer: moe_router_topk=", topk,
             " must be between 1 and num_moe_experts=", num_experts);
  TPSP_CHECK(aux_loss_coeff >= 0.f, "MoE layer: moe_aux_loss_coeff=", aux_loss_coeff,
             " must not be negative");
}

std::size_t MoELayerActs::bytes() const {
  std::size_t n = 0;
  for (const std::vector<Tensor>* ts : {&xin, &gate_up, &act, &out})
    for (const Tensor& t : *ts) n += t.nbytes();
  return n;
}

std::vector<std::pair<std::string, Shape>> moe_layer_parameter_shapes(const MoELayerSpec& spec,
                                                                      const std::string& prefix) {
  spec.validate();
  return moe_layer_shapes(spec.hidden, spec.ffn, spec.num_experts, prefix);
}

Tensor moe_layer_forward(const Tensor& x_in, const ParamMap& P, const std::string& p,
                         const MoELayerSpec& spec, MoELayerActs& A) {
  spec.validate();
  TPSP_CHECK(x_in.dim() == 3 && x_in.size(2) == spec.hidden, "MoE layer: x must be [s, b, ", spec.hidden,
             "], got ", shape_str(x_in.shape()));
  const int64_t tokens = x_in.size(0) * x_in.size(1), h = spec.hidden, k = spec.topk, E = spec.num_experts;
  const Tensor none;
  A = MoELayerActs{};
  A.x_shape = x_in.shape();
  A.x = x_in.to(DType::f32).reshape({tokens, h});
  A.routing =
      moe::topk_route(linear_forward(A.x, param(P, p + "mlp.router.weight"), none), k, reference_topk);
  A.aux = {A.routing.tokens_per_expert, tokens, k, spec.aux_loss_coeff};
  A.aux_loss = tokens > 0 ? moe::switch_aux_loss(A.routing.scores, A.aux) : 0.f;
  A.choices.assign(static_cast<std::size_t>(E), {});
  for (int64_t c = 0; c < tokens * k; ++c)
    A.choices[static_cast<std::size_t>(A.routing.indices[static_cast<std::size_t>(c)])].push_back(c);

  Tensor y = Tensor::zeros({tokens, h});
  for (int64_t e = 0; e < E; ++e) {
    const auto& ch = A.choices[static_cast<std::size_t>(e)];
    Tensor xe = gather_rows(A.x, tokens_of(ch, k));
    Tensor gate_up = cat({linear_forward(xe, param(P, expert(p, e, "linear_gate")), none),
                          linear_forward(xe, param(P, expert(p, e, "linear_up")), none)},
                         1);
    Tensor act = ops::swiglu_forward(gate_up);
    Tensor out = linear_forward(act, param(P, expert(p, e, "linear_fc2")), none);
    for (std::size_t i = 0; i < ch.size(); ++i) {  // combine: y_t += probs[t, j]·expert_e(x_t)
      const float w = A.routing.probs.data()[ch[i]];
      float* yt = y.data() + (ch[i] / k) * h;
      const float* o = out.data() + static_cast<int64_t>(i) * h;
      for (int64_t c = 0; c < h; ++c) yt[c] += w * o[c];
    }
    A.xin.push_back(xe);
    A.gate_up.push_back(gate_up);
    A.act.push_back(act);
    A.out.push_back(out);
  }
  return y.reshape(A.x_shape);
}

Tensor moe_layer_backward(const Tensor& dy_in, const ParamMap& P, const std::string& p,
                          const MoELayerSpec& spec, const MoELayerActs& A, float daux, ParamMap& G) {
  TPSP_CHECK(dy_in.shape() == A.x_shape, "MoE layer backward: dy must be ", shape_str(A.x_shape),
             " like y, got ", shape_str(dy_in.shape()));
  const int64_t tokens = A.x.size(0), h = spec.hidden, k = spec.topk, f = spec.ffn;
  const Tensor dy = dy_in.to(DType::f32).reshape({tokens, h});
  Tensor dx = Tensor::zeros({tokens, h});
  Tensor dprobs = Tensor::zeros({tokens, k});
  for (int64_t e = 0; e < spec.num_experts; ++e) {
    const auto& ch = A.choices[static_cast<std::size_t>(e)];
    const auto n = static_cast<int64_t>(ch.size());
    // d out_e[i] = probs[t, j]·dy_t; d probs[t, j] = out_e[i]·dy_t.
    Tensor dout = Tensor::zeros({n, h});
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = ch[static_cast<std::size_t>(i)];
      const float w = A.routing.probs.data()[c];
      const float* g = dy.data() + (c / k) * h;
      const float* o = A.out[static_cast<std::size_t>(e)].data() + i * h;
      double dot = 0;
      for (int64_t j = 0; j < h; ++j) {
        dout.data()[i * h + j] = w * g[j];
        dot += static_cast<double>(o[j]) * g[j];
      }
      dprobs.data()[c] = static_cast<float>(dot);
    }
    const LinearGrads fc2 = linear_backward(dout, A.act[static_cast<std::size_t>(e)],
                                            param(P, expert(p, e, "linear_fc2")), false);
    accumulate(G, expert(p, e, "linear_fc2"), fc2.dw);
    const Tensor dgate_up = ops::swiglu_backward(fc2.dx, A.gate_up[static_cast<std::size_t>(e)]);
    const Tensor& xe = A.xin[static_cast<std::size_t>(e)];
    const LinearGrads gate =
        linear_backward(dgate_up.narrow_copy(1, 0, f), xe, param(P, expert(p, e, "linear_gate")), false);
    const LinearGrads up =
        linear_backward(dgate_up.narrow_copy(1, f, f), xe, param(P, expert(p, e, "linear_up")), false);
    accumulate(G, expert(p, e, "linear_gate"), gate.dw);
    accumulate(G, expert(p, e, "linear_up"), up.dw);
    for (int64_t i = 0; i < n; ++i) {  // scatter-add each choice's input gradient to its token
      float* d = dx.data() + (ch[static_cast<std::size_t>(i)] / k) * h;
      for (int64_t j = 0; j < h; ++j) d[j] += gate.dx.data()[i * h + j] + up.dx.data()[i * h + j];
    }
  }
  const Tensor dlogits = tokens > 0 ? moe::topk_route_backward(A.routing, dprobs, A.aux, daux)
                                    : Tensor::zeros({0, spec.num_experts});
  const LinearGrads router = linear_backward(dlogits, A.x, param(P, p + "mlp.router.weight"), false);
  accumulate(G, p + "mlp.router.weight", router.dw);
  return ops::add(dx, router.dx).reshape(A.x_shape);
}

}  // namespace tpsp::reference
