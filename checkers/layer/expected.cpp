#include "checkers/layer/expected.h"

#include "checkers/layer/layer.h"
#include "engine/ops/elementwise.h"
#include "reference/transformer_layer.h"

namespace tpsp::checkers::layer {

ExpectedOutputs expected_layer(uint64_t seed, bool sp) {
  const GPTConfig c = config();
  const reference::ParamMap params = whole_params(seed);
  reference::ParamMap grads;
  for (const auto& [name, p] : params) grads[name] = Tensor(p.shape());
  const reference::LayerSpec spec{c.hidden, c.heads, c.ln_eps, c.dropout, model_seed_of(seed), kIteration};
  reference::LayerActs acts;
  const Tensor y = reference::layer_forward(layer_x(seed, sp), params, kPrefix, spec, acts);
  Tensor dx;
  for (int pass = 0; pass < kPasses; ++pass)
    dx = reference::layer_backward(layer_dy(seed, sp), params, kPrefix, spec, acts, grads);
  const Placement seq = sp ? Placement::Shard(0) : Placement::Replicate();
  ExpectedOutputs out{{"y", {y, seq}}, {"dx", {dx, seq}}};
  for (const auto& [name, g] : grads) {
    const int d = split_of(name);
    out["grad." + name.substr(kPrefix.size())] = {
        .whole = g, .placement = d < 0 ? Placement::Replicate() : Placement::Shard(d), .passes = kPasses};
  }
  return out;
}

Pattern layer_pattern(int tp, bool sp) {
  if (tp == 1) return {};
  const uint64_t sbh = S * B * config().hidden * kF32;
  using comm::OpKind;
  auto per_pass = [](std::vector<ExpectedCall> calls) {
    std::vector<ExpectedCall> out;
    for (int i = 0; i < kPasses; ++i) out.insert(out.end(), calls.begin(), calls.end());
    return out;
  };
  if (!sp)
    return {{"forward",
             {{OpKind::all_reduce, sbh, "attention projection's g"}, {OpKind::all_reduce, sbh, "fc2's g"}}},
            {"backward", per_pass({{OpKind::all_reduce, sbh, "QKV's f (dX)"},
                                   {OpKind::all_reduce, sbh, "fc1's f (dX)"}})}};
  const uint64_t sp_grad_bytes = 6 * config().hidden * kF32;  // 2 LayerNorms (γ, β) + 2 row biases
  return {{"forward",
           {{OpKind::all_gather, sbh, "QKV input (SP)"},
            {OpKind::all_gather, sbh, "fc1 input (SP)"},
            {OpKind::reduce_scatter, sbh, "projection output (SP's g)"},
            {OpKind::reduce_scatter, sbh, "fc2 output (SP's g)"}}},
          {"backward", per_pass({{OpKind::all_gather, sbh, "dY of fc2 (SP)"},
                                 {OpKind::all_gather, sbh, "dY of the projection (SP)"},
                                 {OpKind::all_gather, sbh, "fc1 input again, for its weight gradient"},
                                 {OpKind::all_gather, sbh, "QKV input again, for its weight gradient"},
                                 {OpKind::reduce_scatter, sbh, "dX of fc1 (SP)"},
                                 {OpKind::reduce_scatter, sbh, "dX of QKV (SP)"}})},
          {"grad_sync",
           {{OpKind::all_reduce, sp_grad_bytes,
             "one coalesced all-reduce of the LayerNorm and row-bias gradients"}}}};
}

uint64_t layer_activation_bytes(int tp, bool sp) {
  const GPTConfig c = config();
  const uint64_t h = c.hidden, f = c.ffn, heads = c.heads, rows = sp ? S / tp : S;
  const uint64_t residual_and_norms =
      4 * rows * B * h + 4 * rows * B;  // x_in, x_mid, ln1.y, ln2.y + 2×(mean, rstd)
  const uint64_t tp_region =
      S * B * 3 * h / tp + S * B * h / tp + B * (heads / tp) * S * S + 2 * S * B * f / tp;
  return (residual_and_norms + tp_region) * kF32;
}

}  // namespace tpsp::checkers::layer
