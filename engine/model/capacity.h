// Capacity arithmetic of the tensor-parallel (+ sequence-parallel) GPT: per rank, the parameter
// bytes, the activation bytes a layer keeps for backward, and every collective of a layer and of a
// training step with its bytes and its ring-model time. Closed forms of what this engine does — the
// tests (tests/capacity/) compare them with ParallelGPT's parameters, LayerSaved::bytes() and the
// communication recorder at small shapes — used by tpsp-capacity and the lessons' figures.
// Sources: Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models")
// §4.2 and Table 2 (activation memory with TP and SP); Shoeybi et al. 2019 §3 (the f/g all-reduces);
// nccl-tests PERFORMANCE.md (bytes and bus bandwidth), through engine/comm/cost_model.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/comm/link_model.h"
#include "engine/comm/op.h"
#include "engine/model/config.h"
#include "engine/tensor.h"

namespace tpsp::model {

/// The sizes a capacity question is about. gpt.seq is both the batch's sequence length s and the
/// position table's length (the engine's learned position embedding); gpt.ffn 0 means 4h.
struct CapacityConfig {
  GPTConfig gpt;
  int64_t batch = 1;               ///< micro-batch size b
  int tp = 1;                      ///< tensor-parallel size
  bool sequence_parallel = false;  ///< Korthikanti et al.'s SP on the [s, b, h] regions
  DType dtype = DType::bf16;       ///< storage of parameters and activations (compute is f32)
  /// Throws ShapeError naming the rule and the values: gpt.validate()'s rules, batch >= 1, tp >= 1,
  /// heads % tp == 0 ("heads=10 is not divisible by tp=4"), ffn % tp == 0, and under SP
  /// s % tp == 0; dtype f32 or bf16. The same rules ParallelGPT and TransformerLayer enforce.
  void validate() const;
  /// Rows of the residual stream a rank holds: s/tp under SP, else s.
  int64_t rows() const { return sequence_parallel ? gpt.seq / tp : gpt.seq; }
};

/// Bytes of one whole [s, b, h] activation in cfg.dtype (seed §6: bf16 [4096, 1, 8192] = 64 MiB).
/// These two do not validate (call validate() first for sizes from a user).
uint64_t sbh_bytes(const CapacityConfig& cfg);
/// Bytes of a rank's share of one [s, b, h] activation: [s/tp, b, h] under SP, else the whole.
uint64_t sbh_bytes_per_rank(const CapacityConfig& cfg);

/// Parameter bytes one rank holds, in cfg.dtype (Megatron's placement: column-parallel weights and
/// biases split by output rows, row-parallel weights by input columns, LayerNorms, row-parallel
/// biases and the position table replicated, the vocabulary padded to a multiple of tp and split).
struct ParameterBytes {
  uint64_t per_layer = 0;  ///< one TransformerLayer's shards: LN 4h + (3h² + 3h + h² + 2fh + f)/tp + 2h
  uint64_t embedding = 0;  ///< word embeddings [V_padded/tp, h] + position table [s, h]
  uint64_t output = 0;     ///< final LayerNorm 2h (+ the output layer [V_padded/tp, h] when untied)
  uint64_t total = 0;      ///< layers · per_layer + embedding + output
};
/// Throws ShapeError as validate() does.
ParameterBytes parameter_bytes(const CapacityConfig& cfg);

/// What one TransformerLayer keeps for backward on one rank after forward, tensor by tensor, counted
/// exactly as LayerSaved::bytes() counts it (engine/model/transformer_layer.h); rows = rows():
///   residual         x_in, x_mid                     2 × [rows, b, h]       dtype
///   layernorm        ln1.y, ln2.y (also the inputs    2 × [rows, b, h]       dtype
///                    QKV and fc1 save under SP)
///   layernorm_stats  ln1/ln2 mean and rstd            4 × [rows, b]          f32 (statistics)
///   qkv              QKV output                       [s, b, 3h/tp]          dtype
///   attention_out    attention output (proj's input)  [s, b, h/tp]           dtype
///   probs            attention probabilities          [b, heads/tp, s, s]    f32 (engine/ops/dispatch.cpp)
///   fc1              fc1 pre-activation               [s, b, ffn/tp]         dtype
///   gelu             GELU output (fc2's input)        [s, b, ffn/tp]         dtype
/// Dropout masks are not stored (regenerated from their key), unlike Korthikanti et al.'s 2sbh + as²b;
/// their sbh(34 + 5as/h) assumes 16-bit probabilities and no statistics.
/// The Llama block (cfg.gpt.llama(); LlamaLayerSaved::bytes(), engine/model/llama_layer.h), with
/// n = heads/tp query heads and g key/value groups on the rank (groups/tp, or 1 when tp > groups):
///   layernorm_stats  ln1/ln2 rstd                     2 × [rows, b]          f32
///   qkv_projections  q, k, v before RoPE (and norm)   [s, b, (n + 2g)·d]     dtype
///   qk_norm          q/k_layernorm outputs and rstd   [s, b, (n + g)·d] dtype + [s, b, n + g] f32
///   qkv              rotated q, k and v               [s, b, (n + 2g)·d]     dtype
///   attention_out    [s, b, n·d]; probs [b, n, s, s] f32; fc1 [gate | up] [s, b, 2·ffn/tp]; gelu: SwiGLU's
///   output [s, b, ffn/tp]
struct ActivationBytes {
  uint64_t residual = 0, layernorm = 0, layernorm_stats = 0, qkv = 0, attention_out = 0, probs = 0, fc1 = 0,
           gelu = 0;
  uint64_t qkv_projections = 0, qk_norm = 0;  ///< the Llama block only
  uint64_t total() const;
};
/// Throws ShapeError as validate() does.
ActivationBytes activation_bytes_per_layer(const CapacityConfig& cfg);

/// Korthikanti et al. 2022's activation bytes of one GPT layer per rank with 16-bit activations (§4.2):
/// sbh(10 + 24/t + 5as/(ht)) with tensor parallelism alone, sbh/t·(34 + 5as/h) with sequence parallelism
/// — what the paper's Table 2 counts (dropout masks stored, probabilities in 16 bits, no norm
/// statistics), beside this engine's own count. Throws ShapeError as validate() does.
uint64_t korthikanti_bytes_per_layer(const CapacityConfig& cfg);

/// One collective call as this engine issues it on one rank of the TP group.
struct CollectiveCall {
  std::string phase;  ///< "forward", "backward" or "finalize_grads"
  std::string label;  ///< the engine's CallOpts::label, e.g. "decoder.layers.0.mlp.linear_fc2.g"
  comm::OpKind op = comm::OpKind::all_reduce;
  uint64_t tensor_bytes = 0;  ///< S of cost_model.h (all_gather: the output), bytes
  uint64_t wire_bytes = 0;    ///< bytes this rank sends: comm::wire_bytes(op, tp, S)
  double seconds = 0;         ///< ring-model time at the link: LinkModel::seconds(op, tp, S); 0 when off
};

/// The collectives of layer `index` in one forward and one backward, in the engine's labels and
/// order: without SP forward 2 all_reduce of [s, b, h] (proj.g, fc2.g) and backward 2 (fc1.f,
/// qkv.f); with SP forward 2 all_gather + 2 reduce_scatter of [s, b, h] (the same wire bytes) and
/// backward 2 all_gather + 2 reduce_scatter + 2 all_gather that re-gather the QKV and fc1 inputs
/// for the weight gradients (Megatron's LinearWithGradAccumulationAndAsyncCommunication). The Llama
/// block with fewer key/value groups than tp adds the all_gather of the QKV activation [s, b,
/// groups·(heads/groups + 2)·d] after the QKV layer and its reduce_scatter in backward. None at tp=1.
/// Throws ShapeError as validate() does.
std::vector<CollectiveCall> layer_collectives(const CapacityConfig& cfg, const comm::LinkModel& link,
                                              int64_t index = 0);

/// Every collective of one ParallelGPT training step (forward, backward, finalize_grads) on one
/// rank of a dp = 1 layout: the replicated-input check (6 f32, max), the embedding (all_reduce, or
/// reduce_scatter under SP, and its all_gather back in backward), the layers, the output layer
/// (backward all_reduce; under SP all_gather forward, reduce_scatter + wgrad all_gather backward),
/// vocab-parallel cross entropy (3 all_reduce of [s·b] f32; sum_exp [s·b, 2] with label smoothing)
/// and, under SP, one all_reduce of the sequence-parallel gradients (f32: 6h per layer, the final
/// LayerNorm 2h, the position table s·h). None at tp=1. Throws ShapeError as validate() does.
std::vector<CollectiveCall> step_collectives(const CapacityConfig& cfg, const comm::LinkModel& link);

/// Sums over calls, grouped by (phase, op).
struct CollectiveTotal {
  std::string phase;
  comm::OpKind op = comm::OpKind::all_reduce;
  int64_t calls = 0;
  uint64_t tensor_bytes = 0;  ///< sum of S
  uint64_t wire_bytes = 0;    ///< sum of bytes sent by one rank
  double seconds = 0;         ///< sum of the ring-model times (calls in sequence, no overlap)
};
/// Groups `calls` by (phase, op) in order of first appearance.
std::vector<CollectiveTotal> totals_by_collective(const std::vector<CollectiveCall>& calls);

}  // namespace tpsp::model
