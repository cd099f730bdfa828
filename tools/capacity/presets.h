// Model presets of tpsp-capacity: published sizes in this engine's GPT-2 or Llama block.
#pragma once

#include <string>
#include <vector>

#include "engine/model/capacity.h"
#include "tools/capacity/moe_report.h"

namespace tpsp::capacity {

/// A named set of sizes (hidden, ffn, heads, layers, vocab, s, b, tied) and what it is.
struct Preset {
  std::string name;
  std::string about;  ///< where the sizes come from, and how this engine's layer differs
  model::CapacityConfig config;
  MoeQuestion moe{};  ///< its MoE layer (experts = 0: a dense model)
};

/// Every preset, in the order `--help` lists them.
const std::vector<Preset>& presets();

/// The preset called `name`. Throws ShapeError listing the known names if there is none.
const Preset& find_preset(const std::string& name);

}  // namespace tpsp::capacity
