// The fused layouts of the Llama layer's weights (see llama_layer.h): the whole fused QKV and fc1 from
// their unfused parts, and a rank's shards of them. Kept apart from the layer's forward and backward,
// which run lab05's code: the grader builds expected tensors with these and links no lab code.
#include <functional>

#include "engine/error.h"
#include "engine/model/llama_layer.h"

namespace tpsp::model {

namespace {

const Tensor& whole_param(const std::map<std::string, Tensor>& P, const std::string& name) {
  const auto it = P.find(name);
  TPSP_CHECK(it != P.end(), "fuse_llama_layer: parameter '", name, "' is missing");
  return it->second;
}

}  // namespace

Tensor fuse_llama_weight(const std::string& name, const LlamaLayerConfig& cfg,
                         const std::function<Tensor(const std::string&)>& part) {
  const std::string qkv = "self_attention.linear_qkv.weight", fc1 = "mlp.linear_fc1.weight";
  if (name.ends_with(fc1)) {
    const std::string p = name.substr(0, name.size() - fc1.size());
    return cat({part(p + "mlp.linear_gate.weight"), part(p + "mlp.linear_up.weight")}, 0);
  }
  TPSP_CHECK(name.ends_with(qkv), "fuse_llama_weight: '", name, "' is not a fused Llama weight");
  const std::string p = name.substr(0, name.size() - qkv.size());
  const int64_t d = cfg.head_dim(), G = cfg.groups(), Q = cfg.heads / G;
  const Tensor wq = part(p + "self_attention.linear_q.weight"),
               wk = part(p + "self_attention.linear_k.weight"),
               wv = part(p + "self_attention.linear_v.weight");
  std::vector<Tensor> rows;  // per group: its Q query heads' rows, then k's and v's d rows
  for (int64_t g = 0; g < G; ++g) {
    rows.push_back(wq.narrow_copy(0, g * Q * d, Q * d));
    rows.push_back(wk.narrow_copy(0, g * d, d));
    rows.push_back(wv.narrow_copy(0, g * d, d));
  }
  return cat(rows, 0);
}

std::map<std::string, Tensor> fuse_llama_layer(const std::map<std::string, Tensor>& W,
                                               const LlamaLayerConfig& cfg, const std::string& p) {
  const auto part = [&](const std::string& n) { return whole_param(W, n); };
  std::map<std::string, Tensor> out;
  out[p + "self_attention.linear_qkv.weight"] =
      fuse_llama_weight(p + "self_attention.linear_qkv.weight", cfg, part);
  std::vector<std::string> rest{"input_layernorm.weight", "pre_mlp_layernorm.weight",
                                "self_attention.linear_proj.weight"};
  if (!cfg.moe()) {  // an MoE layer's weights are cut by shard_moe_layer, not fused
    out[p + "mlp.linear_fc1.weight"] = fuse_llama_weight(p + "mlp.linear_fc1.weight", cfg, part);
    rest.push_back("mlp.linear_fc2.weight");
  }
  if (cfg.qk_layernorm)
    rest.insert(rest.end(), {"self_attention.q_layernorm.weight", "self_attention.k_layernorm.weight"});
  for (const std::string& n : rest) out[p + n] = whole_param(W, p + n);
  return out;
}

std::map<std::string, Tensor> fused_model_parameters(const GPTConfig& cfg,
                                                     const std::map<std::string, Tensor>& whole) {
  if (!cfg.llama()) return whole;
  std::map<std::string, Tensor> out = whole;
  for (int64_t i = 0; i < cfg.layers; ++i) {
    const std::string p = "decoder.layers." + std::to_string(i) + ".";
    out.merge(fuse_llama_layer(whole, llama_layer_config(cfg, i), p));
    for (const char* n : {"self_attention.linear_q.weight", "self_attention.linear_k.weight",
                          "self_attention.linear_v.weight", "mlp.linear_gate.weight", "mlp.linear_up.weight"})
      out.erase(p + n);
  }
  return out;
}

std::map<std::string, Tensor> shard_llama_layer(const std::map<std::string, Tensor>& W,
                                                const LlamaLayerConfig& cfg, const std::string& p, int r,
                                                int tp) {
  cfg.validate(tp);
  const auto specs =
      llama_layer_shard_specs(cfg.hidden, cfg.heads, cfg.groups(), cfg.ffn, cfg.qk_layernorm, p, false);
  std::map<std::string, Tensor> out;
  for (const auto& [name, whole] : fuse_llama_layer(W, cfg, p))
    out[name] = shard_of(whole, specs.at(name).placement, r, tp);
  return out;
}

std::string moe_expert_prefix(const std::string& prefix, int64_t expert) {
  return prefix + "mlp.experts.local_experts." + std::to_string(expert) + ".";
}

std::map<std::string, Tensor> shard_moe_layer(const std::map<std::string, Tensor>& W,
                                              const LlamaLayerConfig& cfg, const std::string& p, int ep,
                                              int etp, int ep_rank, int etp_rank) {
  TPSP_CHECK(cfg.moe(), "shard_moe_layer: the layer has no MoE (num_moe_experts=0)");
  TPSP_CHECK(etp >= 1 && etp_rank >= 0 && etp_rank < etp, "shard_moe_layer: etp_rank=", etp_rank,
             " is not a rank of expert_tensor_parallel_size=", etp);
  TPSP_CHECK(cfg.moe_ffn_hidden_size % etp == 0, "moe_ffn_hidden_size=", cfg.moe_ffn_hidden_size,
             " is not divisible by expert_tensor_parallel_size=", etp);
  const auto [first, local] = moe::ExpertParallelState::local_experts(cfg.num_moe_experts, ep, ep_rank);
  const int64_t f = cfg.moe_ffn_hidden_size / etp, c0 = etp_rank * f;
  std::map<std::string, Tensor> out{{p + "mlp.router.weight", whole_param(W, p + "mlp.router.weight")}};
  for (int64_t e = first; e < first + local; ++e) {
    const std::string x = moe_expert_prefix(p, e);
    for (const char* part : {"linear_gate.weight", "linear_up.weight"})
      TPSP_CHECK(whole_param(W, x + part).shape() == Shape({cfg.moe_ffn_hidden_size, cfg.hidden}),
                 "shard_moe_layer: '", x + part, "' is ", shape_str(whole_param(W, x + part).shape()),
                 ", not [moe_ffn_hidden_size=", cfg.moe_ffn_hidden_size, ", hidden=", cfg.hidden, "]");
    TPSP_CHECK(
        whole_param(W, x + "linear_fc2.weight").shape() == Shape({cfg.hidden, cfg.moe_ffn_hidden_size}),
        "shard_moe_layer: '", x, "linear_fc2.weight' is not [hidden, moe_ffn_hidden_size]");
    out[x + "linear_gate.weight"] = whole_param(W, x + "linear_gate.weight").slice0(c0, c0 + f).clone();
    out[x + "linear_up.weight"] = whole_param(W, x + "linear_up.weight").slice0(c0, c0 + f).clone();
    out[x + "linear_fc2.weight"] = whole_param(W, x + "linear_fc2.weight").narrow_copy(1, c0, f);
  }
  return out;
}

}  // namespace tpsp::model
