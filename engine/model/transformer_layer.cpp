// TransformerLayer forward/backward (see transformer_layer.h): lab02's tasks; lab02 replaces this file.
// The layer's construction, its dropout keys and LayerSaved::bytes are transformer_layer_parts.cpp's.
#include "engine/model/transformer_layer.h"

#include "engine/error.h"
#include "engine/lab_todo.h"

namespace tpsp::model {

Tensor TransformerLayer::forward(const Tensor& x, LayerSaved& S, const LayerContext& ctx) const {
  // The input must be what the context says, on every rank, before any collective: [s, b, h], or this
  // rank's [s/tp, b, h] under sequence parallelism.
  const int64_t tp_size = ctx.tp->size();
  TPSP_CHECK(!ctx.sequence_parallel || ctx.seq % tp_size == 0, prefix_,
             "forward: sequence parallelism needs s=", ctx.seq, " divisible by tp=", tp_size);
  const int64_t rows = ctx.sequence_parallel ? ctx.seq / tp_size : ctx.seq;
  TPSP_CHECK(x.dim() == 3 && x.size(0) == rows && x.size(1) == ctx.batch && x.size(2) == cfg_.hidden, prefix_,
             "forward: input ", shape_str(x.shape()), " disagrees with LayerContext s=", ctx.seq,
             ", b=", ctx.batch, ", h=", cfg_.hidden,
             ctx.sequence_parallel ? " under SP: expected [s/tp, b, h] = " : ": expected ",
             shape_str({rows, ctx.batch, cfg_.hidden}));
  // TODO(lab02 TransformerLayer forward): x [s, b, h] (under SP: this rank's rows [s/tp, b, h]) -> y of the
  // same shape = the single-process pre-LN layer (reference/transformer_layer.h) on those rows, with the
  // reference's dropout masks bit for bit, and attention only within each packed sequence (ctx.cu_seqlens);
  // fill `saved`. Communication only through the linear layers, on
  // tp: 2 all-reduces of [s, b, h] (under SP: 2 all-gathers and 2 reduce-scatters along dim 0).
  // BEGIN SOLUTION
  comm::ProcessGroup& tp = *ctx.tp;
  const int64_t heads_local = cfg_.heads / tp.size();
  S.x_in = x;
  S.ln1 = ops::layernorm_forward(x, ln1_w_, ln1_b_, cfg_.ln_eps);
  S.qkv = qkv_.forward(S.ln1.y, S.qkv_in, tp);
  S.attn_opt.heads = heads_local;
  S.attn_opt.key_padding_mask = ctx.key_padding_mask;
  S.attn_opt.cu_seqlens = ctx.cu_seqlens;
  S.attn_opt.dropout_p = cfg_.dropout;
  S.attn_opt.dropout_key = {ctx.seed,
                            ops::dropout_stream(prefix_ + "attention", ctx.iteration),
                            {ctx.batch, cfg_.heads, ctx.seq, ctx.seq},
                            {0, tp.rank() * heads_local, 0, 0}};
  S.attn = ops::attention_forward(S.qkv, S.attn_opt);
  Tensor proj = proj_.forward(S.attn.out, S.proj_in, tp);
  S.drop_attn = hidden_key("hidden_attn", ctx, x.size(0));
  S.x_mid = ops::add(x, ops::dropout_forward(proj, cfg_.dropout, S.drop_attn));

  S.ln2 = ops::layernorm_forward(S.x_mid, ln2_w_, ln2_b_, cfg_.ln_eps);
  S.fc1 = fc1_.forward(S.ln2.y, S.fc1_in, tp);
  Tensor fc2 = fc2_.forward(ops::gelu_forward(S.fc1), S.fc2_in, tp);
  S.drop_mlp = hidden_key("hidden_mlp", ctx, x.size(0));
  return ops::add(S.x_mid, ops::dropout_forward(fc2, cfg_.dropout, S.drop_mlp));
  // END SOLUTION
}

Tensor TransformerLayer::backward(const Tensor& dy, const LayerSaved& S, const LayerContext& ctx) {
  // TODO(lab02 TransformerLayer backward): dy shaped as y -> dx shaped as x = the single-process dX on
  // those rows; every parameter gradient added (+=) to its buffer (this rank's shard of a split weight).
  // Communication only through the linear layers, on tp per pass: 2 all-reduces of [s, b, h] (under SP: 4
  // all-gathers and 2 reduce-scatters along dim 0).
  // BEGIN SOLUTION
  comm::ProcessGroup& tp = *ctx.tp;
  // MLP block, mirrored: residual → dropout → fc2 (row) → GELU → fc1 (column) → LN.
  Tensor dfc2 = ops::dropout_backward(dy, cfg_.dropout, S.drop_mlp);
  Tensor dact = fc2_.backward(dfc2, S.fc2_in, tp);
  Tensor dfc1 = ops::gelu_backward(dact, S.fc1);
  Tensor dln2 = fc1_.backward(dfc1, S.fc1_in, tp);
  ops::LayerNormGrads g2 = ops::layernorm_backward(dln2, S.x_mid, ln2_w_, S.ln2.mean, S.ln2.rstd);
  ops::add_(dln2_w_, g2.dgamma);
  ops::add_(dln2_b_, g2.dbeta);
  Tensor dx_mid = ops::add(dy, g2.dx);

  // Attention block, mirrored: residual → dropout → proj (row) → attention → QKV (column) → LN.
  Tensor dproj = ops::dropout_backward(dx_mid, cfg_.dropout, S.drop_attn);
  Tensor dattn = proj_.backward(dproj, S.proj_in, tp);
  Tensor dqkv = ops::attention_backward(dattn, S.qkv, S.attn.probs, S.attn_opt);
  Tensor dln1 = qkv_.backward(dqkv, S.qkv_in, tp);
  ops::LayerNormGrads g1 = ops::layernorm_backward(dln1, S.x_in, ln1_w_, S.ln1.mean, S.ln1.rstd);
  ops::add_(dln1_w_, g1.dgamma);
  ops::add_(dln1_b_, g1.dbeta);
  return ops::add(dx_mid, g1.dx);
  // END SOLUTION
}

}  // namespace tpsp::model
