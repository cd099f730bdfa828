#include "reference/transformer_layer.h"

#include "engine/error.h"
#include "reference/linear.h"

namespace tpsp::reference {

namespace {

ops::DropoutKey key(const LayerSpec& spec, const std::string& site, const Shape& whole) {
  return {spec.seed, ops::dropout_stream(site, spec.iteration), whole, {}};
}

}  // namespace

std::size_t LayerActs::bytes() const {
  std::size_t n = 0;
  for (const Tensor* t : {&x_in, &ln1.y, &ln1.mean, &ln1.rstd, &qkv, &attn.out, &attn.probs, &x_mid, &ln2.y,
                          &ln2.mean, &ln2.rstd, &fc1, &act})
    n += t->nbytes();
  return n;
}

Tensor layer_forward(const Tensor& x, const ParamMap& P, const std::string& p, const LayerSpec& spec,
                     LayerActs& L) {
  TPSP_CHECK(x.dim() == 3 && x.size(2) == spec.hidden, "reference layer: x must be [s, b, h=", spec.hidden,
             "], got ", shape_str(x.shape()));
  const int64_t s = x.size(0), b = x.size(1);
  L.x_in = x;
  L.ln1 = ops::layernorm_forward(x, param(P, p + "input_layernorm.weight"),
                                 param(P, p + "input_layernorm.bias"), spec.ln_eps);
  L.qkv = linear_forward(L.ln1.y, param(P, p + "self_attention.linear_qkv.weight"),
                         param(P, p + "self_attention.linear_qkv.bias"));
  L.attn_opt.heads = spec.heads;
  L.attn_opt.dropout_p = spec.dropout;
  L.attn_opt.dropout_key = key(spec, p + "attention", {b, spec.heads, s, s});
  L.attn = ops::attention_forward(L.qkv, L.attn_opt);
  const Tensor proj = linear_forward(L.attn.out, param(P, p + "self_attention.linear_proj.weight"),
                                     param(P, p + "self_attention.linear_proj.bias"));
  L.drop_attn = key(spec, p + "hidden_attn", {s, b, spec.hidden});
  L.x_mid = ops::add(x, ops::dropout_forward(proj, spec.dropout, L.drop_attn));

  L.ln2 = ops::layernorm_forward(L.x_mid, param(P, p + "pre_mlp_layernorm.weight"),
                                 param(P, p + "pre_mlp_layernorm.bias"), spec.ln_eps);
  L.fc1 = linear_forward(L.ln2.y, param(P, p + "mlp.linear_fc1.weight"), param(P, p + "mlp.linear_fc1.bias"));
  L.act = ops::gelu_forward(L.fc1);
  const Tensor fc2 =
      linear_forward(L.act, param(P, p + "mlp.linear_fc2.weight"), param(P, p + "mlp.linear_fc2.bias"));
  L.drop_mlp = key(spec, p + "hidden_mlp", {s, b, spec.hidden});
  return ops::add(L.x_mid, ops::dropout_forward(fc2, spec.dropout, L.drop_mlp));
}

Tensor layer_backward(const Tensor& dy, const ParamMap& P, const std::string& p, const LayerSpec& spec,
                      const LayerActs& L, ParamMap& G) {
  // MLP block: y = x_mid + dropout(fc2(gelu(fc1(ln2(x_mid))))).
  const Tensor dfc2 = ops::dropout_backward(dy, spec.dropout, L.drop_mlp);
  const LinearGrads fc2 = linear_backward(dfc2, L.act, param(P, p + "mlp.linear_fc2.weight"), true);
  accumulate(G, p + "mlp.linear_fc2.weight", fc2.dw);
  accumulate(G, p + "mlp.linear_fc2.bias", fc2.db);
  const LinearGrads fc1 = linear_backward(ops::gelu_backward(fc2.dx, L.fc1), L.ln2.y,
                                          param(P, p + "mlp.linear_fc1.weight"), true);
  accumulate(G, p + "mlp.linear_fc1.weight", fc1.dw);
  accumulate(G, p + "mlp.linear_fc1.bias", fc1.db);
  const ops::LayerNormGrads ln2 = ops::layernorm_backward(
      fc1.dx, L.x_mid, param(P, p + "pre_mlp_layernorm.weight"), L.ln2.mean, L.ln2.rstd);
  accumulate(G, p + "pre_mlp_layernorm.weight", ln2.dgamma);
  accumulate(G, p + "pre_mlp_layernorm.bias", ln2.dbeta);
  const Tensor dx_mid = ops::add(dy, ln2.dx);

  // Attention block: x_mid = x_in + dropout(proj(attn(qkv(ln1(x_in))))).
  const Tensor dproj = ops::dropout_backward(dx_mid, spec.dropout, L.drop_attn);
  const LinearGrads proj =
      linear_backward(dproj, L.attn.out, param(P, p + "self_attention.linear_proj.weight"), true);
  accumulate(G, p + "self_attention.linear_proj.weight", proj.dw);
  accumulate(G, p + "self_attention.linear_proj.bias", proj.db);
  const Tensor dqkv = ops::attention_backward(proj.dx, L.qkv, L.attn.probs, L.attn_opt);
  const LinearGrads qkv =
      linear_backward(dqkv, L.ln1.y, param(P, p + "self_attention.linear_qkv.weight"), true);
  accumulate(G, p + "self_attention.linear_qkv.weight", qkv.dw);
  accumulate(G, p + "self_attention.linear_qkv.bias", qkv.db);
  const ops::LayerNormGrads ln1 =
      ops::layernorm_backward(qkv.dx, L.x_in, param(P, p + "input_layernorm.weight"), L.ln1.mean, L.ln1.rstd);
  accumulate(G, p + "input_layernorm.weight", ln1.dgamma);
  accumulate(G, p + "input_layernorm.bias", ln1.dbeta);
  return ops::add(dx_mid, ln1.dx);
}

}  // namespace tpsp::reference
