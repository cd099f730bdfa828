#include "tools/shards/layout.h"

#include "engine/error.h"
#include "engine/model/llama_config.h"
#include "engine/model/sharding.h"

namespace tpsp::shards {

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 24;  // flat indices exact in float32
const std::string kPrefix = "decoder.layers.0.";

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

/// Coordinates of flat index `flat` in a row-major tensor of `shape`.
std::vector<int64_t> coords(int64_t flat, const Shape& shape) {
  std::vector<int64_t> c(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    c[d] = flat % shape[d];
    flat /= shape[d];
  }
  return c;
}

/// The dim names and the layer of a layer-0 parameter (name without the prefix).
std::pair<std::vector<std::string>, std::string> parameter_kind(const std::string& name, bool llama) {
  if (name.find("layernorm") != std::string::npos) return {{"h"}, llama ? "RMSNorm" : "LayerNorm"};
  std::vector<std::string> dims{"out"};
  if (name.ends_with(".weight")) dims.push_back("in");
  const bool column =
      name.find("linear_qkv") != std::string::npos || name.find("linear_fc1") != std::string::npos;
  return {dims, column ? "ColumnParallelLinear" : "RowParallelLinear"};
}

std::string parameter_role(const std::string& name, bool llama) {
  const auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (has("q_layernorm") || has("k_layernorm"))
    return "per-head RMSNorm weight [d] of q or k, replicated (its gradient: this rank's heads' share)";
  if (has("layernorm")) return llama ? "RMSNorm weight, replicated" : "LayerNorm parameter, replicated";
  if (has("linear_qkv.weight"))
    return llama
               ? "fused QKV weight [groups·(heads/groups + 2)·d, h], per key/value group [q heads | k | v]: "
                 "rows = output features"
               : "QKV weight [3h, h]: rows = output features";
  if (has("linear_qkv.bias")) return "QKV bias [3h], split like the weight's rows";
  if (has("linear_proj.weight")) return "projection weight [h, heads·d]: columns = input features";
  if (has("linear_proj.bias")) return "projection bias [h], added after g, replicated";
  if (has("linear_fc1.weight"))
    return llama ? "fused [W_gate; W_up] [2·ffn, h], stride 2: rank r holds gate_r and up_r"
                 : "fc1 weight [ffn, h]: rows = output features";
  if (has("linear_fc1.bias")) return "fc1 bias [ffn], split like the weight's rows";
  if (has("linear_fc2.weight")) return "fc2 weight [h, ffn]: columns = input features";
  return "fc2 bias [h], added after g, replicated";
}

TensorLayout make(const LayoutConfig& cfg, std::string name, std::string kind, std::string layer,
                  std::string role, std::vector<std::string> dims, Shape shape, Placement placement) {
  TensorLayout t{std::move(name), std::move(kind),  std::move(layer), std::move(role),
                 std::move(dims), std::move(shape), placement,        {}};
  for (int r = 0; r < cfg.tp; ++r) t.ranks.push_back(slice_of(t.global_shape, t.placement, r, cfg.tp));
  return t;
}

}  // namespace

void LayoutConfig::validate() const {
  gpt.validate();
  TPSP_CHECK(batch >= 1, "b=", batch, " must be at least 1");
  TPSP_CHECK(tp >= 1, "tp=", tp, " must be at least 1");
  TPSP_CHECK(gpt.heads % tp == 0, "heads=", gpt.heads, " is not divisible by tp=", tp);
  TPSP_CHECK(gpt.ffn_hidden() % tp == 0, "ffn=", gpt.ffn_hidden(), " is not divisible by tp=", tp);
  TPSP_CHECK(gpt.hidden % tp == 0, "h=", gpt.hidden, " is not divisible by tp=", tp);
  TPSP_CHECK(!sequence_parallel || gpt.seq % tp == 0, "s=", gpt.seq, " is not divisible by tp=", tp,
             " (sequence parallelism splits the sequence)");
  if (gpt.llama()) model::llama_layer_config(gpt).validate(tp);
}

RankSlice slice_of(const Shape& shape, const Placement& placement, int rank, int tp) {
  const int64_t n = numel_of(shape);
  TPSP_CHECK(n <= kMaxElements, "a tensor of ", shape_str(shape), " has more than 2^24 elements");
  Tensor whole(shape);
  for (int64_t i = 0; i < n; ++i) whole.at(i) = static_cast<float>(i);
  const Tensor local = shard_of(whole, placement, rank, tp);
  RankSlice s{rank, local.shape(), {}};
  // One box per block: a stride's blocks are equal pieces of the local tensor along the split dim.
  const int blocks = placement.is_shard() ? placement.stride : 1,
            d = placement.is_shard() ? placement.dim : 0;
  for (int k = 0; k < blocks; ++k) {
    const int64_t len = local.size(d) / blocks;
    const Tensor piece = local.narrow_copy(d, k * len, len);
    Box box{coords(static_cast<int64_t>(piece.at(0)), shape), {}};
    const std::vector<int64_t> last = coords(static_cast<int64_t>(piece.at(piece.numel() - 1)), shape);
    for (std::size_t i = 0; i < shape.size(); ++i) {
      box.stop.push_back(box.start[i] + piece.size(static_cast<int64_t>(i)));
      TPSP_CHECK(last[i] == box.stop[i] - 1, "rank ", rank, "'s slice of ", shape_str(shape), " (",
                 placement.str(), ") is not one box of the whole tensor per block");
    }
    s.boxes.push_back(std::move(box));
  }
  return s;
}

std::vector<TensorLayout> layer_layout(const LayoutConfig& cfg) {
  cfg.validate();
  const GPTConfig& g = cfg.gpt;
  std::vector<TensorLayout> out;
  for (const auto& [full, spec] : model::gpt_shard_specs(g, cfg.tp, cfg.sequence_parallel)) {
    if (!full.starts_with(kPrefix)) continue;
    const std::string name = full.substr(kPrefix.size());
    auto [dims, layer] = parameter_kind(name, g.llama());
    out.push_back(make(cfg, name, "weight", layer, parameter_role(name, g.llama()), dims, spec.global_shape,
                       spec.placement));
  }
  const int64_t s = g.seq, b = cfg.batch, h = g.hidden, f = g.ffn_hidden(), d = g.hidden / g.heads;
  const Placement stream = cfg.sequence_parallel ? Placement::Shard(0) : Placement::Replicate();
  const Placement last = Placement::Shard(2);
  const std::vector<std::string> sbh{"s", "b", "h"};
  const std::string where = cfg.sequence_parallel ? "this rank's s/tp tokens" : "every rank holds all of it";
  const auto add = [&](std::string name, std::string layer, std::string role, std::vector<std::string> dims,
                       Shape shape, Placement placement) {
    out.push_back(make(cfg, std::move(name), "activation", std::move(layer), std::move(role), std::move(dims),
                       std::move(shape), placement));
  };
  add("x", "", "layer input, residual stream: " + where, sbh, {s, b, h}, stream);
  if (!g.llama()) {
    add("ln1", "", "input LayerNorm output (QKV's saved input): " + where, sbh, {s, b, h}, stream);
    add("qkv", "ColumnParallelLinear", "QKV output: the QKV columns of this rank's heads", {"s", "b", "3h"},
        {s, b, 3 * h}, last);
  } else {
    const int64_t groups = g.query_groups();
    add("ln1", "", "input RMSNorm output (QKV's saved input): " + where, sbh, {s, b, h}, stream);
    add("qkv", "ColumnParallelLinear",
        "fused QKV output: an even split of the per-group columns" +
            std::string(groups < cfg.tp ? " (all-gathered over TP next, each rank keeping its group)" : ""),
        {"s", "b", "qkv"}, {s, b, groups * (g.heads / groups + 2) * d}, last);
    add("q", "", "queries of this rank's heads/tp heads (rotated after SP's gather)", {"s", "b", "heads·d"},
        {s, b, g.heads * d}, last);
    const Placement kv = groups < cfg.tp ? Placement::ShardOverGroups(2, static_cast<int>(groups)) : last;
    const std::string kv_role = groups < cfg.tp ? "group r / (tp/groups)'s, shared by its tp/groups ranks"
                                                : "this rank's groups/tp key/value groups";
    add("k", "", "keys: " + kv_role, {"s", "b", "groups·d"}, {s, b, groups * d}, kv);
    add("v", "", "values: " + kv_role, {"s", "b", "groups·d"}, {s, b, groups * d}, kv);
  }
  add("attention_probs", "", "attention probabilities of this rank's heads", {"b", "heads", "s", "s"},
      {b, g.heads, s, s}, Placement::Shard(1));
  add("attention_out", "", "attention output (projection's input): its heads", sbh, {s, b, h}, last);
  if (!g.llama()) {
    add("fc1", "ColumnParallelLinear", "fc1 output: this rank's ffn columns", {"s", "b", "ffn"}, {s, b, f},
        last);
    add("gelu", "", "GELU output (fc2's input): this rank's ffn columns", {"s", "b", "ffn"}, {s, b, f}, last);
  } else {
    add("fc1", "ColumnParallelLinear", "fused fc1 output [gate_r | up_r]: stride 2 over [gate | up]",
        {"s", "b", "2ffn"}, {s, b, 2 * f}, Placement::Shard(2, 2));
    add("swiglu", "", "SwiGLU output silu(gate_r)·up_r (fc2's input): this rank's ffn columns",
        {"s", "b", "ffn"}, {s, b, f}, last);
  }
  add("y", "", "layer output after g and the residual: " + where, sbh, {s, b, h}, stream);
  return out;
}

nlohmann::json to_json(const LayoutConfig& cfg, const std::vector<TensorLayout>& layout) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const TensorLayout& t : layout) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const RankSlice& r : t.ranks) {
      nlohmann::json boxes = nlohmann::json::array();
      for (const Box& box : r.boxes) boxes.push_back({{"start", box.start}, {"stop", box.stop}});
      ranks.push_back({{"rank", r.rank}, {"shape", r.shape}, {"boxes", boxes}});
    }
    tensors.push_back({{"name", t.name},
                       {"kind", t.kind},
                       {"layer", t.layer},
                       {"role", t.role},
                       {"dims", t.dims},
                       {"global_shape", t.global_shape},
                       {"placement", t.placement.code()},
                       {"ranks", ranks}});
  }
  return {{"config",
           {{"model", cfg.gpt.llama() ? "llama" : "gpt"},
            {"s", cfg.gpt.seq},
            {"b", cfg.batch},
            {"h", cfg.gpt.hidden},
            {"heads", cfg.gpt.heads},
            {"query_groups", cfg.gpt.query_groups()},
            {"ffn", cfg.gpt.ffn_hidden()},
            {"tp", cfg.tp},
            {"sequence_parallel", cfg.sequence_parallel}}},
          {"tensors", tensors}};
}

}  // namespace tpsp::shards
