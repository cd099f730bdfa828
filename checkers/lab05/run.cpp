// lab05 on the ranks: the learner's llama_tp.cpp, called directly (the fc1 shard, the rank → group map,
// the refusals) and inside the engine's LlamaLayer (the QKV gather and its backward, the rotary positions,
// the norm gradients' sums). The layer's weights are cut by the engine's placements from whole weights
// both halves draw from the seed, never by the learner's shard function.
#include <algorithm>
#include <iterator>

#include "checkers/lab05/lab05.h"
#include "checkers/run_context.h"
#include "engine/model/finalize_grads.h"
#include "engine/model/llama_layer.h"
#include "engine/model/llama_tp.h"

namespace tpsp::checkers {

namespace {

using namespace lab05;

/// The fc1 shard of ffn = FFN, and of ffn = 3·tp (tp divides it, 2·tp does not: a check stricter than
/// the contract refuses it).
RankOutputs run_fc1_shard(RunContext& ctx) {
  RankOutputs out;
  ctx.begin_phase("shard");
  for (const auto& [name, ffn] :
       {std::pair<std::string, int64_t>{"fc1_shard", FFN}, {"fc1_shard_narrow", 3 * ctx.size()}}) {
    const Tensor whole = ctx.on_device(fc1_whole(ctx.in, ffn));
    out[name] = guarded("shard_linear_fc1", {{"whole", &whole}}, [&] {
                  return model::shard_linear_fc1(whole, ctx.rank(), ctx.size());
                }).clone();
  }
  return out;
}

RankOutputs run_local_heads(RunContext& ctx) {
  RankOutputs out;
  for (const LlamaCase& c : llama_cases(ctx.size())) {
    const model::LocalHeads L = model::local_heads(config_of(c), ctx.rank(), ctx.size());
    // group and first_head mean something only when gathered.
    const float group = L.gathered ? static_cast<float>(L.group) : 0.f,
                first = L.gathered ? static_cast<float>(L.first_head) : 0.f;
    out[c.name] = ctx.on_device(Tensor::from({1, 5}, {static_cast<float>(L.groups), static_cast<float>(L.per),
                                                      L.gathered ? 1.f : 0.f, group, first}));
  }
  return out;
}

/// Forward, backward and the norm gradients' sum of one Llama layer per case of this TP size, each in
/// its phases "<case>.forward" / ".backward" / ".finalize".
RankOutputs run_layer(RunContext& ctx, bool packed) {
  const int n = ctx.size(), r = ctx.rank();
  const int64_t b = packed ? 1 : 2;
  RankOutputs out;
  for (const LlamaCase& c : llama_cases(n)) {
    const model::LlamaLayerConfig cfg = config_of(c);
    std::map<std::string, Tensor> P, G;
    for (const auto& [name, t] : model::shard_llama_layer(whole_params(ctx.in, c), cfg, "", r, n)) {
      P[name] = ctx.on_device(t);
      G[name] = Tensor(t.shape(), DType::f32, ctx.device);
    }
    model::LlamaLayer layer(cfg, "", P, G, n, ctx.sp);
    const model::LayerContext lctx{ctx.tp, ctx.sp, 0,        0,
                                   S,      b,      Tensor(), packed ? kPackedCu : std::vector<int64_t>{}};
    const Tensor x = ctx.on_device(layer_x(ctx.in, c, b, ctx.sp)),
                 dy = ctx.on_device(layer_dy(ctx.in, c, b, ctx.sp));
    model::LlamaLayerSaved saved;
    ctx.begin_phase(c.name + ".forward");
    const Tensor y =
        guarded("LlamaLayer.forward", {{"x", &x}}, [&] { return layer.forward(x, saved, lctx); }).clone();
    ctx.begin_phase(c.name + ".backward");
    const Tensor dx = guarded("LlamaLayer.backward", {{"dy", &dy}}, [&] {
                        return layer.backward(dy, saved, lctx);
                      }).clone();
    ctx.begin_phase(c.name + ".finalize");
    std::vector<Tensor*> partial;
    for (const std::string& w : kNormWeights)
      if (model::norm_grad_partial_over_tp(w, ctx.sp)) partial.push_back(&G.at(w));
    if (!partial.empty()) model::allreduce_sequence_parallel_grads(partial, *ctx.tp);
    // q and k as rotated, from the attention's input (per local group: [q heads | k | v]).
    const int64_t groups = std::max<int64_t>(c.groups() / n, 1), per = c.heads / n / groups;
    const model::QKV rotated = model::split_groups(saved.qkv, groups, per, 0, per, D);
    std::vector<float> positions(saved.positions.begin(), saved.positions.end());
    out.insert({{c.name + ".y", y},
                {c.name + ".dx", dx},
                {c.name + ".q_rotated", rotated.q},
                {c.name + ".k_rotated", rotated.k},
                {c.name + ".positions",
                 ctx.on_device(Tensor::from({static_cast<int64_t>(positions.size())}, positions))}});
    for (const auto& [name, g] : G) out[c.name + ".grad." + name] = g;
  }
  return out;
}

/// The norm rule asked about every kind of name ParallelGPT passes, without and with SP: [names, 2] flags.
RankOutputs run_norm_rule(RunContext& ctx) {
  std::vector<float> flags;
  for (const NormName& nn : kNormNames)
    for (const bool sp : {false, true})
      flags.push_back(model::norm_grad_partial_over_tp(nn.name, sp) ? 1.f : 0.f);
  return {{"partial", ctx.on_device(Tensor::from({static_cast<int64_t>(std::size(kNormNames)), 2}, flags))}};
}

/// What lab05's contracts promise to refuse, each beside a well-shaped call.
RankOutputs run_refusals(RunContext& ctx) {
  const int n = ctx.size(), r = ctx.rank();
  const std::string tp = "tp=" + std::to_string(n), s = "s=" + std::to_string(S);
  RankOutputs out;
  for (const int64_t ffn : uneven_ffns(n)) {
    const Tensor uneven = ctx.on_device(fc1_whole(ctx.in, ffn));
    check_refusal_naming(ctx, out, "fc1_of_ffn_" + std::to_string(ffn), {"ffn=" + std::to_string(ffn), tp},
                         [&] { model::shard_linear_fc1(uneven, r, n); });
  }
  const model::LayerContext sp_ctx{ctx.tp, true, 0, 0, S, 2, Tensor(), {}},
      plain_ctx{ctx.tp, false, 0, 0, S, 2, Tensor(), {}};
  check_accepts(ctx, out, "positions_for_s_over_tp_rows_under_sp",
                [&] { model::rotary_positions(S / n, sp_ctx); });
  check_refusal_naming(ctx, out, "positions_for_s_rows_under_sp", {s, tp},
                       [&] { model::rotary_positions(S, sp_ctx); });
  check_accepts(ctx, out, "positions_for_s_rows", [&] { model::rotary_positions(S, plain_ctx); });
  check_refusal_naming(ctx, out, "positions_for_s_over_tp_rows_without_sp", {s, tp},
                       [&] { model::rotary_positions(S / n, plain_ctx); });
  // Packed: the rows are checked as well; s = 13 under SP: no rank's input holds s/tp rows.
  const model::LayerContext packed_ctx{ctx.tp, true, 0, 0, S, 1, Tensor(), kPackedCu},
      odd_ctx{ctx.tp, true, 0, 0, S + 1, 2, Tensor(), {}};
  check_refusal_naming(ctx, out, "positions_for_s_rows_under_sp_packed", {s, tp},
                       [&] { model::rotary_positions(S, packed_ctx); });
  check_refusal_naming(ctx, out, "positions_for_s_not_divisible_by_tp", {"s=" + std::to_string(S + 1), tp},
                       [&] { model::rotary_positions((S + 1) / n, odd_ctx); });
  check_accepts(ctx, out, "norm_name",
                [&] { model::norm_grad_partial_over_tp("input_layernorm.weight", true); });
  for (const auto& [what, name] : kNotNormNames)
    for (const bool sp : {false, true})
      check_refusal_naming(ctx, out, what + std::string("_sp_") + (sp ? "on" : "off"), {name},
                           [&, &n = name] { model::norm_grad_partial_over_tp(n, sp); });
  return out;
}

void add_runs(std::map<std::string, RunFn>& out) {
  out["lab05/fc1_shard"] = run_fc1_shard;
  out["lab05/local_heads"] = run_local_heads;
  out["lab05/llama_layer"] = [](RunContext& c) { return run_layer(c, false); };
  out["lab05/packed_llama_layer"] = [](RunContext& c) { return run_layer(c, true); };
  out["lab05/norm_rule"] = run_norm_rule;
  out["lab05/refusals"] = run_refusals;
}

}  // namespace

const LabRuns kRuns(add_runs);

}  // namespace tpsp::checkers
