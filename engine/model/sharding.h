// How the GPT's parameters are laid out over the TP group: the vocabulary padded to a multiple of
// tp and split by rows, column-parallel weights split by output features, row-parallel weights by
// input features, the rest replicated (Megatron-LM: VocabParallelEmbedding, ColumnParallelLinear,
// RowParallelLinear; Shoeybi et al. 2019 §3). Pure functions of the config: no communication and no
// lab-owned code, so the checkers' grader can place the expected tensors with them.
#pragma once

#include <map>
#include <string>

#include "engine/model/config.h"
#include "engine/placement.h"
#include "engine/tensor.h"

namespace tpsp::model {

/// How a parameter is laid out over the TP group.
struct ShardSpec {
  Shape global_shape;  ///< whole parameter (vocabulary padded to a multiple of tp)
  /// Replicate, or Shard(0/1): split evenly along that dim, rank order; Shard(0, 2) for the fused
  /// [W_gate; W_up] of SwiGLU (rank r holds [gate_r; up_r]). Cut with tpsp::shard_of (engine/placement.h).
  Placement placement;
  bool sequence_parallel = false;  ///< replicated, but its gradient is partial under SP (summed over TP)
  /// Replicated, but its gradient is this rank's share whatever SP (the per-head q/k_layernorm weights:
  /// each rank normalises only its heads), summed over TP with the SP ones.
  bool partial_over_tp = false;
};

/// Whole-parameter layout for a config at a TP size (names as gpt_parameter_shapes). An MoE layer lists
/// its router (replicated; sequence_parallel under SP) but not its experts, which are placed over the
/// expert groups instead (ExpertPlacement).
std::map<std::string, ShardSpec> gpt_shard_specs(const GPTConfig& cfg, int tp, bool sequence_parallel);

/// Where one expert weight of an MoE layer lives: layer, expert (global index), part ("linear_gate",
/// "linear_up" or "linear_fc2"). Its whole [f, h] (fc2: [h, f]) tensor is held by EP rank
/// expert / (E/EP), split over that rank's ETP group: gate and up Shard(0), fc2 Shard(1); every edp
/// rank holds a copy.
struct ExpertPlacement {
  int64_t layer = 0, expert = 0;
  std::string part;
  Shape global_shape;
  /// Shard(0) for linear_gate and linear_up, Shard(1) for linear_fc2, over the ETP group.
  Placement placement;
};

/// The expert weights of every MoE layer of a config (names as gpt_parameter_shapes), empty without MoE.
std::map<std::string, ExpertPlacement> gpt_expert_placements(const GPTConfig& cfg);

/// The fused parameters of one Llama layer (engine/model/llama_layer.h) under `prefix`: linear_qkv
/// [groups·(heads/groups + 2)·d, h] Shard(0) (per-group layout), linear_fc1 [2·ffn, h] Shard(0, 2),
/// linear_proj and linear_fc2 Shard(1), the norms replicated (sequence_parallel under SP; q/k_layernorm
/// partial_over_tp).
std::map<std::string, ShardSpec> llama_layer_shard_specs(int64_t hidden, int64_t heads, int64_t groups,
                                                         int64_t ffn, bool qk_layernorm,
                                                         const std::string& prefix, bool sp);

}  // namespace tpsp::model
