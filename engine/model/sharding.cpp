#include "engine/model/sharding.h"

namespace tpsp::model {

std::map<std::string, ShardSpec> gpt_shard_specs(const GPTConfig& cfg, int tp, bool sp) {
  const int64_t padded = (cfg.vocab + tp - 1) / tp * tp;
  std::map<std::string, ShardSpec> specs;
  for (auto [name, shape] : gpt_parameter_shapes(cfg)) {
    ShardSpec s{shape, Placement::Replicate(), false};
    auto ends = [&](const char* suffix) { return name.ends_with(suffix); };
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

Tensor shard_of(const Tensor& whole, const ShardSpec& spec, int rank, int tp) {
  if (!spec.placement.is_shard()) return whole.clone();
  const int d = spec.placement.dim;
  const int64_t chunk = whole.size(d) / tp;
  return whole.narrow_copy(d, rank * chunk, chunk);
}

}  // namespace tpsp::model
