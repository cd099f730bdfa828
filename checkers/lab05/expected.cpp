// lab05 in the grader: expected tensors from the single-process Llama layer with UNFUSED weights
// (reference/llama_layer.h) and closed forms, placements from the engine's shard specs, and the calls of
// one layer on the TP group (the QKV gather and its reduce-scatter when groups < tp, the norm gradients'
// one all-reduce).
#include <iterator>

#include "checkers/lab05/lab05.h"
#include "checkers/scenario.h"
#include "engine/model/llama_layer.h"
#include "engine/model/sharding.h"
#include "reference/llama_layer.h"

namespace tpsp::checkers {

namespace {

using comm::OpKind;
using namespace lab05;

ExpectedOutputs expected_fc1_shard(uint64_t seed, int tp, bool) {
  // Rank r holds [W_gate rows r·ffn/tp … (r+1)·ffn/tp; the same rows of W_up]. No .meaning (which would
  // replace the signatures): a wrong cut is named by diagnose ("gate only", shards in the wrong order).
  return {{"fc1_shard", {fc1_whole(seed, FFN), Placement::Shard(0, 2)}},
          {"fc1_shard_narrow", {fc1_whole(seed, 3 * tp), Placement::Shard(0, 2)}}};
}

/// The LocalHeads of every rank, [tp, 5] rows of (groups, per, gathered, group, first_head).
ExpectedOutputs expected_local_heads(uint64_t, int tp, bool) {
  ExpectedOutputs out;
  for (const LlamaCase& c : llama_cases(tp)) {
    const int64_t Q = c.heads / c.groups();
    std::vector<float> rows;
    for (int r = 0; r < tp; ++r) {
      if (c.groups() % tp == 0) {
        rows.insert(rows.end(), {static_cast<float>(c.groups() / tp), static_cast<float>(Q), 0, 0, 0});
      } else {
        const int64_t sharing = tp / c.groups(), per = c.heads / tp;
        rows.insert(rows.end(), {1, static_cast<float>(per), 1, static_cast<float>(r / sharing),
                                 static_cast<float>((r % sharing) * per)});
      }
    }
    out[c.name] = {
        .whole = Tensor::from({tp, 5}, rows),
        .placement = Placement::Shard(0),
        .meaning = "row r = rank r's LocalHeads for heads=" + std::to_string(c.heads) +
                   ", groups=" + std::to_string(c.groups()) +
                   "; column [0] local groups, [1] query heads per local group, [2] gathered 0/1, [3] the "
                   "group kept (r / (tp/groups): the ranks sharing a group are consecutive), [4] its first "
                   "query head ((r % (tp/groups))·heads/tp); [3] and [4] are 0 when not gathered"};
  }
  return out;
}

/// The rotated q [s, b, heads·d] and k [s, b, G·d] inside the reference's per-head [q_n | k_g | v_g].
std::pair<Tensor, Tensor> rotated_qk(const Tensor& mha_qkv, const LlamaCase& c) {
  std::vector<Tensor> q, k;
  const int64_t per = c.heads / c.groups();
  for (int64_t n = 0; n < c.heads; ++n) q.push_back(mha_qkv.narrow_copy(2, n * 3 * D, D));
  for (int64_t g = 0; g < c.groups(); ++g) k.push_back(mha_qkv.narrow_copy(2, g * per * 3 * D + D, D));
  return {cat(q, 2), cat(k, 2)};
}

std::vector<int64_t> packed_positions(bool packed) {
  std::vector<int64_t> positions;
  const std::vector<int64_t> cu = packed ? kPackedCu : std::vector<int64_t>{0, S};
  for (std::size_t i = 0; i + 1 < cu.size(); ++i)
    for (int64_t t = cu[i]; t < cu[i + 1]; ++t) positions.push_back(t - cu[i]);
  return positions;
}

ExpectedOutputs expected_layer(uint64_t seed, int tp, bool sp, bool packed) {
  const int64_t b = packed ? 1 : 2;
  ExpectedOutputs out;
  for (const LlamaCase& c : llama_cases(tp)) {
    reference::LlamaLayerSpec spec{.hidden = c.heads * D,
                                   .heads = c.heads,
                                   .query_groups = c.query_groups,
                                   .ffn = FFN,
                                   .qk_layernorm = true,
                                   .positions = packed_positions(packed)};
    if (packed) spec.cu_seqlens = kPackedCu;
    const std::map<std::string, Tensor> W = whole_params(seed, c);
    reference::ParamMap params(W.begin(), W.end()), grads;
    for (const auto& [name, t] : W) grads[name] = Tensor(t.shape());
    reference::LlamaLayerActs acts;
    const Tensor y = reference::llama_layer_forward(layer_x(seed, c, b, sp), params, "", spec, acts);
    const Tensor dx =
        reference::llama_layer_backward(layer_dy(seed, c, b, sp), params, "", spec, acts, grads);
    const auto [q, k] = rotated_qk(acts.mha_qkv, c);
    const Placement rows = sp ? Placement::Shard(0) : Placement::Replicate();
    std::vector<float> positions(spec.positions.begin(), spec.positions.end());
    const std::string p = c.name + ".";
    out[p + "y"] = {y, rows};
    out[p + "dx"] = {dx, rows};
    // q and k after their norms and RoPE: rank r's query heads [r·heads/tp, (r+1)·heads/tp), and the k of
    // the groups it attends with; the positions RoPE used. No .meaning: diagnose names a wrong group
    // ("r % groups"), a missing per-rank offset, positions numbered per shard or across documents.
    out[p + "q_rotated"] = {q, Placement::Shard(2)};
    out[p + "k_rotated"] = {k, c.groups() % tp == 0
                                   ? Placement::Shard(2)
                                   : Placement::ShardOverGroups(2, static_cast<int>(c.groups()))};
    out[p + "positions"] = {Tensor::from({S}, positions)};
    const model::LlamaLayerConfig cfg = config_of(c);
    const auto specs =
        model::llama_layer_shard_specs(cfg.hidden, cfg.heads, cfg.groups(), cfg.ffn, true, "", sp);
    for (const auto& [name, g] : model::fuse_llama_layer(grads, cfg, ""))
      out[p + "grad." + name] = {g, specs.at(name).placement};
  }
  return out;
}

/// One layer's calls per case: the linear layers' (lab01/lab03), the QKV gather when groups < tp, and
/// the norm gradients' sum.
Pattern pattern_layer(int tp, bool sp, bool packed) {
  if (tp == 1) return {};
  const int64_t b = packed ? 1 : 2;
  Pattern pat;
  for (const LlamaCase& c : llama_cases(tp)) {
    const uint64_t sbh = S * b * c.heads * D * 4,
                   sbq = S * b * c.groups() * (c.heads / c.groups() + 2) * D * 4;
    const bool gathered = c.groups() % tp != 0;
    auto& fwd = pat[c.name + ".forward"];
    auto& bwd = pat[c.name + ".backward"];
    if (sp) {
      fwd.push_back({OpKind::all_gather, sbh, "linear_qkv under SP: all-gather of the normed input"});
      fwd.push_back(
          {OpKind::reduce_scatter, sbh, "linear_proj under SP: reduce-scatter of the partial output"});
      fwd.push_back({OpKind::all_gather, sbh, "linear_fc1 under SP: all-gather of the normed input"});
      fwd.push_back(
          {OpKind::reduce_scatter, sbh, "linear_fc2 under SP: reduce-scatter of the partial output"});
      bwd.push_back({OpKind::all_gather, sbh, "linear_fc2 under SP: all-gather of dY"});
      bwd.push_back({OpKind::all_gather, sbh, "linear_fc1 under SP: the input gathered again for dW"});
      bwd.push_back({OpKind::reduce_scatter, sbh, "linear_fc1 under SP: reduce-scatter of the partial dX"});
      bwd.push_back({OpKind::all_gather, sbh, "linear_proj under SP: all-gather of dY"});
      bwd.push_back({OpKind::all_gather, sbh, "linear_qkv under SP: the input gathered again for dW"});
      bwd.push_back({OpKind::reduce_scatter, sbh, "linear_qkv under SP: reduce-scatter of the partial dX"});
    } else {
      fwd.push_back({OpKind::all_reduce, sbh, "linear_proj's g: all-reduce of the partial output"});
      fwd.push_back({OpKind::all_reduce, sbh, "linear_fc2's g: all-reduce of the partial output"});
      bwd.push_back({OpKind::all_reduce, sbh, "linear_fc1's f: all-reduce of the partial dX"});
      bwd.push_back({OpKind::all_reduce, sbh, "linear_qkv's f: all-reduce of the partial dX"});
    }
    if (gathered) {
      fwd.push_back(
          {OpKind::all_gather, sbq,
           "groups < tp: all-gather of the QKV activation along its last dim (each rank keeps its group)",
           2});
      bwd.push_back({OpKind::reduce_scatter, sbq,
                     "groups < tp: reduce-scatter of the gathered QKV's gradient (sums the shared k and v)",
                     2});
    }
    const uint64_t norm_bytes = (2 * D + (sp ? 2 * c.heads * D : 0)) * 4;
    pat[c.name + ".finalize"] = {
        {OpKind::all_reduce, norm_bytes,
         sp ? "the partial norm gradients (input/pre_mlp_layernorm under SP, q/k_layernorm) in one all-reduce"
            : "the partial q/k_layernorm gradients in one all-reduce (each rank normalised only its heads)"}};
  }
  return pat;
}

/// The norm rule's answers, [names, 2]: without SP, with SP (lab05.h kNormNames).
ExpectedOutputs expected_norm_rule(uint64_t, int, bool) {
  std::vector<float> flags;
  std::string names;
  for (const NormName& nn : kNormNames) {
    flags.insert(flags.end(), {nn.partial_without_sp ? 1.f : 0.f, nn.partial_with_sp ? 1.f : 0.f});
    names += std::string(names.empty() ? "" : ", ") + nn.name;
  }
  return {{"partial",
           {.whole = Tensor::from({static_cast<int64_t>(std::size(kNormNames)), 2}, flags),
            .meaning = "norm_grad_partial_over_tp(name, sp) as 1/0, a row per name (" + names +
                       "), column 0 without SP, 1 with SP: the residual stream's norms are partial exactly "
                       "under SP, the per-head q/k norms always; the names come with their prefix"}}};
}

ExpectedOutputs expected_refusals(uint64_t, int tp, bool) {
  ExpectedOutputs out;
  const std::string t = "tp=" + std::to_string(tp), s = "s=" + std::to_string(S);
  for (const int64_t ffn : uneven_ffns(tp)) {
    const std::string f = "ffn=" + std::to_string(ffn);
    expect_refusal_naming(
        out, "fc1_of_ffn_" + std::to_string(ffn), "shard_linear_fc1 raised ShapeError for " + f + " at " + t,
        "it cut a fused fc1 whose ffn tp does not divide", "shard_linear_fc1", f + " and " + t);
  }
  expect_accepted(out, "positions_for_s_over_tp_rows_under_sp", "rotary_positions(s/tp, ctx) under SP");
  expect_refusal_naming(
      out, "positions_for_s_rows_under_sp",
      "rotary_positions raised ShapeError for an input of s rows under SP (it must have s/tp)",
      "it accepted an input that disagrees with the layer context", "rotary_positions", s + " and " + t);
  expect_accepted(out, "positions_for_s_rows", "rotary_positions(s, ctx) without SP");
  expect_refusal_naming(
      out, "positions_for_s_over_tp_rows_without_sp",
      "rotary_positions raised ShapeError for an input of s/tp rows without SP (it must have s)",
      "it accepted an input that disagrees with the layer context", "rotary_positions", s + " and " + t);
  expect_refusal_naming(
      out, "positions_for_s_rows_under_sp_packed",
      "rotary_positions raised ShapeError for an input of s rows under SP with packed documents",
      "it accepted an input that disagrees with the layer context", "rotary_positions", s + " and " + t);
  expect_refusal_naming(out, "positions_for_s_not_divisible_by_tp",
                        "rotary_positions raised ShapeError for s=13 under SP (not divisible by tp)",
                        "it accepted a sequence that tp does not divide", "rotary_positions",
                        "s=" + std::to_string(S + 1) + " and " + t);
  expect_accepted(out, "norm_name", "norm_grad_partial_over_tp(\"input_layernorm.weight\", true)");
  for (const auto& [what, name] : kNotNormNames)
    for (const char* sp : {"off", "on"})
      expect_refusal_naming(out, what + std::string("_sp_") + sp,
                            "norm_grad_partial_over_tp raised ShapeError for " + name + " with SP " + sp,
                            "it answered for a weight that is not one of the Llama block's RMSNorm weights",
                            "norm_grad_partial_over_tp", "the name");
  return out;
}

void add_scenarios(std::vector<Scenario>& out) {
  out.push_back({.lab = "lab05",
                 .name = "fc1_shard",
                 .summary = "the fused [W_gate; W_up]'s shard: gate's and up's r-th row blocks (stride 2)",
                 .dp_layout = false,
                 .expected = expected_fc1_shard});
  out.push_back({.lab = "lab05",
                 .name = "local_heads",
                 .summary = "grouped-query attention: the key/value group and query heads of each rank",
                 .dp_layout = false,
                 .expected = expected_local_heads});
  out.push_back(
      {.lab = "lab05",
       .name = "llama_layer",
       .summary = "a Llama layer, groups above and below tp: outputs, rotated q and k, every gradient",
       .sp_variants = true,
       .expected = [](uint64_t s, int tp, bool sp) { return expected_layer(s, tp, sp, false); },
       .pattern = [](int tp, bool sp) { return pattern_layer(tp, sp, false); }});
  out.push_back(
      {.lab = "lab05",
       .name = "packed_llama_layer",
       .summary =
           "a Llama layer on three packed documents: positions restart at each document, not each shard",
       .sp_variants = true,
       .dp_layout = false,
       .expected = [](uint64_t s, int tp, bool sp) { return expected_layer(s, tp, sp, true); },
       .pattern = [](int tp, bool sp) { return pattern_layer(tp, sp, true); }});
  out.push_back(
      {.lab = "lab05",
       .name = "norm_rule",
       .summary = "which RMSNorm weight gradients are partial over TP, for prefixed names, SP off and on",
       .tp_sizes = {2},
       .dp_layout = false,
       .expected = expected_norm_rule});
  out.push_back(
      {.lab = "lab05",
       .name = "refusals",
       .summary = "the fc1 shard, the rotary positions and the norm rule refuse what their contracts refuse",
       .tp_sizes = {2, 3, 4},
       .sp_only = true,
       .dp_layout = false,
       .expected = expected_refusals});
}

}  // namespace

const LabScenarios kScenarios("lab05", add_scenarios);

}  // namespace tpsp::checkers
