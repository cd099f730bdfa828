// Shard layouts of one transformer layer over the TP group: which rows and columns of each weight and
// activation every TP rank holds, for the lessons' picture (tools/plot_shards.py) and for reading.
// Weights come from the engine's own partition functions (engine/model/sharding.h gpt_shard_specs and
// shard_of); the activations from the layer's placements (engine/model/transformer_layer.h, LayerSaved):
// the residual stream [s, b, h] replicated, or [s/tp, b, h] under SP (Korthikanti et al. 2022 §4.2);
// the column-parallel outputs [s, b, 3h/tp] and [s, b, ffn/tp] and the attention output [s, b, h/tp]
// split on the last dim (Shoeybi et al. 2019 §3, Fig. 3). Every rank's range is read off the slice
// that model::shard_of cuts from a whole tensor whose entries are their own flat indices, so the
// offsets are the engine's, not recomputed here. tests/shards/ compares the shapes with a real
// ParallelGPT's parameters and a real TransformerLayer's LayerSaved at tp=2, SP off and on.
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
  GPTConfig gpt;                   ///< hidden h, heads, ffn (0 = 4h); gpt.seq is the batch's s
  int64_t batch = 1;               ///< micro-batch size b
  int tp = 2;                      ///< tensor-parallel size
  bool sequence_parallel = false;  ///< residual stream [s/tp, b, h] per rank
  /// Throws ShapeError naming the rule and the values: gpt.validate(), b >= 1, tp >= 1,
  /// heads % tp == 0, ffn % tp == 0, h % tp == 0, and under SP s % tp == 0.
  void validate() const;
};

/// What one rank holds of a tensor: the box [start, stop) of the whole tensor, one entry per dim.
struct RankSlice {
  int rank = 0;
  Shape shape;                       ///< local shape (stop − start)
  std::vector<int64_t> start, stop;  ///< element ranges of the whole tensor, per dim
};

/// One weight or activation of the layer.
struct TensorLayout {
  std::string name;               ///< "linear_qkv.weight", "qkv", ...
  std::string kind;               ///< "weight" or "activation"
  std::string layer;              ///< "ColumnParallelLinear", "RowParallelLinear", "" for activations
  std::string role;               ///< one line: what the tensor is ("QKV output, QKV heads of this rank")
  std::vector<std::string> dims;  ///< dim names, e.g. {"out", "in"} or {"s", "b", "h"}
  Shape global_shape;             ///< the whole tensor
  Placement placement;            ///< Replicate or Shard(d)
  std::vector<RankSlice> ranks;   ///< one per TP rank, rank order
};

/// The layer's weights (linear_qkv, linear_proj, linear_fc1, linear_fc2, from gpt_shard_specs) and
/// activations (x, ln1, qkv, attention out, fc1, gelu, y, attention probs), each with every rank's
/// slice. Throws ShapeError as validate() does, or as slice_of() does for a tensor too large.
std::vector<TensorLayout> layer_layout(const LayoutConfig& cfg);

/// The slice rank `rank` of `tp` holds of a tensor of `shape` under `placement`, read off
/// model::shard_of. Throws ShapeError when shard_of's slice is not one box of the whole (never for
/// the engine's placements) or the tensor has more than 2^24 elements (its flat indices must be exact
/// in float32; a layout picture needs small sizes anyway).
RankSlice slice_of(const Shape& shape, const Placement& placement, int rank, int tp);

/// {"config": {...}, "tensors": [{name, kind, layer, role, dims, global_shape, placement,
///  ranks: [{rank, shape, start, stop}]}]} — the format tools/plot_shards.py reads.
nlohmann::json to_json(const LayoutConfig& cfg, const std::vector<TensorLayout>& layout);

}  // namespace tpsp::shards
