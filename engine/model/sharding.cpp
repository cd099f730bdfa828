#include "engine/model/sharding.h"

namespace tpsp::model {

std::map<std::string, ShardSpec> llama_layer_shard_specs(int64_t h, int64_t heads, int64_t groups,
                                                         int64_t ffn, bool qk_layernorm, const std::string& p,
                                                         bool sp) {
  const int64_t d = h / heads;
  std::map<std::string, ShardSpec> specs{
      {p + "input_layernorm.weight", {{h}, Placement::Replicate(), sp}},
      {p + "self_attention.linear_qkv.weight", {{groups * (heads / groups + 2) * d, h}, Placement::Shard(0)}},
      {p + "self_attention.linear_proj.weight", {{h, heads * d}, Placement::Shard(1)}},
      {p + "pre_mlp_layernorm.weight", {{h}, Placement::Replicate(), sp}},
      {p + "mlp.linear_fc1.weight", {{2 * ffn, h}, Placement::Shard(0, 2)}},
      {p + "mlp.linear_fc2.weight", {{h, ffn}, Placement::Shard(1)}}};
  if (qk_layernorm)
    for (const char* n : {"self_attention.q_layernorm.weight", "self_attention.k_layernorm.weight"})
      specs[p + n] = {{d}, Placement::Replicate(), false, true};
  return specs;
}

std::map<std::string, ShardSpec> gpt_shard_specs(const GPTConfig& cfg, int tp, bool sp) {
  const int64_t padded = (cfg.vocab + tp - 1) / tp * tp;
  std::map<std::string, ShardSpec> specs;
  if (cfg.llama()) {
    for (int64_t i = 0; i < cfg.layers; ++i) {
      const std::string p = "decoder.layers." + std::to_string(i) + ".";
      specs.merge(llama_layer_shard_specs(cfg.hidden, cfg.heads, cfg.query_groups(), cfg.ffn_hidden(),
                                          cfg.qk_layernorm, p, sp));
      if (!cfg.moe_layer(i)) continue;
      // An MoE layer: no dense MLP; the router replicated over TP, its gradient partial under SP (each
      // rank routes its own tokens). The experts are placed over EP × ETP, not TP (expert_placement).
      specs.erase(p + "mlp.linear_fc1.weight");
      specs.erase(p + "mlp.linear_fc2.weight");
      specs[p + "mlp.router.weight"] = {{cfg.num_moe_experts, cfg.hidden}, Placement::Replicate(), sp};
    }
    specs["decoder.final_layernorm.weight"] = {{cfg.hidden}, Placement::Replicate(), sp};
    specs["embedding.word_embeddings.weight"] = {{padded, cfg.hidden}, Placement::Shard(0)};
    if (!cfg.tied) specs["output_layer.weight"] = {{padded, cfg.hidden}, Placement::Shard(0)};
    return specs;
  }
  for (auto [name, shape] : gpt_parameter_shapes(cfg)) {
    ShardSpec s{shape, Placement::Replicate(), false};
    // An init-capture, not [&]: lambdas capture structured bindings only from clang 16 on.
    auto ends = [&n = name](const char* suffix) { return n.ends_with(suffix); };
    if (ends("word_embeddings.weight") || ends("output_layer.weight")) {
      s.global_shape[0] = padded;
      s.placement = Placement::Shard(0);
    } else if (ends("linear_qkv.weight") || ends("linear_qkv.bias") || ends("linear_fc1.weight") ||
               ends("linear_fc1.bias")) {
      s.placement = Placement::Shard(0);  // column-parallel: output features
    } else if (ends("linear_proj.weight") || ends("linear_fc2.weight")) {
      s.placement = Placement::Shard(1);  // row-parallel: input features
    } else {
      // Replicated: LayerNorms, row-parallel biases, position embeddings. Under SP each rank sees only
      // its tokens, so their gradients are partial sums over the sequence.
      s.sequence_parallel = sp;
    }
    specs[name] = s;
  }
  return specs;
}

std::map<std::string, ExpertPlacement> gpt_expert_placements(const GPTConfig& cfg) {
  std::map<std::string, ExpertPlacement> out;
  for (int64_t i = 0; i < cfg.layers; ++i) {
    if (!cfg.moe_layer(i)) continue;
    const std::string p = "decoder.layers." + std::to_string(i) + ".";
    // moe_layer_shapes' order: the router, then each expert's gate, up, fc2.
    const auto shapes = moe_layer_shapes(cfg.hidden, cfg.moe_ffn(), cfg.num_moe_experts, p);
    for (std::size_t k = 1; k < shapes.size(); ++k) {
      const auto& [name, shape] = shapes[k];
      const int64_t part = static_cast<int64_t>(k - 1) % 3;
      out[name] = {i, static_cast<int64_t>(k - 1) / 3,
                   part == 0   ? "linear_gate"
                   : part == 1 ? "linear_up"
                               : "linear_fc2",
                   shape, Placement::Shard(part == 2 ? 1 : 0)};
    }
  }
  return out;
}

}  // namespace tpsp::model
