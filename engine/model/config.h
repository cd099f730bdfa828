// Configuration of the GPT shared by the reference and the tensor-parallel engine.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace tpsp {

/// A GPT-2-style pre-LayerNorm decoder (Radford et al. 2019) in Megatron-LM's naming.
/// vocab: real vocabulary size V; seq: max positions (the learned position table); hidden: h;
/// heads: attention heads (h % heads == 0); layers; ffn: MLP width (0 means 4h); dropout: p for
/// embedding, attention-probability and hidden dropout; tied: output layer shares the word
/// embedding; ln_eps; label_smoothing α (PyTorch's definition); init_std: N(0, σ²) for weights
/// (output projections use σ/√(2·layers), Megatron's scaled init).
struct GPTConfig {
  int64_t vocab = 256;
  int64_t seq = 64;
  int64_t hidden = 64;
  int64_t heads = 4;
  int64_t layers = 2;
  int64_t ffn = 0;
  float dropout = 0.f;
  bool tied = true;
  float ln_eps = 1e-5f;
  float label_smoothing = 0.f;
  float init_std = 0.02f;

  /// ffn, or 4·hidden when ffn == 0.
  int64_t ffn_hidden() const { return ffn > 0 ? ffn : 4 * hidden; }
  int64_t head_dim() const { return hidden / heads; }
  /// Throws ShapeError naming the rule: positive sizes, hidden % heads == 0, 0 <= dropout < 1,
  /// 0 <= label_smoothing <= 1.
  void validate() const;
  /// "V=37 s=13 h=24 heads=3 layers=2 ffn=96 ..." for reports.
  std::string str() const;
};

/// Parameter names (Megatron-LM's) and whole shapes of a config, in model order; see reference/gpt.h
/// for the architecture. The vocabulary is the real V (the parallel model pads it to a multiple of tp).
std::vector<std::pair<std::string, Shape>> gpt_parameter_shapes(const GPTConfig& cfg);

}  // namespace tpsp
