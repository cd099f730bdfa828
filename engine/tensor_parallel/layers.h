// Tensor-parallel layers with explicit forward/backward (Megatron-LM
// megatron/core/tensor_parallel/layers.py; Shoeybi et al. 2019 §3, Fig. 3; Korthikanti et al.
// 2022 §4.2). A layer holds handles to its parameter shards and their gradient buffers (shared
// storage with the model's parameter map); backward accumulates into the gradient buffers.
// lab01 replaces layers.cpp (the constructors, the dispatch and the TP path); with sequence_parallel
// on, forward and backward hand over to layers_sp.cpp (lab03), and with tp_comm_overlap on to
// layers_overlap.cpp (lab04), which overlaps the layer's communication with its GEMMs (SP or not).
#pragma once

#include <string>

#include "engine/comm/process_group.h"
#include "engine/tensor.h"
#include "engine/tokens.h"

namespace tpsp::tensor_parallel {

using comm::ProcessGroup;

/// What a linear layer keeps for backward: its input exactly as it received it. Under sequence
/// parallelism that is the local shard [s/tp, b, in]: the full input is all-gathered again in
/// backward for the weight gradient (Megatron's choice, which keeps activation memory at 1/tp).
struct LinearSaved {
  Tensor input;
};

/// Options shared by both linear layers (Megatron's argument names).
struct LinearOptions {
  bool gather_output = false;      ///< ColumnParallelLinear: all-gather the output's last dim.
  bool input_is_parallel = true;   ///< RowParallelLinear: input already split on its last dim.
  bool skip_bias_add = false;      ///< Leave the bias to the caller (it is returned by bias()).
  bool sequence_parallel = false;  ///< Inputs/outputs outside the layer are [s/tp, b, h] shards.
  /// Overlap communication with computation (Megatron's tp_comm_overlap; layers_overlap.cpp):
  /// backward issues its collectives async and waits after the independent GEMM; under SP the
  /// forward all-gather + GEMM and GEMM + reduce-scatter run as rings of send/recv steps
  /// (ring_exchange.h). Same results as the serial path.
  bool tp_comm_overlap = false;
};

/// Y = X·Aᵀ + b with A split by rows of the [out, in] weight (the output dim): rank r holds
/// A_r [out/tp, in] and b_r [out/tp] and computes Y_r = X·A_rᵀ + b_r with no communication in
/// forward beyond f (identity) or, under SP, the all-gather of X along the sequence.
/// Backward: dX_r = dY_r·A_r is a partial sum, all-reduced (f's backward) or reduce-scattered
/// (SP); dA_r = dY_rᵀ·X and db_r = Σ dY_r are local.
class ColumnParallelLinear {
 public:
  /// weight [out/tp, in]; bias [out/tp] or undefined for no bias; dweight/dbias: gradient buffers
  /// of the same shapes. name labels the recorded collectives ("decoder.layers.0.mlp.linear_fc1").
  ColumnParallelLinear(Tensor weight, Tensor bias, Tensor dweight, Tensor dbias, LinearOptions opt,
                       std::string name);
  /// x: [s, b, in], or [s/tp, b, in] under SP → [s, b, out/tp] ([s, b, out] with gather_output).
  /// ShapeError when x's last dim != in, or (SP) s is not divisible by tp.
  Tensor forward(const Tensor& x, LinearSaved& saved, ProcessGroup& tp) const;
  /// dy shaped like forward's output → dx shaped like x; ACCUMULATES into dweight (one GEMM with β = 1,
  /// ops::matmul_wgrad) and dbias. A frozen weight (no dweight buffer) still returns dx
  /// (docs/known_cases.md L1).
  Tensor backward(const Tensor& dy, const LinearSaved& saved, ProcessGroup& tp);
  const Tensor& bias() const { return bias_; }
  const std::string& name() const { return name_; }

 private:
  /// forward/backward under sequence_parallel without overlap (layers_sp.cpp, lab03): x [s/tp, b, in]
  /// is all-gathered along s (s·b·in·4 bytes) before the GEMM; backward all-gathers the saved shard
  /// again for dA_r and reduce-scatters dX_r to [s/tp, b, in] (Megatron-LM layers.py
  /// LinearWithGradAccumulationAndAsyncCommunication; Korthikanti et al. 2022 §4.2.2).
  Tensor forward_sp(const Tensor& x, LinearSaved& saved, ProcessGroup& tp) const;
  Tensor backward_sp(const Tensor& dy, const LinearSaved& saved, ProcessGroup& tp);
  /// forward/backward with tp_comm_overlap (layers_overlap.cpp, lab04); same contracts.
  Tensor forward_overlap(const Tensor& x, LinearSaved& saved, ProcessGroup& tp) const;
  Tensor backward_overlap(const Tensor& dy, const LinearSaved& saved, ProcessGroup& tp);
  Tensor weight_, bias_;
  Tensor dweight_, dbias_;  // gradient buffers (f32 main_grad): handles, accumulated by backward
  LinearOptions opt_;
  std::string name_;
};

/// Y = X·Bᵀ + b with B split by columns of the [out, in] weight (the input dim): rank r holds
/// B_r [out, in/tp] and computes the partial sum X_r·B_rᵀ; g all-reduces it (or, under SP, a
/// reduce-scatter leaves [s/tp, b, out]); the full bias b [out] is added after the reduction.
/// Backward: dX_r = dY·B_r and dB_r = dYᵀ·X_r, with dY all-gathered first under SP. Under SP the
/// bias gradient covers only this rank's tokens and must be summed over TP afterwards
/// (a sequence_parallel parameter).
class RowParallelLinear {
 public:
  /// weight [out, in/tp]; bias [out] or undefined; gradient buffers of the same shapes.
  RowParallelLinear(Tensor weight, Tensor bias, Tensor dweight, Tensor dbias, LinearOptions opt,
                    std::string name);
  /// x: [s, b, in/tp] (input_is_parallel) or [s, b, in] → [s, b, out], or [s/tp, b, out] under SP.
  Tensor forward(const Tensor& x, LinearSaved& saved, ProcessGroup& tp) const;
  /// dy shaped like forward's output → dx shaped like x; ACCUMULATES into dweight (ops::matmul_wgrad)
  /// and dbias.
  Tensor backward(const Tensor& dy, const LinearSaved& saved, ProcessGroup& tp);
  const Tensor& bias() const { return bias_; }
  const std::string& name() const { return name_; }

 private:
  /// forward/backward under sequence_parallel without overlap (layers_sp.cpp, lab03): the partial
  /// [s, b, out] is reduce-scattered along s to [s/tp, b, out] (s·b·out·4 bytes); backward
  /// all-gathers dY's shards first. The bias gradient covers this rank's s/tp rows only.
  Tensor forward_sp(const Tensor& x, LinearSaved& saved, ProcessGroup& tp) const;
  Tensor backward_sp(const Tensor& dy, const LinearSaved& saved, ProcessGroup& tp);
  /// forward/backward with tp_comm_overlap (layers_overlap.cpp, lab04); same contracts.
  Tensor forward_overlap(const Tensor& x, LinearSaved& saved, ProcessGroup& tp) const;
  Tensor backward_overlap(const Tensor& dy, const LinearSaved& saved, ProcessGroup& tp);
  Tensor weight_, bias_;
  Tensor dweight_, dbias_;  // gradient buffers (f32 main_grad): handles, accumulated by backward
  LinearOptions opt_;
  std::string name_;
};

/// Word embedding with the vocabulary split over TP: rank r holds rows [r·V/tp, (r+1)·V/tp) of the
/// (padded) table; ids outside its slice give zero rows, and the partial lookups are summed by g
/// (all-reduce) or, under SP, reduce-scattered to [s/tp, b, h] (Megatron VocabParallelEmbedding,
/// reduce_scatter_embeddings). Input ids are batch-first [b, s]; the output is sequence-first.
class VocabParallelEmbedding {
 public:
  /// weight [V_padded/tp, h]; dweight its gradient buffer.
  VocabParallelEmbedding(Tensor weight, Tensor dweight, bool sequence_parallel, std::string name);
  /// ids [b, s] → [s, b, h], or [s/tp, b, h] under SP.
  Tensor forward(const TokenBatch& ids, ProcessGroup& tp) const;
  /// dout shaped like forward's output; accumulates dweight (only rows of this slice).
  void backward(const Tensor& dout, const TokenBatch& ids, ProcessGroup& tp);
  /// First vocabulary id of this rank's slice.
  int64_t vocab_start(const ProcessGroup& tp) const { return tp.rank() * weight_.size(0); }

 private:
  /// forward/backward under sequence_parallel (layers_sp.cpp, lab03): ids [b, s] → this rank's rows
  /// [s/tp, b, h] of the lookup (one reduce-scatter along dim 0); backward takes dout [s/tp, b, h] and
  /// accumulates dweight from the all-gathered [s, b, h] (Megatron VocabParallelEmbedding with
  /// reduce_scatter_embeddings). forward/backward dispatch here.
  Tensor forward_sp(const TokenBatch& ids, ProcessGroup& tp) const;
  void backward_sp(const Tensor& dout, const TokenBatch& ids, ProcessGroup& tp);
  Tensor weight_;
  Tensor dweight_;
  bool sequence_parallel_;
  std::string name_;
};

}  // namespace tpsp::tensor_parallel
