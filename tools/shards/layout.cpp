#include "tools/shards/layout.h"

#include "engine/error.h"
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
std::pair<std::vector<std::string>, std::string> parameter_kind(const std::string& name) {
  if (name.find("layernorm") != std::string::npos) return {{"h"}, "LayerNorm"};
  std::vector<std::string> dims{"out"};
  if (name.ends_with(".weight")) dims.push_back("in");
  const bool column =
      name.find("linear_qkv") != std::string::npos || name.find("linear_fc1") != std::string::npos;
  return {dims, column ? "ColumnParallelLinear" : "RowParallelLinear"};
}

std::string parameter_role(const std::string& name) {
  if (name.find("layernorm") != std::string::npos) return "LayerNorm parameter, replicated";
  if (name.find("linear_qkv.weight") != std::string::npos)
    return "QKV weight [3h, h]: rows = output features";
  if (name.find("linear_qkv.bias") != std::string::npos) return "QKV bias [3h], split like the weight's rows";
  if (name.find("linear_proj.weight") != std::string::npos)
    return "projection weight [h, h]: columns = input features";
  if (name.find("linear_proj.bias") != std::string::npos)
    return "projection bias [h], added after g, replicated";
  if (name.find("linear_fc1.weight") != std::string::npos)
    return "fc1 weight [ffn, h]: rows = output features";
  if (name.find("linear_fc1.bias") != std::string::npos)
    return "fc1 bias [ffn], split like the weight's rows";
  if (name.find("linear_fc2.weight") != std::string::npos)
    return "fc2 weight [h, ffn]: columns = input features";
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
}

RankSlice slice_of(const Shape& shape, const Placement& placement, int rank, int tp) {
  const int64_t n = numel_of(shape);
  TPSP_CHECK(n <= kMaxElements, "a tensor of ", shape_str(shape), " has more than 2^24 elements");
  Tensor whole(shape);
  for (int64_t i = 0; i < n; ++i) whole.at(i) = static_cast<float>(i);
  const Tensor local = model::shard_of(whole, {shape, placement, false}, rank, tp);
  RankSlice s{rank, local.shape(), {}, {}};
  s.start = coords(static_cast<int64_t>(local.at(0)), shape);
  const std::vector<int64_t> last = coords(static_cast<int64_t>(local.at(local.numel() - 1)), shape);
  for (std::size_t d = 0; d < shape.size(); ++d) {
    s.stop.push_back(s.start[d] + local.size(static_cast<int64_t>(d)));
    TPSP_CHECK(last[d] == s.stop[d] - 1, "rank ", rank, "'s slice of ", shape_str(shape), " (",
               placement.str(), ") is not one box of the whole tensor");
  }
  return s;
}

std::vector<TensorLayout> layer_layout(const LayoutConfig& cfg) {
  cfg.validate();
  std::vector<TensorLayout> out;
  for (const auto& [full, spec] : model::gpt_shard_specs(cfg.gpt, cfg.tp, cfg.sequence_parallel)) {
    if (!full.starts_with(kPrefix)) continue;
    const std::string name = full.substr(kPrefix.size());
    auto [dims, layer] = parameter_kind(name);
    out.push_back(
        make(cfg, name, "weight", layer, parameter_role(name), dims, spec.global_shape, spec.placement));
  }
  const int64_t s = cfg.gpt.seq, b = cfg.batch, h = cfg.gpt.hidden, f = cfg.gpt.ffn_hidden();
  const Placement stream = cfg.sequence_parallel ? Placement::Shard(0) : Placement::Replicate();
  const Placement last = Placement::Shard(2);
  const std::vector<std::string> sbh{"s", "b", "h"};
  const std::string where = cfg.sequence_parallel ? "this rank's s/tp tokens" : "every rank holds all of it";
  out.push_back(
      make(cfg, "x", "activation", "", "layer input, residual stream: " + where, sbh, {s, b, h}, stream));
  out.push_back(make(cfg, "ln1", "activation", "", "input LayerNorm output (QKV's saved input): " + where,
                     sbh, {s, b, h}, stream));
  out.push_back(make(cfg, "qkv", "activation", "ColumnParallelLinear",
                     "QKV output: the QKV columns of this rank's heads", {"s", "b", "3h"}, {s, b, 3 * h},
                     last));
  out.push_back(make(cfg, "attention_probs", "activation", "", "attention probabilities of this rank's heads",
                     {"b", "heads", "s", "s"}, {b, cfg.gpt.heads, s, s}, Placement::Shard(1)));
  out.push_back(make(cfg, "attention_out", "activation", "",
                     "attention output (projection's input): its heads", sbh, {s, b, h}, last));
  out.push_back(make(cfg, "fc1", "activation", "ColumnParallelLinear", "fc1 output: this rank's ffn columns",
                     {"s", "b", "ffn"}, {s, b, f}, last));
  out.push_back(make(cfg, "gelu", "activation", "", "GELU output (fc2's input): this rank's ffn columns",
                     {"s", "b", "ffn"}, {s, b, f}, last));
  out.push_back(make(cfg, "y", "activation", "", "layer output after g and the residual: " + where, sbh,
                     {s, b, h}, stream));
  return out;
}

nlohmann::json to_json(const LayoutConfig& cfg, const std::vector<TensorLayout>& layout) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const TensorLayout& t : layout) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const RankSlice& r : t.ranks)
      ranks.push_back({{"rank", r.rank}, {"shape", r.shape}, {"start", r.start}, {"stop", r.stop}});
    tensors.push_back({{"name", t.name},
                       {"kind", t.kind},
                       {"layer", t.layer},
                       {"role", t.role},
                       {"dims", t.dims},
                       {"global_shape", t.global_shape},
                       {"placement", t.placement.is_shard() ? "Shard(" + std::to_string(t.placement.dim) + ")"
                                                            : "Replicate"},
                       {"ranks", ranks}});
  }
  return {{"config",
           {{"s", cfg.gpt.seq},
            {"b", cfg.batch},
            {"h", cfg.gpt.hidden},
            {"heads", cfg.gpt.heads},
            {"ffn", cfg.gpt.ffn_hidden()},
            {"tp", cfg.tp},
            {"sequence_parallel", cfg.sequence_parallel}}},
          {"tensors", tensors}};
}

}  // namespace tpsp::shards
