// TransformerLayer forward/backward (see transformer_layer.h). lab02 replaces this file.
#include "engine/model/transformer_layer.h"

#include "engine/error.h"
#include "engine/lab_todo.h"

namespace tpsp::model {

using tensor_parallel::ColumnParallelLinear;
using tensor_parallel::LinearOptions;
using tensor_parallel::RowParallelLinear;

namespace {
LinearOptions linear_opts(bool sp, bool overlap) {
  return {.gather_output = false,
          .input_is_parallel = true,
          .skip_bias_add = false,
          .sequence_parallel = sp,
          .tp_comm_overlap = overlap};
}
}  // namespace

std::size_t LayerSaved::bytes() const {
  std::size_t n = 0;
  for (const Tensor* t : {&x_in, &x_mid, &ln1.y, &ln1.mean, &ln1.rstd, &ln2.y, &ln2.mean, &ln2.rstd, &qkv,
                          &attn.out, &attn.probs, &fc1})
    n += t->nbytes();
  // qkv_in = ln1.y, proj_in = attn.out, fc1_in = ln2.y, fc2_in = GELU(fc1): only fc2_in is new.
  return n + fc2_in.input.nbytes();
}

TransformerLayer::TransformerLayer(const GPTConfig& cfg, int64_t index, std::map<std::string, Tensor>& P,
                                   std::map<std::string, Tensor>& G, bool sp, bool overlap)
    : cfg_(cfg),
      prefix_("decoder.layers." + std::to_string(index) + "."),
      ln1_w_(P.at(prefix_ + "input_layernorm.weight")),
      ln1_b_(P.at(prefix_ + "input_layernorm.bias")),
      ln2_w_(P.at(prefix_ + "pre_mlp_layernorm.weight")),
      ln2_b_(P.at(prefix_ + "pre_mlp_layernorm.bias")),
      dln1_w_(G.at(prefix_ + "input_layernorm.weight")),
      dln1_b_(G.at(prefix_ + "input_layernorm.bias")),
      dln2_w_(G.at(prefix_ + "pre_mlp_layernorm.weight")),
      dln2_b_(G.at(prefix_ + "pre_mlp_layernorm.bias")),
      qkv_(P.at(prefix_ + "self_attention.linear_qkv.weight"),
           P.at(prefix_ + "self_attention.linear_qkv.bias"),
           G.at(prefix_ + "self_attention.linear_qkv.weight"),
           G.at(prefix_ + "self_attention.linear_qkv.bias"), linear_opts(sp, overlap),
           prefix_ + "self_attention.linear_qkv"),
      fc1_(P.at(prefix_ + "mlp.linear_fc1.weight"), P.at(prefix_ + "mlp.linear_fc1.bias"),
           G.at(prefix_ + "mlp.linear_fc1.weight"), G.at(prefix_ + "mlp.linear_fc1.bias"),
           linear_opts(sp, overlap), prefix_ + "mlp.linear_fc1"),
      proj_(P.at(prefix_ + "self_attention.linear_proj.weight"),
            P.at(prefix_ + "self_attention.linear_proj.bias"),
            G.at(prefix_ + "self_attention.linear_proj.weight"),
            G.at(prefix_ + "self_attention.linear_proj.bias"), linear_opts(sp, overlap),
            prefix_ + "self_attention.linear_proj"),
      fc2_(P.at(prefix_ + "mlp.linear_fc2.weight"), P.at(prefix_ + "mlp.linear_fc2.bias"),
           G.at(prefix_ + "mlp.linear_fc2.weight"), G.at(prefix_ + "mlp.linear_fc2.bias"),
           linear_opts(sp, overlap), prefix_ + "mlp.linear_fc2") {}

ops::DropoutKey TransformerLayer::hidden_key(const std::string& site, const LayerContext& ctx,
                                             int64_t local_rows) const {
  // Shard-invariant: the key names the element's place in the whole [s, b, h] tensor, so the
  // shards of an SP run draw the reference's mask bits (and without SP every TP rank draws the same).
  const int64_t first_row = ctx.sequence_parallel ? ctx.tp->rank() * local_rows : 0;
  return {ctx.seed,
          ops::dropout_stream(prefix_ + site, ctx.iteration),
          {ctx.seq, ctx.batch, cfg_.hidden},
          {first_row, 0, 0}};
}

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
  TPSP_LAB_TODO("lab02 TransformerLayer forward: x [s, b, h] (under SP: this rank's rows [s/tp, b, h]) -> y of the same shape = the single-process pre-LN layer (reference/transformer_layer.h) on those rows, with the reference's dropout masks bit for bit, and attention only within each packed sequence (ctx.cu_seqlens); fill `saved`. Communication only through the linear layers, on tp: 2 all-reduces of [s, b, h] (under SP: 2 all-gathers and 2 reduce-scatters along dim 0)");
}

Tensor TransformerLayer::backward(const Tensor& dy, const LayerSaved& S, const LayerContext& ctx) {
  // TODO(lab02 TransformerLayer backward): dy shaped as y -> dx shaped as x = the single-process dX on
  // those rows; every parameter gradient added (+=) to its buffer (this rank's shard of a split weight).
  // Communication only through the linear layers, on tp per pass: 2 all-reduces of [s, b, h] (under SP: 4
  // all-gathers and 2 reduce-scatters along dim 0).
  TPSP_LAB_TODO("lab02 TransformerLayer backward: dy shaped as y -> dx shaped as x = the single-process dX on those rows; every parameter gradient added (+=) to its buffer (this rank's shard of a split weight). Communication only through the linear layers, on tp per pass: 2 all-reduces of [s, b, h] (under SP: 4 all-gathers and 2 reduce-scatters along dim 0)");
}

}  // namespace tpsp::model
