// One pre-LayerNorm GPT-2 transformer layer in one process, with whole parameters and no
// communication: the oracle for the tensor-parallel TransformerLayer (engine/model/) and the layer
// inside reference::GPT. Megatron-LM parameter names under the prefix "decoder.layers.<i>.":
//   a    = LN(x; input_layernorm)                                 [s, b, h]
//   qkv  = a·W_qkvᵀ + b_qkv                                       [s, b, 3h], per-head [q|k|v]
//   o    = causal MHA(qkv), probability dropout at site "<prefix>attention"
//   x'   = x + dropout_"<prefix>hidden_attn"(o·W_projᵀ + b_proj)
//   y    = x' + dropout_"<prefix>hidden_mlp"(MLP(LN(x'; pre_mlp_layernorm)))
// Dropout keys are (seed, dropout_stream(site, iteration)) over the whole tensor, so they are the
// bits every shard of a TP or TP+SP run draws (engine/ops/dropout.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "engine/ops/ops.h"
#include "engine/tensor.h"
#include "reference/param_map.h"

namespace tpsp::reference {

/// The layer's shape and its dropout keys: hidden h, heads, LayerNorm eps, dropout p, and the
/// (seed, iteration) the masks are keyed by.
struct LayerSpec {
  int64_t hidden = 0;
  int64_t heads = 1;
  float ln_eps = 1e-5f;
  float dropout = 0.f;
  uint64_t seed = 0;
  int64_t iteration = 0;
};

/// Activations one layer keeps for backward ([s, b, ·] each).
struct LayerActs {
  Tensor x_in;             // residual stream entering the layer [s, b, h]
  ops::LayerNormOut ln1;   // input_layernorm output and statistics
  Tensor qkv;              // [s, b, 3h]
  ops::AttentionOut attn;  // out [s, b, h], probs [b, heads, s, s]
  Tensor x_mid;            // residual after attention [s, b, h]
  ops::LayerNormOut ln2;   // pre_mlp_layernorm
  Tensor fc1;              // pre-activation [s, b, ffn]
  Tensor act;              // GELU(fc1) [s, b, ffn]
  ops::AttentionOptions attn_opt;
  ops::DropoutKey drop_attn, drop_mlp;
  /// Bytes of the tensors above.
  std::size_t bytes() const;
};

/// x [s, b, h] → y [s, b, h] with the parameters "<prefix>…" of `params`; fills `acts`.
/// Throws ShapeError for a missing parameter (names it) or bad shapes.
Tensor layer_forward(const Tensor& x, const ParamMap& params, const std::string& prefix,
                     const LayerSpec& spec, LayerActs& acts);

/// dy [s, b, h] → dx [s, b, h]; ADDS every parameter gradient into grads["<prefix>…"] (which must
/// exist with the parameters' shapes), as autograd accumulates over several backward passes.
Tensor layer_backward(const Tensor& dy, const ParamMap& params, const std::string& prefix,
                      const LayerSpec& spec, const LayerActs& acts, ParamMap& grads);

}  // namespace tpsp::reference
