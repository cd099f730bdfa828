// The single-process reference GPT: the same model as the tensor-parallel engine with no
// communication at all. It is the oracle every checker trusts, and it is itself checked against
// PyTorch goldens (tools/make_goldens.py).
//
// Architecture (pre-LayerNorm GPT-2, Megatron-LM parameter names), with ids [b, s] batch-first
// at the edges and [s, b, h] sequence-first inside:
//   x      = wte[ids] + wpe[0..s)                               [s, b, h]   dropout "embedding"
//   per layer i (prefix decoder.layers.i.):
//     a    = LN(x; input_layernorm)                             [s, b, h]
//     qkv  = a · W_qkvᵀ + b_qkv                                 [s, b, 3h]  per-head [q|k|v] blocks
//     o    = causal MHA(qkv), probs dropout "attention"         [s, b, h]
//     x    = x + dropout_"hidden_attn"(o · W_projᵀ + b_proj)
//     m    = LN(x; pre_mlp_layernorm)
//     x    = x + dropout_"hidden_mlp"(GELU_tanh(m · W_fc1ᵀ + b_fc1) · W_fc2ᵀ + b_fc2)
//   y      = LN(x; decoder.final_layernorm)                     [s, b, h]
//   logits = y · W_outᵀ  (W_out = wte when tied; no bias)       [s, b, V] → [b, s, V]
//   loss   = cross entropy(logits, targets), mean over non-ignored targets.
// Parameters (generated whole from (seed, name) by random::init_normal):
//   embedding.word_embeddings.weight [V, h]          N(0, σ²)
//   embedding.position_embeddings.weight [seq, h]    N(0, σ²)
//   decoder.layers.i.input_layernorm.{weight=1, bias=0} [h]
//   decoder.layers.i.self_attention.linear_qkv.{weight [3h, h] N(0,σ²), bias [3h] = 0}
//   decoder.layers.i.self_attention.linear_proj.{weight [h, h] N(0, σ²/(2L)), bias [h] = 0}
//   decoder.layers.i.pre_mlp_layernorm.{weight, bias} [h]
//   decoder.layers.i.mlp.linear_fc1.{weight [ffn, h] N(0,σ²), bias [ffn] = 0}
//   decoder.layers.i.mlp.linear_fc2.{weight [h, ffn] N(0, σ²/(2L)), bias [h] = 0}
//   decoder.final_layernorm.{weight, bias} [h]
//   output_layer.weight [V, h] N(0, σ²)               (untied only)
// Dropout sites use ops::DropoutKey{seed, dropout_stream(site, iteration), global shape} with
// sites "embedding", "decoder.layers.i.attention", "decoder.layers.i.hidden_attn",
// "decoder.layers.i.hidden_mlp"; global shapes [s, b, h] and [b, heads, s, s].
// The Llama block (GPTConfig::llama()) uses reference/llama_layer.h instead (no position table, no
// dropout, untied, unfused weights), with reference/moe_layer.h as the MLP of every moe_layer_freq-th
// layer when num_moe_experts > 0; its load-balancing losses (aux_loss()) join the differentiated loss.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/ops/ops.h"
#include "engine/tensor.h"
#include "engine/tokens.h"
#include "reference/transformer_layer.h"

namespace tpsp::reference {

using tpsp::gpt_parameter_shapes;

/// The reference model: parameters, gradients, AdamW state and the activations of the last forward.
class GPT {
 public:
  /// Builds and initialises every parameter from (seed, name). Throws ShapeError on a bad config.
  GPT(const GPTConfig& cfg, uint64_t seed);

  const GPTConfig& config() const { return cfg_; }
  ParamMap& params() { return params_; }
  const ParamMap& params() const { return params_; }
  /// Gradients of the last backward(), same names and shapes as params().
  const ParamMap& grads() const { return grads_; }

  /// Forward pass and loss. ids, targets: [b, s] with s <= cfg.seq; ids in [0, V), targets in
  /// [0, V) or −100. iteration keys the dropout masks. Returns the mean loss.
  /// Throws ShapeError for bad ids/targets (naming value and position) and NumericError for a
  /// NaN/inf loss.
  float forward(const TokenBatch& ids, const TokenBatch& targets, int64_t iteration = 0);
  /// The MoE layers' load-balancing losses of the last forward, summed (each already times
  /// moe_aux_loss_coeff); 0 without MoE. backward() differentiates forward()'s loss plus this.
  float aux_loss() const;
  /// Logits of the last forward, batch-first [b, s, V].
  Tensor logits() const;
  /// Backward of the last forward: fills grads() (overwrites, no accumulation).
  void backward();
  /// One AdamW step (1-based step count kept inside) on every parameter; LayerNorm weights and
  /// biases get weight decay too (PyTorch's default: one parameter group).
  void step(const ops::AdamWConfig& opt);
  /// Bytes of activations saved for backward by the last forward (all layers).
  std::size_t activation_bytes() const;

 private:
  struct Acts;
  GPTConfig cfg_;
  uint64_t seed_;
  ParamMap params_;
  ParamMap grads_;
  std::map<std::string, ops::AdamWState> opt_state_;
  int64_t steps_ = 0;
  std::shared_ptr<Acts> acts_;
};

}  // namespace tpsp::reference
