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
  TPSP_LAB_TODO("lab02 TransformerLayer forward");
}

Tensor TransformerLayer::backward(const Tensor& dy, const LayerSaved& S, const LayerContext& ctx) {
  // TODO(lab02 TransformerLayer backward): dy shaped as y -> dx shaped as x = the single-process dX on
  // those rows; every parameter gradient added (+=) to its buffer (this rank's shard of a split weight).
  // Communication only through the linear layers, on tp per pass: 2 all-reduces of [s, b, h] (under SP: 4
  // all-gathers and 2 reduce-scatters along dim 0).
  TPSP_LAB_TODO("lab02 TransformerLayer backward");
}

}  // namespace tpsp::model
