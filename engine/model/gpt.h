// The tensor-parallel (+ sequence-parallel, + data-parallel) GPT: the same model as
// reference/gpt.h, with its parameters sharded over the TP group (Megatron-LM
// megatron/core/models/gpt/gpt_model.py; Shoeybi et al. 2019; Korthikanti et al. 2022).
//   embedding: VocabParallelEmbedding (vocabulary padded to a multiple of tp) + position embedding
//              (the GPT-2 block; the Llama block's RoPE is applied inside attention)
//   layers:    TransformerLayer × L, or LlamaLayer × L for the Llama block (GPTConfig::llama()), whose
//              MLP is an MoE layer every moe_layer_freq-th layer when num_moe_experts > 0 (experts over
//              the EP × ETP groups of ParallelOptions::experts, folded over the same ranks)
//   output:    final LayerNorm (RMSNorm) → ColumnParallelLinear sharing the word embedding's shard
//              (tied) or its own (untied), no gather → vocab-parallel cross entropy.
// Parameters keep the reference's names; each local tensor is a slice of the whole parameter
// generated from (seed, name), so tp=1 and tp=N start from the same model.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/llama_layer.h"
#include "engine/model/sharding.h"
#include "engine/model/transformer_layer.h"
#include "engine/packed_seq.h"
#include "engine/parallel_state.h"
#include "engine/tensor_parallel/cross_entropy.h"
#include "engine/tensor_parallel/layers.h"
#include "engine/tokens.h"

namespace tpsp::model {

/// Switches of the parallel model.
struct ParallelOptions {
  bool sequence_parallel = false;
  /// Checks that every TP rank holds the same token batch: a 64-bit hash of ids and targets,
  /// compared in one small all-reduce per forward; a difference is a ShapeError on every rank of
  /// the TP group (docs/known_cases.md W2). On by default; benchmarks turn it off.
  bool check_replicated_inputs = true;
  /// Under SP, pad a sequence whose s is not divisible by tp up to the next multiple (ids 0,
  /// targets −100, padded keys masked in attention) instead of refusing it; the loss and the
  /// gradients are those of the unpadded batch (padding sits after the real tokens, so causal
  /// attention never lets a real token see it). The padded s must still fit the position table.
  bool pad_sequence = false;
  /// Storage of the model's parameters: f32, or bf16 with an f32 master copy that the optimizer
  /// updates (Megatron's Float16OptimizerWithFloat16Params). Compute and gradients are f32 either way:
  /// grads() are the f32 main_grad buffers that every backward accumulates into.
  DType param_dtype = DType::f32;
  /// Overlap the TP communication of every linear layer with its GEMMs (Megatron's tp_comm_overlap;
  /// lab04, engine/tensor_parallel/layers_overlap.cpp). Same results as without.
  bool tp_comm_overlap = false;
  /// Where the parameters, gradients, optimizer state and activations live (Device::cuda after
  /// engine/runtime/device_runtime.h activate(): a GPU or the emulated device). Token ids stay on the
  /// host (the embedding uploads them); losses and logits_local() come back to the host.
  Device device = Device::cpu;
  /// The expert groups (EDP × EP × ETP folded over the same world as DP × TP; Megatron's MoE parallel
  /// folding) for a config with MoE layers (GPTConfig::num_moe_experts > 0); required then, unused
  /// otherwise. The caller builds it (collective) and keeps it alive as long as the model.
  moe::ExpertParallelState* experts = nullptr;
};

/// One micro-batch: ids and targets [b, s] batch-first.
struct MicroBatch {
  TokenBatch ids, targets;
};

/// The expert layout rules of a config with MoE layers, checkable before any rank starts (ParallelGPT
/// checks them too): ShapeError naming the rule for world_size not divisible by ep·etp, num_moe_experts
/// not divisible by ep, moe_ffn not divisible by etp, tp > 1 without opt.sequence_parallel, a device
/// other than the CPU or parameters other than f32.
void check_moe_layout(const GPTConfig& cfg, int world_size, int tp, int ep, int etp,
                      const ParallelOptions& opt);

/// The GPT on one rank of a DP × TP layout.
class ParallelGPT {
 public:
  /// Validates the layout before any collective (heads % tp, ffn % tp, hidden % tp; for the Llama block
  /// also num_query_groups and tp dividing one another, LlamaLayerConfig::validate; with MoE layers
  /// ParallelOptions::experts present and over this world, num_moe_experts % EP, moe_ffn % ETP, SP when
  /// tp > 1, f32 parameters on the CPU) with messages naming the values, then builds the local shards:
  /// TP shards of the dense parameters, and of each MoE layer the router whole and this EP rank's experts
  /// cut over ETP (gpt_expert_placements). Collective-free.
  ParallelGPT(const GPTConfig& cfg, uint64_t seed, ParallelState& ps, ParallelOptions opt);

  const GPTConfig& config() const { return cfg_; }
  /// Vocabulary padded to a multiple of tp (== vocab at tp=1).
  int64_t padded_vocab() const { return padded_vocab_; }
  /// The model's parameter shards (param_dtype).
  std::map<std::string, Tensor>& params() { return params_; }
  /// The f32 main_grad buffers, one per parameter, same shapes.
  const std::map<std::string, Tensor>& grads() const { return grads_; }
  const ShardSpec& shard_spec(const std::string& name) const { return specs_.at(name); }

  /// Forward + loss on this data-parallel rank's rows. ids/targets [b, s] batch-first (the same on
  /// every TP rank). Throws ShapeError (on every rank, before any collective) for ids out of
  /// range, s > cfg.seq, or s % tp != 0 under SP (unless pad_sequence); NumericError for a NaN
  /// loss. Returns the mean loss of this rank's rows.
  float forward(const TokenBatch& ids, const TokenBatch& targets, int64_t iteration = 0);
  /// Forward + loss on a packed micro-batch (engine/packed_seq.h, pack_sequences): ids/targets
  /// [1, T] hold n sequences at the boundaries packed.cu_seqlens, padding included (targets −100
  /// there). Attention stays inside each sequence (block-diagonal causal) and positions restart at
  /// 0 in each, so every sequence gets the loss and gradients it would get alone. Throws ShapeError
  /// (on every rank, before any collective) for ids/targets not [1, T], bad cu_seqlens
  /// (validate_cu_seqlens), a sequence longer than the position table seq, or under SP a total T not
  /// divisible by tp ("packed total 13 is not divisible by tp=2"; pack_sequences pads each sequence
  /// to a multiple of tp); NumericError for a NaN loss. Returns the mean loss over the non-ignored
  /// targets of all the sequences.
  float forward_packed(const TokenBatch& ids, const TokenBatch& targets, const PackedSeqParams& packed,
                       int64_t iteration = 0);
  /// This rank's share of the MoE layers' load-balancing losses of the last forward (Σ over the MoE
  /// layers; each already times moe_aux_loss_coeff): summed over the TP group it is the replica's. The
  /// objective that backward differentiates is forward()'s loss plus the replica's aux loss (Megatron
  /// reports them apart). 0 without MoE.
  float aux_loss() const;
  /// The expert weights of the MoE layers (whole layout; this rank holds only its EP rank's experts).
  const std::map<std::string, ExpertPlacement>& expert_placements() const { return expert_placements_; }
  /// Local logits of the last forward, batch-first [b, s, V_padded/tp] (padded positions dropped).
  Tensor logits_local() const;
  /// The Llama block's RoPE positions of the last forward, one per token of the whole sequence
  /// (restarting at 0 in each packed sequence; empty for the GPT-2 block). RoPE is relative, so a wrong
  /// restart between sequences that cannot see each other leaves every output unchanged: only these
  /// numbers show it.
  const std::vector<int64_t>& rope_positions() const;

  // ---- training, Megatron's way: per micro-batch forward + backward accumulating into the f32
  // main_grad, then one finalize (gradient reductions) and one optimizer step -------------------------
  /// Zeroes every main_grad buffer.
  void zero_grad();
  /// Backward of the last forward for a loss scaled by `loss_scale` (1/K with K micro-batches, so the
  /// sum of the micro-batch gradients is the gradient of the mean loss), ACCUMULATED into grads();
  /// no gradient communication beyond the layers' own.
  void backward_micro_batch(float loss_scale);
  /// The gradient reductions after the last micro-batch (Megatron finalize_model_grads): sums the
  /// gradients of sequence_parallel parameters over TP (one coalesced all-reduce, SP only) and
  /// averages every gradient but the experts' over DP (one coalesced all-reduce, dp > 1 only); the
  /// experts' are summed over their edp group and scaled by 1/dp (finalize_moe_grads, per MoE layer). Once
  /// per step: a buffer reduced again after each micro-batch would count earlier micro-batches several times.
  void finalize_grads();
  /// One AdamW step on the local shards (the f32 master copy for bf16 parameters, then rounded into
  /// the parameters).
  void step(const ops::AdamWConfig& opt);
  /// A whole training step over K micro-batches: zero_grad, forward + backward_micro_batch(1/K) for
  /// each, finalize_grads, step. Returns the mean of the micro-batch losses (this rank's rows).
  float train_step(const std::vector<MicroBatch>& micro_batches, int64_t iteration,
                   const ops::AdamWConfig& opt);
  /// One micro-batch's gradients, for a caller that runs forward itself: zero_grad +
  /// backward_micro_batch(1) + finalize_grads. Overwrites grads().
  void backward();
  /// Bytes of activations this rank keeps for backward after the last forward, per layer.
  std::vector<std::size_t> activation_bytes_per_layer() const;

 private:
  struct Saved;
  void init_parameters();
  /// The MoE checks of the constructor (see there); ShapeError naming the rule.
  void validate_moe_layout() const;
  /// The forward on ids/targets whose s fits the layout; `padding` [b, s] marks real tokens (1) when
  /// the batch was padded for SP, else undefined; real_seq is s before padding; cu_seqlens: the
  /// packed sequences' boundaries (empty: not packed).
  float forward_impl(const TokenBatch& ids, const TokenBatch& targets, int64_t iteration,
                     const Tensor& padding, int64_t real_seq, const std::vector<int64_t>& cu_seqlens = {});
  /// Checks shared by forward and forward_packed: ids and targets in range and of one shape.
  void validate_batch(const TokenBatch& ids, const TokenBatch& targets) const;
  GPTConfig cfg_;
  uint64_t seed_;
  ParallelState& ps_;
  ParallelOptions opt_;
  int64_t padded_vocab_;
  std::map<std::string, Tensor> params_, grads_;
  std::map<std::string, Tensor> master_;  // f32 master copies of bf16 parameters (empty for f32)
  std::map<std::string, ShardSpec> specs_;
  std::map<std::string, ExpertPlacement> expert_placements_;
  std::map<std::string, ops::AdamWState> opt_state_;
  std::vector<TransformerLayer> layers_;
  std::vector<LlamaLayer> llama_layers_;  // the Llama block (cfg.llama()) instead of layers_
  std::unique_ptr<tensor_parallel::VocabParallelEmbedding> embedding_;
  std::unique_ptr<tensor_parallel::ColumnParallelLinear> output_layer_;
  std::shared_ptr<Saved> saved_;
  int64_t steps_ = 0;
};

}  // namespace tpsp::model
