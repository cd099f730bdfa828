#include "checkers/layer/layer.h"

namespace tpsp::checkers::layer {

GPTConfig config() {
  return {.seq = S, .hidden = 24, .heads = 12, .layers = 1, .ffn = 48, .dropout = 0.1f};
}

std::map<std::string, Tensor> whole_params(uint64_t seed) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, shape] : gpt_parameter_shapes(config())) {
    if (name.rfind(kPrefix, 0) != 0) continue;
    const bool norm_weight = name.find("layernorm.weight") != std::string::npos;
    Tensor whole = input_tensor(shape, seed, name, norm_weight ? 0.1f : 0.2f);
    if (norm_weight)
      for (int64_t i = 0; i < whole.numel(); ++i) whole.at(i) += 1.f;
    out[name] = whole;
  }
  return out;
}

int split_of(const std::string& name) {
  if (name.find("linear_qkv") != std::string::npos || name.find("linear_fc1") != std::string::npos) return 0;
  if (name.ends_with("linear_proj.weight") || name.ends_with("linear_fc2.weight")) return 1;
  return -1;
}

Tensor layer_x(uint64_t seed) {
  return input_tensor({S, B, config().hidden}, seed, "layer.x");
}
Tensor layer_dy(uint64_t seed) {
  return input_tensor({S, B, config().hidden}, seed, "layer.dy");
}

}  // namespace tpsp::checkers::layer
