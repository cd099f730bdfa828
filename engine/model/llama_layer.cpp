// LlamaLayer forward/backward (see llama_layer.h); the fused layouts are in llama_fuse.cpp, the
// tensor-parallel pieces lab05 writes in llama_tp.cpp.
#include "engine/model/llama_layer.h"

#include "engine/error.h"
#include "engine/model/layer_linear_options.h"
#include "engine/model/llama_tp.h"
#include "engine/ops/rope.h"
#include "engine/ops/swiglu.h"

namespace tpsp::model {

using tensor_parallel::ColumnParallelLinear;
using tensor_parallel::LinearOptions;
using tensor_parallel::RowParallelLinear;

namespace {

Tensor per_head(const Tensor& x, int64_t d) {
  return x.reshape({x.size(0), x.size(1), x.size(2) / d, d});
}
Tensor merged(const Tensor& x) {
  return x.reshape({x.size(0), x.size(1), x.size(2) * x.size(3)});
}

}  // namespace

std::size_t LlamaLayerSaved::bytes() const {
  std::size_t n = 0;
  for (const Tensor* t : {&x_in, &x_mid, &ln1.y, &ln1.rstd, &ln2.y, &ln2.rstd, &q_raw, &k_raw, &v, &q_norm.y,
                          &q_norm.rstd, &k_norm.y, &k_norm.rstd, &qkv, &attn.out, &attn.probs, &gate_up})
    n += t->nbytes();
  for (const std::vector<Tensor>* ts : {&moe.xin, &moe.gate_up, &moe.act})  // an MoE layer's experts
    for (const Tensor& t : *ts) n += t.nbytes();
  return n + fc2_in.input.nbytes() + moe.combined.nbytes();
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
      proj_(P.at(prefix_ + "self_attention.linear_proj.weight"), Tensor(),
            G.at(prefix_ + "self_attention.linear_proj.weight"), Tensor(), layer_linear_options(sp, overlap),
            prefix_ + "self_attention.linear_proj") {
  if (!cfg_.moe()) {
    fc1_.emplace(P.at(prefix_ + "mlp.linear_fc1.weight"), Tensor(), G.at(prefix_ + "mlp.linear_fc1.weight"),
                 Tensor(), layer_linear_options(sp, overlap), prefix_ + "mlp.linear_fc1");
    fc2_.emplace(P.at(prefix_ + "mlp.linear_fc2.weight"), Tensor(), G.at(prefix_ + "mlp.linear_fc2.weight"),
                 Tensor(), layer_linear_options(sp, overlap), prefix_ + "mlp.linear_fc2");
    return;
  }
  const auto at = [&](std::map<std::string, Tensor>& m, const std::string& name) -> Tensor& {
    const auto it = m.find(name);
    TPSP_CHECK(it != m.end(), prefix_, "MoE layer: parameter '", name, "' is missing");
    return it->second;
  };
  moe_w_.router = at(P, prefix_ + "mlp.router.weight");
  moe_g_.router = at(G, prefix_ + "mlp.router.weight");
  for (int64_t e = 0; e < cfg_.num_moe_experts; ++e) {  // the local experts: those the maps hold
    const std::string p = moe_expert_prefix(prefix_, e);
    if (P.find(p + "linear_gate.weight") == P.end()) continue;
    if (moe_w_.experts.empty()) moe_w_.first_expert = e;
    TPSP_CHECK(e == moe_w_.first_expert + static_cast<int64_t>(moe_w_.experts.size()), prefix_,
               "MoE layer: the local experts must be consecutive (expert ", e, " follows a gap)");
    moe_w_.experts.push_back(
        {at(P, p + "linear_gate.weight"), at(P, p + "linear_up.weight"), at(P, p + "linear_fc2.weight")});
    moe_g_.experts.push_back(
        {at(G, p + "linear_gate.weight"), at(G, p + "linear_up.weight"), at(G, p + "linear_fc2.weight")});
  }
}

moe::MoEOptions LlamaLayer::moe_options(const LayerContext& ctx) const {
  return {cfg_.num_moe_experts, cfg_.moe_router_topk, cfg_.moe_aux_loss_coeff,
          ctx.sequence_parallel ? ctx.tp : nullptr, prefix_ + "mlp"};
}

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
  TPSP_CHECK(!cfg_.moe() || ctx.experts != nullptr, prefix_,
             "forward: an MoE layer needs LayerContext.experts");
  if (cfg_.moe() && ctx.experts != nullptr)  // a rank holding other experts fails before its peers wait
    moe::check_moe_weights(moe_w_, moe_options(ctx), *ctx.experts, cfg_.hidden);
  TPSP_CHECK(!cfg_.moe() || tp == 1 || ctx.sequence_parallel, prefix_, "forward: an MoE layer at tp=", tp,
             " needs sequence parallelism (Megatron's rule: without it every TP rank would dispatch the same "
             "tokens)");
  TPSP_CHECK(positions.empty() || static_cast<int64_t>(positions.size()) == ctx.seq, prefix_,
             "forward: ", positions.size(), " positions for s=", ctx.seq, " tokens");
  S.positions = positions.empty() ? rotary_positions(x.size(0), ctx) : positions;
  TPSP_CHECK(static_cast<int64_t>(S.positions.size()) == ctx.seq, prefix_, "forward: rotary_positions gave ",
             S.positions.size(), " positions for s=", ctx.seq,
             " tokens (one per token of the whole sequence)");
  const LocalHeads L = local_heads(cfg_, r, tp);
  S.x_in = x;
  S.ln1 = ops::rmsnorm_forward(x, ln1_w_, cfg_.norm_eps);
  const Tensor qkv = qkv_.forward(S.ln1.y, S.qkv_in, *ctx.tp);  // [s, b, rows/tp] (SP: gathered over s)
  QKV parts = qkv_to_local_heads(qkv, cfg_, L, *ctx.tp, prefix_ + "self_attention.qkv_gather");
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
  if (cfg_.moe()) {  // the MoE layer on this rank's tokens: its sequence shard under SP, flattened
    const Tensor tokens = S.ln2.y.reshape({S.ln2.y.size(0) * S.ln2.y.size(1), cfg_.hidden});
    const Tensor y = moe::moe_forward(tokens, moe_w_, moe_options(ctx), *ctx.experts, S.moe);
    S.aux_loss = S.moe.aux_loss;
    return ops::add(S.x_mid, y.reshape(S.x_mid.shape()));
  }
  S.gate_up = fc1_->forward(S.ln2.y, S.fc1_in, *ctx.tp);  // [gate_r | up_r]
  return ops::add(S.x_mid, fc2_->forward(ops::swiglu_forward(S.gate_up), S.fc2_in, *ctx.tp));
}

Tensor LlamaLayer::backward(const Tensor& dy, const LlamaLayerSaved& S, const LayerContext& ctx,
                            float aux_loss_scale) {
  const int tp = ctx.tp->size(), r = ctx.tp->rank();
  const int64_t d = cfg_.head_dim();
  const LocalHeads L = local_heads(cfg_, r, tp);
  // MLP block: y = x_mid + fc2(swiglu(fc1(RMSNorm(x_mid)))), or x_mid + MoE(RMSNorm(x_mid)) whose
  // load-balancing loss enters the loss with weight aux_loss_scale (Megatron's MoEAuxLossAutoScaler: the
  // main loss's scale).
  Tensor dm;
  if (cfg_.moe()) {
    const Tensor dtokens = dy.reshape({dy.size(0) * dy.size(1), cfg_.hidden});
    dm = moe::moe_backward(dtokens, moe_w_, moe_options(ctx), *ctx.experts, S.moe, aux_loss_scale, moe_g_)
             .reshape(dy.shape());
  } else {
    const Tensor dact = fc2_->backward(dy, S.fc2_in, *ctx.tp);
    dm = fc1_->backward(ops::swiglu_backward(dact, S.gate_up), S.fc1_in, *ctx.tp);
  }
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
  const Tensor dqkv = local_heads_to_qkv_grad(g, cfg_, L, *ctx.tp, prefix_ + "self_attention.qkv_gather");
  const Tensor da = qkv_.backward(dqkv, S.qkv_in, *ctx.tp);
  return ops::add(dx_mid, ops::rmsnorm_backward(da, S.x_in, ln1_w_, S.ln1.rstd, dln1_w_));
}

}  // namespace tpsp::model
