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
  Shape global_shape;              ///< whole parameter (vocabulary padded to a multiple of tp)
  Placement placement;             ///< Replicate, or Shard(0/1): split evenly along that dim, rank order
  bool sequence_parallel = false;  ///< replicated, but its gradient is partial under SP (summed over TP)
};

/// Whole-parameter layout for a config at a TP size (names as gpt_parameter_shapes).
std::map<std::string, ShardSpec> gpt_shard_specs(const GPTConfig& cfg, int tp, bool sequence_parallel);

/// The local slice of a whole tensor for TP rank `rank` of `tp` under `spec`.
Tensor shard_of(const Tensor& whole, const ShardSpec& spec, int rank, int tp);

}  // namespace tpsp::model
