// LlamaLayer forward/backward and the fused layouts of its weights (see llama_layer.h).
#include "engine/model/llama_layer.h"

#include <functional>
#include <numeric>

#include "engine/error.h"
#include "engine/model/layer_linear_options.h"
#include "engine/ops/rope.h"
#include "engine/ops/swiglu.h"

namespace tpsp::model {

using tensor_parallel::ColumnParallelLinear;
using tensor_parallel::LinearOptions;
using tensor_parallel::RowParallelLinear;

namespace {

/// Which query heads and key/value groups rank r attends with.
struct LocalHeads {
  int64_t groups;      ///< key/value groups on this rank
  int64_t per;         ///< query heads per local group
  bool gathered;       ///< tp > groups: the QKV activation is all-gathered, one group kept
  int64_t group;       ///< (gathered) the group kept: r / (tp / groups)
  int64_t first_head;  ///< (gathered) its first query head within the group
};
LocalHeads local_heads(const LlamaLayerConfig& cfg, int r, int tp) {
  const int64_t G = cfg.groups(), Q = cfg.heads / G;
  if (G % tp == 0) return {G / tp, Q, false, 0, 0};
  const int64_t ranks_per_group = tp / G, per = Q / ranks_per_group;
  return {1, per, true, r / ranks_per_group, (r % ranks_per_group) * per};
}

Tensor cols(const Tensor& t, int64_t start, int64_t width) {
  return t.narrow_copy(2, start, width);
}
Tensor zeros_like_rows(const Tensor& t, int64_t width) {
  return Tensor({t.size(0), t.size(1), width}, DType::f32, t.device());
}

/// q [s, b, groups·per·d], k and v [s, b, groups·d] of the heads [first, first + per) of each group of t,
/// an activation laid out per group with per_in query heads each.
struct QKV {
  Tensor q, k, v;
};
QKV split_groups(const Tensor& t, int64_t groups, int64_t per_in, int64_t first, int64_t per, int64_t d) {
  std::vector<Tensor> q, k, v;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t base = g * (per_in + 2) * d;
    q.push_back(cols(t, base + first * d, per * d));
    k.push_back(cols(t, base + per_in * d, d));
    v.push_back(cols(t, base + (per_in + 1) * d, d));
  }
  return {cat(q, 2), cat(k, 2), cat(v, 2)};
}

/// The per-group layout [q of the group's per heads | k | v] of q, k, v with `groups` groups.
Tensor join_groups(const QKV& x, int64_t groups, int64_t per, int64_t d) {
  std::vector<Tensor> parts;
  for (int64_t g = 0; g < groups; ++g) {
    parts.push_back(cols(x.q, g * per * d, per * d));
    parts.push_back(cols(x.k, g * d, d));
    parts.push_back(cols(x.v, g * d, d));
  }
  return cat(parts, 2);
}

/// The whole [s, b, G·(Q+2)·d] gradient that is zero except for this rank's group: its query heads
/// [first, first + per), its k and its v (the reduce-scatter of the forward's gather sums these).
Tensor scatter_group(const QKV& d_local, const LlamaLayerConfig& cfg, const LocalHeads& L) {
  const int64_t d = cfg.head_dim(), Q = cfg.heads / cfg.groups(), w = (Q + 2) * d;
  std::vector<Tensor> parts;
  auto zeros = [&](int64_t width) {
    if (width > 0) parts.push_back(zeros_like_rows(d_local.q, width));
  };
  zeros(L.group * w + L.first_head * d);
  parts.push_back(d_local.q);
  zeros((Q - L.first_head - L.per) * d);
  parts.push_back(d_local.k);
  parts.push_back(d_local.v);
  zeros((cfg.groups() - L.group - 1) * w);
  return cat(parts, 2);
}

Tensor per_head(const Tensor& x, int64_t d) {
  return x.reshape({x.size(0), x.size(1), x.size(2) / d, d});
}
Tensor merged(const Tensor& x) {
  return x.reshape({x.size(0), x.size(1), x.size(2) * x.size(3)});
}

const Tensor& whole_param(const std::map<std::string, Tensor>& P, const std::string& name) {
  const auto it = P.find(name);
  TPSP_CHECK(it != P.end(), "fuse_llama_layer: parameter '", name, "' is missing");
  return it->second;
}

}  // namespace

std::size_t LlamaLayerSaved::bytes() const {
  std::size_t n = 0;
  for (const Tensor* t : {&x_in, &x_mid, &ln1.y, &ln1.rstd, &ln2.y, &ln2.rstd, &q_raw, &k_raw, &v, &q_norm.y,
                          &q_norm.rstd, &k_norm.y, &k_norm.rstd, &qkv, &attn.out, &attn.probs, &gate_up})
    n += t->nbytes();
  return n + fc2_in.input.nbytes();
}

Tensor fuse_llama_weight(const std::string& name, const LlamaLayerConfig& cfg,
                         const std::function<Tensor(const std::string&)>& part) {
  const std::string qkv = "self_attention.linear_qkv.weight", fc1 = "mlp.linear_fc1.weight";
  if (name.ends_with(fc1)) {
    const std::string p = name.substr(0, name.size() - fc1.size());
    return cat({part(p + "mlp.linear_gate.weight"), part(p + "mlp.linear_up.weight")}, 0);
  }
  TPSP_CHECK(name.ends_with(qkv), "fuse_llama_weight: '", name, "' is not a fused Llama weight");
  const std::string p = name.substr(0, name.size() - qkv.size());
  const int64_t d = cfg.head_dim(), G = cfg.groups(), Q = cfg.heads / G;
  const Tensor wq = part(p + "self_attention.linear_q.weight"),
               wk = part(p + "self_attention.linear_k.weight"),
               wv = part(p + "self_attention.linear_v.weight");
  std::vector<Tensor> rows;  // per group: its Q query heads' rows, then k's and v's d rows
  for (int64_t g = 0; g < G; ++g) {
    rows.push_back(wq.narrow_copy(0, g * Q * d, Q * d));
    rows.push_back(wk.narrow_copy(0, g * d, d));
    rows.push_back(wv.narrow_copy(0, g * d, d));
  }
  return cat(rows, 0);
}

std::map<std::string, Tensor> fuse_llama_layer(const std::map<std::string, Tensor>& W,
                                               const LlamaLayerConfig& cfg, const std::string& p) {
  const auto part = [&](const std::string& n) { return whole_param(W, n); };
  std::map<std::string, Tensor> out;
  for (const char* n : {"self_attention.linear_qkv.weight", "mlp.linear_fc1.weight"})
    out[p + n] = fuse_llama_weight(p + n, cfg, part);
  std::vector<std::string> rest{"input_layernorm.weight", "pre_mlp_layernorm.weight",
                                "self_attention.linear_proj.weight", "mlp.linear_fc2.weight"};
  if (cfg.qk_layernorm)
    rest.insert(rest.end(), {"self_attention.q_layernorm.weight", "self_attention.k_layernorm.weight"});
  for (const std::string& n : rest) out[p + n] = whole_param(W, p + n);
  return out;
}

std::map<std::string, Tensor> fused_model_parameters(const GPTConfig& cfg,
                                                     const std::map<std::string, Tensor>& whole) {
  if (!cfg.llama()) return whole;
  std::map<std::string, Tensor> out = whole;
  for (int64_t i = 0; i < cfg.layers; ++i) {
    const std::string p = "decoder.layers." + std::to_string(i) + ".";
    out.merge(fuse_llama_layer(whole, llama_layer_config(cfg), p));
    for (const char* n : {"self_attention.linear_q.weight", "self_attention.linear_k.weight",
                          "self_attention.linear_v.weight", "mlp.linear_gate.weight", "mlp.linear_up.weight"})
      out.erase(p + n);
  }
  return out;
}

std::map<std::string, Tensor> shard_llama_layer(const std::map<std::string, Tensor>& W,
                                                const LlamaLayerConfig& cfg, const std::string& p, int r,
                                                int tp) {
  cfg.validate(tp);
  const auto specs =
      llama_layer_shard_specs(cfg.hidden, cfg.heads, cfg.groups(), cfg.ffn, cfg.qk_layernorm, p, false);
  std::map<std::string, Tensor> out;
  for (const auto& [name, whole] : fuse_llama_layer(W, cfg, p))
    out[name] = shard_of(whole, specs.at(name).placement, r, tp);
  return out;
}

LlamaLayer::LlamaLayer(const LlamaLayerConfig& cfg, std::string prefix, std::map<std::string, Tensor>& P,
                       std::map<std::string, Tensor>& G, int tp, bool sp, bool overlap)
    : cfg_((cfg.validate(tp), cfg)),
      prefix_(std::move(prefix)),
      tp_(tp),
      ln1_w_(P.at(prefix_ + "input_layernorm.weight")),
      ln2_w_(P.at(prefix_ + "pre_mlp_layernorm.weight")),
      qn_w_(cfg.qk_layernorm ? P.at(prefix_ + "self_attention.q_layernorm.weight") : Tensor()),
      kn_w_(cfg.qk_layernorm ? P.at(prefix_ + "self_attention.k_layernorm.weight") : Tensor()),
      dln1_w_(G.at(prefix_ + "input_layernorm.weight")),
      dln2_w_(G.at(prefix_ + "pre_mlp_layernorm.weight")),
      dqn_w_(cfg.qk_layernorm ? G.at(prefix_ + "self_attention.q_layernorm.weight") : Tensor()),
      dkn_w_(cfg.qk_layernorm ? G.at(prefix_ + "self_attention.k_layernorm.weight") : Tensor()),
      qkv_(P.at(prefix_ + "self_attention.linear_qkv.weight"), Tensor(),
           G.at(prefix_ + "self_attention.linear_qkv.weight"), Tensor(), layer_linear_options(sp, overlap),
           prefix_ + "self_attention.linear_qkv"),
      fc1_(P.at(prefix_ + "mlp.linear_fc1.weight"), Tensor(), G.at(prefix_ + "mlp.linear_fc1.weight"),
           Tensor(), layer_linear_options(sp, overlap), prefix_ + "mlp.linear_fc1"),
      proj_(P.at(prefix_ + "self_attention.linear_proj.weight"), Tensor(),
            G.at(prefix_ + "self_attention.linear_proj.weight"), Tensor(), layer_linear_options(sp, overlap),
            prefix_ + "self_attention.linear_proj"),
      fc2_(P.at(prefix_ + "mlp.linear_fc2.weight"), Tensor(), G.at(prefix_ + "mlp.linear_fc2.weight"),
           Tensor(), layer_linear_options(sp, overlap), prefix_ + "mlp.linear_fc2") {}

Tensor LlamaLayer::forward(const Tensor& x, LlamaLayerSaved& S, const LayerContext& ctx,
                           const std::vector<int64_t>& positions) const {
  const int tp = ctx.tp->size(), r = ctx.tp->rank();
  TPSP_CHECK(tp == tp_, prefix_, "forward: the layer was built for tp=", tp_, ", the group has ", tp,
             " ranks");
  TPSP_CHECK(!ctx.sequence_parallel || ctx.seq % tp == 0, prefix_,
             "forward: sequence parallelism needs s=", ctx.seq, " divisible by tp=", tp);
  const int64_t rows = ctx.sequence_parallel ? ctx.seq / tp : ctx.seq, d = cfg_.head_dim();
  TPSP_CHECK(x.dim() == 3 && x.size(0) == rows && x.size(1) == ctx.batch && x.size(2) == cfg_.hidden, prefix_,
             "forward: input ", shape_str(x.shape()), " disagrees with LayerContext s=", ctx.seq,
             " b=", ctx.batch, " h=", cfg_.hidden,
             ctx.sequence_parallel ? " under SP ([s/tp, b, h])" : " ([s, b, h])");
  TPSP_CHECK(positions.empty() || static_cast<int64_t>(positions.size()) == ctx.seq, prefix_,
             "forward: ", positions.size(), " positions for s=", ctx.seq, " tokens");
  S.positions = positions;
  if (S.positions.empty()) {
    S.positions.resize(static_cast<std::size_t>(ctx.seq));
    std::iota(S.positions.begin(), S.positions.end(), int64_t{0});
  }
  const LocalHeads L = local_heads(cfg_, r, tp);
  S.x_in = x;
  S.ln1 = ops::rmsnorm_forward(x, ln1_w_, cfg_.norm_eps);
  Tensor qkv = qkv_.forward(S.ln1.y, S.qkv_in, *ctx.tp);  // [s, b, rows/tp] (SP: gathered over s)
  QKV parts;
  if (L.gathered) {
    const Tensor whole = ctx.tp->all_gather(qkv, 2, {prefix_ + "self_attention.qkv_gather"});
    const int64_t Q = cfg_.heads / cfg_.groups();
    parts = split_groups(cols(whole, L.group * (Q + 2) * d, (Q + 2) * d), 1, Q, L.first_head, L.per, d);
  } else {
    parts = split_groups(qkv, L.groups, L.per, 0, L.per, d);
  }
  S.q_raw = parts.q;
  S.k_raw = parts.k;
  S.v = parts.v;
  if (cfg_.qk_layernorm) {
    S.q_norm = ops::rmsnorm_forward(per_head(parts.q, d), qn_w_, cfg_.norm_eps);
    S.k_norm = ops::rmsnorm_forward(per_head(parts.k, d), kn_w_, cfg_.norm_eps);
    parts.q = merged(S.q_norm.y);
    parts.k = merged(S.k_norm.y);
  }
  parts.q = ops::rope_forward(parts.q, S.positions, d, cfg_.rotary_base);
  parts.k = ops::rope_forward(parts.k, S.positions, d, cfg_.rotary_base);
  S.qkv = join_groups(parts, L.groups, L.per, d);
  S.attn_opt.heads = L.groups * L.per;
  S.attn_opt.query_groups = L.groups;
  S.attn_opt.key_padding_mask = ctx.key_padding_mask;
  S.attn_opt.cu_seqlens = ctx.cu_seqlens;
  S.attn = ops::attention_forward(S.qkv, S.attn_opt);
  S.x_mid = ops::add(x, proj_.forward(S.attn.out, S.proj_in, *ctx.tp));

  S.ln2 = ops::rmsnorm_forward(S.x_mid, ln2_w_, cfg_.norm_eps);
  S.gate_up = fc1_.forward(S.ln2.y, S.fc1_in, *ctx.tp);  // [gate_r | up_r]
  return ops::add(S.x_mid, fc2_.forward(ops::swiglu_forward(S.gate_up), S.fc2_in, *ctx.tp));
}

Tensor LlamaLayer::backward(const Tensor& dy, const LlamaLayerSaved& S, const LayerContext& ctx) {
  const int tp = ctx.tp->size(), r = ctx.tp->rank();
  const int64_t d = cfg_.head_dim();
  const LocalHeads L = local_heads(cfg_, r, tp);
  // MLP block: y = x_mid + fc2(swiglu(fc1(RMSNorm(x_mid)))).
  const Tensor dact = fc2_.backward(dy, S.fc2_in, *ctx.tp);
  const Tensor dm = fc1_.backward(ops::swiglu_backward(dact, S.gate_up), S.fc1_in, *ctx.tp);
  const Tensor dx_mid = ops::add(dy, ops::rmsnorm_backward(dm, S.x_mid, ln2_w_, S.ln2.rstd, dln2_w_));

  // Attention block: x_mid = x_in + proj(attention(rope(norm(q)), rope(norm(k)), v)).
  const Tensor dattn = proj_.backward(dx_mid, S.proj_in, *ctx.tp);
  QKV g = split_groups(ops::attention_backward(dattn, S.qkv, S.attn.probs, S.attn_opt), L.groups, L.per, 0,
                       L.per, d);
  g.q = ops::rope_backward(g.q, S.positions, d, cfg_.rotary_base);
  g.k = ops::rope_backward(g.k, S.positions, d, cfg_.rotary_base);
  if (cfg_.qk_layernorm) {
    g.q = merged(ops::rmsnorm_backward(per_head(g.q, d), per_head(S.q_raw, d), qn_w_, S.q_norm.rstd, dqn_w_));
    g.k = merged(ops::rmsnorm_backward(per_head(g.k, d), per_head(S.k_raw, d), kn_w_, S.k_norm.rstd, dkn_w_));
  }
  const Tensor dqkv = L.gathered ? ctx.tp->reduce_scatter(scatter_group(g, cfg_, L), 2, comm::ReduceOp::sum,
                                                          {prefix_ + "self_attention.qkv_gather"})
                                 : join_groups(g, L.groups, L.per, d);
  const Tensor da = qkv_.backward(dqkv, S.qkv_in, *ctx.tp);
  return ops::add(dx_mid, ops::rmsnorm_backward(da, S.x_in, ln1_w_, S.ln1.rstd, dln1_w_));
}

}  // namespace tpsp::model
