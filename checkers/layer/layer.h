// The transformer-layer fixture shared by lab02 (no SP) and lab03 (SP), on both sides: one layer
// built from whole parameters drawn from the check's seed. Sizes: s=12, b=2, h=24, 12 heads,
// ffn=48, dropout 0.1 (every size divisible by tp = 1, 2, 3, 4).
#pragma once

#include <map>
#include <string>

#include "checkers/inputs.h"
#include "engine/model/config.h"

namespace tpsp::checkers::layer {

constexpr int64_t S = 12, B = 2;
constexpr int64_t kIteration = 3;  ///< keys the dropout masks
constexpr uint64_t kF32 = 4;
/// Backward passes (the LayerNorm and bias gradients must accumulate over them).
constexpr int kPasses = 2;
inline const std::string kPrefix = "decoder.layers.0.";

/// The layer's configuration (h=24, 12 heads, ffn=48, dropout 0.1, s=12).
GPTConfig config();
/// Every parameter of layer 0, "decoder.layers.0.<name>" → tensor, as `d` gives it (checkers/inputs.h:
/// the grader's whole tensors; a rank's shard of each split one, split_of below) (LayerNorm weights
/// around 1, everything else N(0, 0.2²)).
std::map<std::string, Tensor> whole_params(const InputDraw& d);
/// Split dim of a layer-0 parameter on TP: 0 for QKV and fc1 (column-parallel, weight and bias),
/// 1 for the projection and fc2 weights (row-parallel), -1 for the replicated ones (LayerNorms,
/// row biases).
int split_of(const std::string& name);
/// The layer's input x and output gradient dy [s, b, h]: whole, or split along s under SP (a rank's
/// s/tp rows).
Tensor layer_x(const InputDraw& d, bool sp);
Tensor layer_dy(const InputDraw& d, bool sp);

}  // namespace tpsp::checkers::layer
