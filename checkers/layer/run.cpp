// The transformer-layer scenarios on the ranks: the learner's TransformerLayer (lab02) and, under
// SP, the learner's sequence-parallel mappings and gradient reduction (lab03).
#include "checkers/layer/run.h"

#include "checkers/layer/layer.h"
#include "engine/model/finalize_grads.h"
#include "engine/model/transformer_layer.h"

namespace tpsp::checkers::layer {

namespace {

struct Built {
  std::map<std::string, Tensor> params, grads;
};

/// This rank's shards of layer 0's parameters and zeroed gradient buffers, on the scenario's device.
Built build(const RunContext& ctx) {
  Built b;
  for (const auto& [name, shard] : whole_params(ctx.in)) {
    b.params[name] = ctx.on_device(shard);
    b.grads[name] = Tensor(b.params[name].shape(), DType::f32, ctx.device);
  }
  return b;
}

model::LayerContext layer_context(RunContext& ctx) {
  return {ctx.tp, ctx.sp, ctx.model_seed, kIteration, S, B};
}

}  // namespace

RankOutputs run_layer(RunContext& ctx) {
  Built b = build(ctx);
  model::TransformerLayer tl(config(), 0, b.params, b.grads, ctx.sp);
  const Tensor x = ctx.on_device(layer_x(ctx.in, ctx.sp)), dy = ctx.on_device(layer_dy(ctx.in, ctx.sp));
  model::LayerSaved saved;
  const model::LayerContext lc = layer_context(ctx);
  ctx.begin_phase("forward");
  const Tensor y = guarded("TransformerLayer.forward", {{"x", &x}}, [&] { return tl.forward(x, saved, lc); });
  ctx.begin_phase("backward");
  Tensor dx;
  for (int pass = 0; pass < kPasses; ++pass)
    dx = guarded("TransformerLayer.backward", {{"dy", &dy}}, [&] { return tl.backward(dy, saved, lc); });
  if (ctx.sp) {
    ctx.begin_phase("grad_sync");
    std::vector<Tensor*> sp_grads;
    for (auto& [name, g] : b.grads)
      if (split_of(name) < 0) sp_grads.push_back(&g);
    model::allreduce_sequence_parallel_grads(sp_grads, *ctx.tp);
  }
  RankOutputs out{{"y", y.clone()}, {"dx", dx.clone()}};
  for (auto& [name, g] : b.grads) out["grad." + name.substr(kPrefix.size())] = g;
  return out;
}

RankOutputs run_layer_memory(RunContext& ctx) {
  Built b = build(ctx);
  model::TransformerLayer tl(config(), 0, b.params, b.grads, ctx.sp);
  const Tensor x = ctx.on_device(layer_x(ctx.in, ctx.sp));
  model::LayerSaved saved;
  ctx.begin_phase("forward");
  tl.forward(x, saved, layer_context(ctx));
  return {{"activation_bytes", ctx.on_device(Tensor::from({1}, {static_cast<float>(saved.bytes())}))}};
}

RankOutputs run_layer_wrong_seq(RunContext& ctx) {
  // ctx.seq says s=12 but the input holds one row fewer than the layer must receive (s, or s/tp under
  // SP): the layer must refuse, on every rank, before computing on the wrong number of tokens.
  Built b = build(ctx);
  model::TransformerLayer tl(config(), 0, b.params, b.grads, ctx.sp);
  const Tensor x =
      ctx.on_device(layer_x(ctx.in, ctx.sp).slice0(0, (ctx.sp ? S / ctx.size() : S) - 1).clone());
  model::LayerSaved saved;
  float refused = 0;
  ctx.begin_phase("forward");
  try {
    tl.forward(x, saved, layer_context(ctx));
  } catch (const std::invalid_argument&) {
    refused = 1;
  }
  RankOutputs out{
      {"refuses_input_rows_that_disagree_with_ctx_seq", ctx.on_device(Tensor::from({1}, {refused}))}};
  // And it computes on the rows it should get: a layer that refuses everything (or the untouched
  // skeleton, whose check is already written) does not pass.
  const Tensor whole = ctx.on_device(layer_x(ctx.in, ctx.sp));
  model::LayerSaved saved_whole;
  check_accepts(ctx, out, "input_rows_of_ctx_seq",
                [&] { tl.forward(whole, saved_whole, layer_context(ctx)); });
  return out;
}

}  // namespace tpsp::checkers::layer
