// One tensor-parallel transformer layer (pre-LayerNorm GPT-2 block) with explicit forward and
// backward (Megatron-LM megatron/core/transformer/transformer_layer.py, attention.py, mlp.py;
// Shoeybi et al. 2019 Fig. 3; Korthikanti et al. 2022 Fig. 5):
//   attention: LN → QKV ColumnParallelLinear (whole heads per rank) → causal attention on the local
//              heads → proj RowParallelLinear → dropout → residual;
//   MLP:       LN → fc1 ColumnParallelLinear → GELU → fc2 RowParallelLinear → dropout → residual.
// Without SP the layer's input and output are [s, b, h], replicated on the TP ranks; forward
// communicates 2 all-reduces (the two g's) and backward 2 (the two f's). With SP they are
// [s/tp, b, h] shards: LayerNorm, dropout and the residual run on the shard, and the all-reduces
// become all-gathers (entering the TP region) and reduce-scatters (leaving it).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/model/config.h"
#include "engine/ops/ops.h"
#include "engine/tensor_parallel/layers.h"

namespace tpsp::moe {
class ExpertParallelState;
}

namespace tpsp::model {

/// Where this rank sits, and the model-wide switches a layer needs.
struct LayerContext {
  comm::ProcessGroup* tp = nullptr;
  bool sequence_parallel = false;
  uint64_t seed = 0;      ///< dropout seed (shard-invariant keys, see engine/ops/dropout.h)
  int64_t iteration = 0;  ///< keys this step's dropout masks
  int64_t seq = 0;        ///< full sequence length s of the batch
  int64_t batch = 0;      ///< micro-batch size b
  /// [b, s] key padding mask (1 = real token, 0 = padding), or undefined when nothing is padded.
  Tensor key_padding_mask;
  /// Packed sequences: the [n + 1] boundaries of the s tokens of the one batch row (b = 1), which
  /// attention must not see across (engine/packed_seq.h); empty when the batch is not packed.
  std::vector<int64_t> cu_seqlens;
  /// The expert groups of a layer whose MLP is an MoE layer (LlamaLayerConfig::moe()); null otherwise.
  moe::ExpertParallelState* experts = nullptr;
};

/// Activations one layer keeps for backward on this rank.
struct LayerSaved {
  Tensor x_in, x_mid;          // residual stream: [s, b, h] or [s/tp, b, h] (SP)
  ops::LayerNormOut ln1, ln2;  // outputs + stats on the same rows
  tensor_parallel::LinearSaved qkv_in, proj_in, fc1_in, fc2_in;
  Tensor qkv;              // [s, b, 3h/tp]
  ops::AttentionOut attn;  // out [s, b, h/tp], probs [b, heads/tp, s, s]
  Tensor fc1;              // [s, b, ffn/tp] pre-activation
  ops::AttentionOptions attn_opt;
  ops::DropoutKey drop_attn, drop_mlp;
  /// Bytes of everything above that is a distinct buffer.
  std::size_t bytes() const;
};

/// Parameter and gradient handles of one layer (shards owned by the model's maps).
class TransformerLayer {
 public:
  /// prefix: "decoder.layers.i."; params/grads: the model's maps holding this layer's local shards.
  /// tp_comm_overlap: the linear layers overlap their communication (LinearOptions).
  TransformerLayer(const GPTConfig& cfg, int64_t index, std::map<std::string, Tensor>& params,
                   std::map<std::string, Tensor>& grads, bool sequence_parallel,
                   bool tp_comm_overlap = false);
  /// x: [s, b, h] (or [s/tp, b, h] under SP) → same shape.
  Tensor forward(const Tensor& x, LayerSaved& saved, const LayerContext& ctx) const;
  /// dy shaped like the output → dx shaped like the input; accumulates this layer's gradients.
  Tensor backward(const Tensor& dy, const LayerSaved& saved, const LayerContext& ctx);

 private:
  ops::DropoutKey hidden_key(const std::string& site, const LayerContext& ctx, int64_t local_rows) const;
  GPTConfig cfg_;
  std::string prefix_;
  Tensor ln1_w_, ln1_b_, ln2_w_, ln2_b_;
  Tensor dln1_w_, dln1_b_, dln2_w_, dln2_b_;  // gradient buffers (f32 main_grad handles)
  tensor_parallel::ColumnParallelLinear qkv_, fc1_;
  tensor_parallel::RowParallelLinear proj_, fc2_;
};

}  // namespace tpsp::model
