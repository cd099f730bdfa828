#include "checkers/layer/layer.h"

namespace tpsp::checkers::layer {

GPTConfig config() {
  return {.seq = S, .hidden = 24, .heads = 12, .layers = 1, .ffn = 48, .dropout = 0.1f};
}

std::map<std::string, Tensor> whole_params(const InputDraw& d) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, shape] : gpt_parameter_shapes(config())) {
    if (name.rfind(kPrefix, 0) != 0) continue;
    const bool norm_weight = name.find("layernorm.weight") != std::string::npos;
    const int split = split_of(name);
    Tensor whole = (split < 0 ? d : d.split(split))({name, shape, norm_weight ? 0.1f : 0.2f});
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

Tensor layer_x(const InputDraw& d, bool sp) {
  return (sp ? d.split(0) : d)({"layer.x", {S, B, config().hidden}});
}
Tensor layer_dy(const InputDraw& d, bool sp) {
  return (sp ? d.split(0) : d)({"layer.dy", {S, B, config().hidden}});
}

}  // namespace tpsp::checkers::layer
