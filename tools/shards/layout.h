// Shard layouts of one transformer layer over the TP group: which rows and columns of each weight and
// activation every TP rank holds, for the lessons' picture (tools/plot_shards.py) and for reading.
// Weights come from the engine's own partition functions (engine/model/sharding.h gpt_shard_specs, cut
// by engine/placement.h shard_of); the activations from the layer's placements
// (engine/model/transformer_layer.h LayerSaved, engine/model/llama_layer.h LlamaLayerSaved): the residual
// stream [s, b, h] replicated, or [s/tp, b, h] under SP (Korthikanti et al. 2022 §4.2); the
// column-parallel outputs split on the last dim (Shoeybi et al. 2019 §3, Fig. 3). The Llama block adds
// Megatron's two layouts that are not one box per rank: the fused [W_gate; W_up] and its output split
// with stride 2 (rank r holds gate_r and up_r: two boxes), and with fewer key/value groups than ranks k
// and v sharded over groups and replicated within one (Shard over groups). Every rank's boxes are read
// off the slice that shard_of cuts from a whole tensor whose entries are their own flat indices, so the
// offsets are the engine's, not recomputed here. tests/shards/ compares the shapes with a real
// ParallelGPT's parameters and a real layer's saved activations (GPT-2 and Llama blocks).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/placement.h"
#include "engine/tensor.h"

namespace tpsp::shards {

/// The sizes of one layer's layout question.
struct LayoutConfig {
  /// hidden h, heads, ffn (0 = 4h); gpt.seq is the batch's s; the Llama block when gpt.llama()
  /// (llama_config: num_query_groups key/value groups, fused fc1 of width 2·ffn).
  GPTConfig gpt;
  int64_t batch = 1;               ///< micro-batch size b
  int tp = 2;                      ///< tensor-parallel size
  bool sequence_parallel = false;  ///< residual stream [s/tp, b, h] per rank
  /// Throws ShapeError naming the rule and the values: gpt.validate(), b >= 1, tp >= 1,
  /// heads % tp == 0, ffn % tp == 0, h % tp == 0, under SP s % tp == 0, and for the Llama block
  /// LlamaLayerConfig::validate(tp) (groups dividing tp or divisible by it, …).
  void validate() const;
};

/// A box [start, stop) of the whole tensor, one entry per dim.
struct Box {
  std::vector<int64_t> start, stop;
  bool operator==(const Box&) const = default;
};

/// What one rank holds of a tensor: one box, or with a stride k one box per block (concatenated in order
/// along the split dim, they are the rank's local tensor).
struct RankSlice {
  int rank = 0;
  Shape shape;             ///< local shape
  std::vector<Box> boxes;  ///< element ranges of the whole tensor
};

/// One weight or activation of the layer.
struct TensorLayout {
  std::string name;               ///< "linear_qkv.weight", "qkv", ...
  std::string kind;               ///< "weight" or "activation"
  std::string layer;              ///< "ColumnParallelLinear", "RowParallelLinear", "" for activations
  std::string role;               ///< one line: what the tensor is ("QKV output, QKV heads of this rank")
  std::vector<std::string> dims;  ///< dim names, e.g. {"out", "in"} or {"s", "b", "h"}
  Shape global_shape;             ///< the whole tensor
  Placement placement;            ///< Replicate, Shard(d), Shard(d, stride) or ShardOverGroups(d, groups)
  std::vector<RankSlice> ranks;   ///< one per TP rank, rank order
};

/// The layer's weights (from gpt_shard_specs: linear_qkv, linear_proj, linear_fc1, linear_fc2, norms,
/// biases) and activations, each with every rank's slice. GPT-2 block: x, ln1, qkv, attention_probs,
/// attention_out, fc1, gelu, y. Llama block: x, ln1, qkv (the fused linear's output), q, k, v (this rank's
/// heads and key/value groups), attention_probs, attention_out, fc1 ([gate_r | up_r], stride 2), swiglu,
/// y. Throws ShapeError as validate() does, or as slice_of() does for a tensor too large.
std::vector<TensorLayout> layer_layout(const LayoutConfig& cfg);

/// The slice rank `rank` of `tp` holds of a tensor of `shape` under `placement`, read off shard_of
/// (engine/placement.h). Throws ShapeError when a block of shard_of's slice is not one box of the whole
/// (never for the engine's placements), for sizes the placement cannot lay out (check_placement), or
/// when the tensor has more than 2^24 elements (its flat indices must be exact in float32; a layout
/// picture needs small sizes anyway).
RankSlice slice_of(const Shape& shape, const Placement& placement, int rank, int tp);

/// {"config": {model, s, b, h, heads, query_groups, ffn, tp, sequence_parallel}, "tensors": [{name, kind,
/// layer, role, dims, global_shape, placement ("Shard(0, stride=2)", Placement::code), ranks: [{rank,
/// shape, boxes: [{start, stop}]}]}]} — the format tools/plot_shards.py reads.
nlohmann::json to_json(const LayoutConfig& cfg, const std::vector<TensorLayout>& layout);

}  // namespace tpsp::shards
