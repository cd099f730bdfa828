#include "reference/llama_layer.h"

#include <numeric>

#include "engine/error.h"
#include "engine/ops/rope.h"
#include "engine/ops/swiglu.h"
#include "reference/linear.h"

namespace tpsp::reference {

namespace {

/// Columns [j·d, (j+1)·d) of x [s, b, n·d].
Tensor head(const Tensor& x, int64_t j, int64_t d) {
  return x.narrow_copy(2, j * d, d);
}

/// The multi-head qkv [s, b, heads·3·d] of grouped q [s, b, heads·d], k, v [s, b, G·d]: head n holds its
/// q, then the k and v of its group n / (heads/G) (Llama's repeat_interleave of keys and values).
Tensor repeat_groups(const Tensor& q, const Tensor& k, const Tensor& v, const LlamaLayerSpec& spec) {
  const int64_t d = spec.head_dim(), per = spec.heads / spec.groups();
  std::vector<Tensor> parts;
  for (int64_t n = 0; n < spec.heads; ++n)
    for (const Tensor* t : {&q, &k, &v}) parts.push_back(head(*t, t == &q ? n : n / per, d));
  return cat(parts, 2);
}

/// The gradients of q, k and v from that of repeat_groups' result: q's as they are, a group's k and v
/// the sums over its query heads.
struct QKVGrads {
  Tensor dq, dk, dv;
};
QKVGrads fold_groups(const Tensor& dmha, const LlamaLayerSpec& spec) {
  const int64_t d = spec.head_dim(), per = spec.heads / spec.groups();
  std::vector<Tensor> dq, dk, dv;
  for (int64_t n = 0; n < spec.heads; ++n) {
    dq.push_back(head(dmha, 3 * n, d));
    if (n % per == 0) {
      dk.push_back(head(dmha, 3 * n + 1, d));
      dv.push_back(head(dmha, 3 * n + 2, d));
    } else {
      ops::add_(dk.back(), head(dmha, 3 * n + 1, d));
      ops::add_(dv.back(), head(dmha, 3 * n + 2, d));
    }
  }
  return {cat(dq, 2), cat(dk, 2), cat(dv, 2)};
}

/// [s, b, n·d] as [s, b, n, d] (the per-head view qk_layernorm normalises over), and back.
Tensor per_head(const Tensor& x, int64_t d) {
  return x.reshape({x.size(0), x.size(1), x.size(2) / d, d});
}
Tensor merged(const Tensor& x) {
  return x.reshape({x.size(0), x.size(1), x.size(2) * x.size(3)});
}

}  // namespace

std::size_t LlamaLayerActs::bytes() const {
  std::size_t n = 0;
  for (const Tensor* t :
       {&x_in, &ln1.y, &ln1.rstd, &q_raw, &k_raw, &v, &q_norm.y, &q_norm.rstd, &k_norm.y, &k_norm.rstd,
        &mha_qkv, &attn.out, &attn.probs, &x_mid, &ln2.y, &ln2.rstd, &gate_up, &act})
    n += t->nbytes();
  return n + moe.bytes();
}

void LlamaLayerSpec::validate(int64_t s) const {
  TPSP_CHECK(hidden > 0 && heads > 0 && (ffn > 0 || has_moe()) && query_groups >= 0,
             "llama layer: sizes must be positive, got h=", hidden, " heads=", heads, " ffn=", ffn,
             " query_groups=", query_groups);
  TPSP_CHECK(hidden % heads == 0, "llama layer: hidden=", hidden, " is not divisible by heads=", heads);
  TPSP_CHECK(heads % groups() == 0, "llama layer: heads=", heads,
             " is not divisible by query_groups=", groups());
  TPSP_CHECK(head_dim() % 2 == 0, "llama layer: head_dim=", head_dim(),
             " is odd; rotary embedding rotates pairs (i, i + d/2)");
  TPSP_CHECK(positions.empty() || static_cast<int64_t>(positions.size()) == s,
             "llama layer: ", positions.size(), " positions for s=", s, " tokens");
}

std::vector<std::pair<std::string, Shape>> llama_layer_parameter_shapes(const LlamaLayerSpec& spec,
                                                                        const std::string& p) {
  auto shapes = llama_layer_shapes(spec.hidden, spec.heads, spec.groups(), spec.has_moe() ? 1 : spec.ffn,
                                   spec.qk_layernorm, p);
  if (!spec.has_moe()) return shapes;
  std::erase_if(shapes, [](const auto& e) {
    return e.first.find(".mlp.") != std::string::npos || e.first.rfind("mlp.", 0) == 0;
  });
  MoELayerSpec moe = spec.moe;
  moe.hidden = spec.hidden;
  for (auto& e : moe_layer_parameter_shapes(moe, p)) shapes.push_back(e);
  return shapes;
}

Tensor llama_layer_forward(const Tensor& x, const ParamMap& P, const std::string& p,
                           const LlamaLayerSpec& spec, LlamaLayerActs& L) {
  TPSP_CHECK(x.dim() == 3 && x.size(2) == spec.hidden, "llama layer: x must be [s, b, h=", spec.hidden,
             "], got ", shape_str(x.shape()));
  const int64_t s = x.size(0), d = spec.head_dim();
  spec.validate(s);
  L.x_in = x;
  L.positions = spec.positions;
  if (L.positions.empty()) {
    L.positions.resize(static_cast<std::size_t>(s));
    std::iota(L.positions.begin(), L.positions.end(), int64_t{0});
  }
  L.ln1 = ops::rmsnorm_forward(x, param(P, p + "input_layernorm.weight"), spec.norm_eps);
  const Tensor none;
  L.q_raw = linear_forward(L.ln1.y, param(P, p + "self_attention.linear_q.weight"), none);
  L.k_raw = linear_forward(L.ln1.y, param(P, p + "self_attention.linear_k.weight"), none);
  L.v = linear_forward(L.ln1.y, param(P, p + "self_attention.linear_v.weight"), none);
  Tensor q = L.q_raw, k = L.k_raw;
  if (spec.qk_layernorm) {
    L.q_norm = ops::rmsnorm_forward(per_head(q, d), param(P, p + "self_attention.q_layernorm.weight"),
                                    spec.norm_eps);
    L.k_norm = ops::rmsnorm_forward(per_head(k, d), param(P, p + "self_attention.k_layernorm.weight"),
                                    spec.norm_eps);
    q = merged(L.q_norm.y);
    k = merged(L.k_norm.y);
  }
  q = ops::rope_forward(q, L.positions, d, spec.rotary_base);
  k = ops::rope_forward(k, L.positions, d, spec.rotary_base);
  L.mha_qkv = repeat_groups(q, k, L.v, spec);
  L.attn_opt.heads = spec.heads;
  L.attn_opt.cu_seqlens = spec.cu_seqlens;
  L.attn = ops::attention_forward(L.mha_qkv, L.attn_opt);
  const Tensor proj = linear_forward(L.attn.out, param(P, p + "self_attention.linear_proj.weight"), none);
  L.x_mid = ops::add(x, proj);

  L.ln2 = ops::rmsnorm_forward(L.x_mid, param(P, p + "pre_mlp_layernorm.weight"), spec.norm_eps);
  if (spec.has_moe()) {
    MoELayerSpec moe = spec.moe;
    moe.hidden = spec.hidden;
    return ops::add(L.x_mid, moe_layer_forward(L.ln2.y, P, p, moe, L.moe));
  }
  L.gate_up = cat({linear_forward(L.ln2.y, param(P, p + "mlp.linear_gate.weight"), none),
                   linear_forward(L.ln2.y, param(P, p + "mlp.linear_up.weight"), none)},
                  2);
  L.act = ops::swiglu_forward(L.gate_up);
  return ops::add(L.x_mid, linear_forward(L.act, param(P, p + "mlp.linear_fc2.weight"), none));
}

Tensor llama_layer_backward(const Tensor& dy, const ParamMap& P, const std::string& p,
                            const LlamaLayerSpec& spec, const LlamaLayerActs& L, ParamMap& G) {
  const int64_t d = spec.head_dim();
  // MLP block: y = x_mid + fc2(silu(gate(m)) ⊙ up(m)), m = RMSNorm(x_mid); or y = x_mid + MoE(m).
  Tensor dm;
  if (spec.has_moe()) {
    MoELayerSpec moe = spec.moe;
    moe.hidden = spec.hidden;
    dm = moe_layer_backward(dy, P, p, moe, L.moe, 1.f, G);
  } else {
    const LinearGrads fc2 = linear_backward(dy, L.act, param(P, p + "mlp.linear_fc2.weight"), false);
    accumulate(G, p + "mlp.linear_fc2.weight", fc2.dw);
    const Tensor dgate_up = ops::swiglu_backward(fc2.dx, L.gate_up);
    const LinearGrads gate = linear_backward(dgate_up.narrow_copy(2, 0, spec.ffn), L.ln2.y,
                                             param(P, p + "mlp.linear_gate.weight"), false);
    const LinearGrads up = linear_backward(dgate_up.narrow_copy(2, spec.ffn, spec.ffn), L.ln2.y,
                                           param(P, p + "mlp.linear_up.weight"), false);
    accumulate(G, p + "mlp.linear_gate.weight", gate.dw);
    accumulate(G, p + "mlp.linear_up.weight", up.dw);
    dm = ops::add(gate.dx, up.dx);
  }
  const Tensor dln2 = ops::rmsnorm_backward(dm, L.x_mid, param(P, p + "pre_mlp_layernorm.weight"), L.ln2.rstd,
                                            grad_buffer(G, p + "pre_mlp_layernorm.weight"));
  const Tensor dx_mid = ops::add(dy, dln2);

  // Attention block: x_mid = x_in + proj(attention(rope(norm(q)), rope(norm(k)), v)).
  const LinearGrads proj =
      linear_backward(dx_mid, L.attn.out, param(P, p + "self_attention.linear_proj.weight"), false);
  accumulate(G, p + "self_attention.linear_proj.weight", proj.dw);
  const QKVGrads g = fold_groups(ops::attention_backward(proj.dx, L.mha_qkv, L.attn.probs, L.attn_opt), spec);
  Tensor dq = ops::rope_backward(g.dq, L.positions, d, spec.rotary_base);
  Tensor dk = ops::rope_backward(g.dk, L.positions, d, spec.rotary_base);
  if (spec.qk_layernorm) {
    dq = merged(ops::rmsnorm_backward(per_head(dq, d), per_head(L.q_raw, d),
                                      param(P, p + "self_attention.q_layernorm.weight"), L.q_norm.rstd,
                                      grad_buffer(G, p + "self_attention.q_layernorm.weight")));
    dk = merged(ops::rmsnorm_backward(per_head(dk, d), per_head(L.k_raw, d),
                                      param(P, p + "self_attention.k_layernorm.weight"), L.k_norm.rstd,
                                      grad_buffer(G, p + "self_attention.k_layernorm.weight")));
  }
  Tensor da;
  for (const auto& [grad, name] :
       {std::pair{dq, "linear_q"}, std::pair{dk, "linear_k"}, std::pair{g.dv, "linear_v"}}) {
    const std::string w = p + "self_attention." + name + ".weight";
    const LinearGrads lin = linear_backward(grad, L.ln1.y, param(P, w), false);
    accumulate(G, w, lin.dw);
    da = da.defined() ? ops::add(da, lin.dx) : lin.dx;
  }
  const Tensor dln1 = ops::rmsnorm_backward(da, L.x_in, param(P, p + "input_layernorm.weight"), L.ln1.rstd,
                                            grad_buffer(G, p + "input_layernorm.weight"));
  return ops::add(dx_mid, dln1);
}

}  // namespace tpsp::reference
