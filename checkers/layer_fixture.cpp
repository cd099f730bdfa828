#include "checkers/layer_fixture.h"

#include "engine/model/config.h"
#include "engine/model/finalize_grads.h"

namespace tpsp::checkers {

namespace {

constexpr int64_t S = 12, B = 2;
constexpr uint64_t kF32 = 4;

GPTConfig layer_config() {
  GPTConfig c;
  c.hidden = 24;
  c.heads = 12;
  c.ffn = 48;
  c.layers = 1;
  c.dropout = 0.1f;
  c.seq = S;
  return c;
}

/// Layout of each layer-0 parameter: split dim (column: 0, row weights: 1) or replicated.
int split_of(const std::string& name) {
  if (name.find("linear_qkv") != std::string::npos || name.find("linear_fc1") != std::string::npos) return 0;
  if (name.ends_with("linear_proj.weight") || name.ends_with("linear_fc2.weight")) return 1;
  return kReplicated;
}

struct Built {
  std::map<std::string, Tensor> params, grads;
};

/// This rank's shards of layer 0's parameters, drawn whole from the seed and sliced.
Built build(const RunContext& ctx, const GPTConfig& c) {
  Built b;
  for (const auto& [name, shape] : gpt_parameter_shapes(c)) {
    if (name.rfind("decoder.layers.0.", 0) != 0) continue;
    const bool norm_weight = name.find("layernorm.weight") != std::string::npos;
    Tensor whole = input_tensor(shape, ctx.seed, name, norm_weight ? 0.1f : 0.2f);
    if (norm_weight)
      for (int64_t i = 0; i < whole.numel(); ++i) whole.at(i) += 1.f;
    const int d = split_of(name);
    b.params[name] = d == kReplicated ? whole : chunk(whole, d, ctx.rank(), ctx.size());
    b.grads[name] = Tensor(b.params[name].shape());
  }
  return b;
}

model::LayerContext layer_context(RunContext& ctx) {
  return {ctx.tp, ctx.sp, ctx.seed, /*iteration=*/3, S, B};
}

}  // namespace

Outputs run_layer(RunContext& ctx) {
  const GPTConfig c = layer_config();
  Built b = build(ctx, c);
  model::TransformerLayer layer(c, 0, b.params, b.grads, ctx.sp);
  const Tensor x = input_tensor({S, B, c.hidden}, ctx.seed, "layer.x");
  const Tensor dy = input_tensor({S, B, c.hidden}, ctx.seed, "layer.dy");
  const int n = ctx.size(), r = ctx.rank();
  model::LayerSaved saved;
  const model::LayerContext lc = layer_context(ctx);
  ctx.begin_phase("forward");
  Tensor y = layer.forward(ctx.sp ? chunk(x, 0, r, n) : x, saved, lc);
  ctx.begin_phase("backward");
  Tensor dx = layer.backward(ctx.sp ? chunk(dy, 0, r, n) : dy, saved, lc);
  if (ctx.sp) {
    ctx.begin_phase("grad_sync");
    std::vector<Tensor*> sp_grads;
    for (auto& [name, g] : b.grads)
      if (split_of(name) == kReplicated) sp_grads.push_back(&g);
    model::allreduce_sequence_parallel_grads(sp_grads, *ctx.tp);
  }
  Outputs out{{"y", {y.clone(), ctx.sp ? 0 : kReplicated}}, {"dx", {dx.clone(), ctx.sp ? 0 : kReplicated}}};
  for (auto& [name, g] : b.grads) out["grad." + name.substr(17)] = {g, split_of(name)};
  return out;
}

Pattern layer_pattern(int tp, bool sp) {
  if (tp == 1) return {};
  const GPTConfig c = layer_config();
  const uint64_t sbh = S * B * c.hidden * kF32;
  using comm::OpKind;
  if (!sp)
    return {
        {"forward",
         {{OpKind::all_reduce, sbh, "attention projection's g"}, {OpKind::all_reduce, sbh, "fc2's g"}}},
        {"backward", {{OpKind::all_reduce, sbh, "QKV's f (dX)"}, {OpKind::all_reduce, sbh, "fc1's f (dX)"}}}};
  const uint64_t sp_grad_bytes = (4 * c.hidden + 2 * c.hidden) * kF32;  // 2 LayerNorms (γ, β) + 2 row biases
  return {{"forward",
           {{OpKind::all_gather, sbh, "QKV input (SP)"},
            {OpKind::all_gather, sbh, "fc1 input (SP)"},
            {OpKind::reduce_scatter, sbh, "projection output (SP's g)"},
            {OpKind::reduce_scatter, sbh, "fc2 output (SP's g)"}}},
          {"backward",
           {{OpKind::all_gather, sbh, "dY of fc2 (SP)"},
            {OpKind::all_gather, sbh, "dY of the projection (SP)"},
            {OpKind::all_gather, sbh, "fc1 input again, for its weight gradient"},
            {OpKind::all_gather, sbh, "QKV input again, for its weight gradient"},
            {OpKind::reduce_scatter, sbh, "dX of fc1 (SP)"},
            {OpKind::reduce_scatter, sbh, "dX of QKV (SP)"}}},
          {"grad_sync",
           {{OpKind::all_reduce, sp_grad_bytes,
             "one coalesced all-reduce of the LayerNorm and row-bias gradients"}}}};
}

uint64_t layer_activation_bytes(int tp, bool sp) {
  const GPTConfig c = layer_config();
  const uint64_t h = c.hidden, f = c.ffn, heads = c.heads, rows = sp ? S / tp : S;
  const uint64_t residual_and_norms =
      4 * rows * B * h + 4 * rows * B;  // x_in, x_mid, ln1.y, ln2.y + 2×(mean, rstd)
  const uint64_t tp_region =
      S * B * 3 * h / tp + S * B * h / tp + B * (heads / tp) * S * S + 2 * S * B * f / tp;
  return (residual_and_norms + tp_region) * kF32;
}

Outputs run_layer_memory(RunContext& ctx) {
  const GPTConfig c = layer_config();
  Built b = build(ctx, c);
  model::TransformerLayer layer(c, 0, b.params, b.grads, ctx.sp);
  const Tensor x = input_tensor({S, B, c.hidden}, ctx.seed, "layer.x");
  model::LayerSaved saved;
  ctx.begin_phase("forward");
  layer.forward(ctx.sp ? chunk(x, 0, ctx.rank(), ctx.size()) : x, saved, layer_context(ctx));
  return {{"activation_bytes", {Tensor::from({1}, {static_cast<float>(saved.bytes())}), kReplicated}}};
}

}  // namespace tpsp::checkers
