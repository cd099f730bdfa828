// The autograd boundaries of tensor and sequence parallelism, as explicit forward/backward pairs
// (Megatron-LM megatron/core/tensor_parallel/mappings.py; Shoeybi et al. 2019 §3, Korthikanti et
// al. 2022 §4). The file reads in three layers, like Megatron's:
//   1. collective helpers on the TP group (reduce, split/gather along the last or first dim,
//      reduce-scatter along the first dim, all-to-all);
//   2. one struct per operator whose forward and backward are each one helper call, so the
//      conjugacy can be read off: f = identity ↔ all-reduce, g = all-reduce ↔ identity,
//      SP gather = all-gather ↔ reduce-scatter, SP reduce-scatter = reduce-scatter ↔ all-gather;
//   3. the public names (copy_to_tensor_model_parallel_region, …) as constant instances.
// All collectives run on the tensor-parallel group passed in (never the world: docs/known_cases.md M5)
// and are skipped when that group has one rank. First-dim ops act on [s, b, h] with s on dim 0, so
// a shard [s/tp, b, h] is a contiguous view. Split helpers check divisibility before any
// communication, on every rank ("s=3 is not divisible by tp=2"; docs/known_cases.md M4).
//
// Labs: lab01 owns mappings_tp.cpp (f, g, last-dim scatter/gather); lab03 owns mappings_sp.cpp
// (the sequence-parallel pairs and the all-to-alls).
#pragma once

#include <string>

#include "engine/comm/process_group.h"
#include "engine/tensor.h"

namespace tpsp::tensor_parallel {

using comm::ProcessGroup;

// ---- 1. collective helpers -------------------------------------------------------------------
/// All-reduce (sum) of x over the TP group; returns a new tensor, x is not modified.
Tensor _reduce(const Tensor& x, ProcessGroup& tp, const std::string& label);
/// This rank's chunk of the last dim: [..., n] → [..., n/tp]. ShapeError if n % tp != 0.
Tensor _split_along_last_dim(const Tensor& x, ProcessGroup& tp);
/// All-gather along the last dim: [..., n/tp] → [..., n], rank order.
Tensor _gather_along_last_dim(const Tensor& x, ProcessGroup& tp, const std::string& label);
/// This rank's chunk of dim 0: [s, ...] → [s/tp, ...] (a view). ShapeError if s % tp != 0.
Tensor _split_along_first_dim(const Tensor& x, ProcessGroup& tp);
/// All-gather along dim 0: [s/tp, ...] → [s, ...], rank order.
Tensor _gather_along_first_dim(const Tensor& x, ProcessGroup& tp, const std::string& label);
/// Reduce-scatter (sum) along dim 0: [s, ...] → [s/tp, ...]; rank r gets rows [r·s/tp, (r+1)·s/tp).
/// ShapeError if s % tp != 0.
Tensor _reduce_scatter_along_first_dim(const Tensor& x, ProcessGroup& tp, const std::string& label);

// ---- 2. forward/backward pairs ---------------------------------------------------------------
/// f: forward identity, backward all-reduce (Megatron _CopyToModelParallelRegion).
struct CopyToModelParallelRegion {
  Tensor forward(const Tensor& x, ProcessGroup& tp, const std::string& label) const;
  Tensor backward(const Tensor& dy, ProcessGroup& tp, const std::string& label) const;
};
/// g: forward all-reduce, backward identity (Megatron _ReduceFromModelParallelRegion).
struct ReduceFromModelParallelRegion {
  Tensor forward(const Tensor& x, ProcessGroup& tp, const std::string& label) const;
  Tensor backward(const Tensor& dy, ProcessGroup& tp, const std::string& label) const;
};
/// Forward: keep this rank's chunk of the last dim; backward: all-gather the last dim
/// (Megatron _ScatterToModelParallelRegion).
struct ScatterToModelParallelRegion {
  Tensor forward(const Tensor& x, ProcessGroup& tp, const std::string& label) const;
  Tensor backward(const Tensor& dy, ProcessGroup& tp, const std::string& label) const;
};
/// Forward: all-gather the last dim; backward: keep this rank's chunk
/// (Megatron _GatherFromModelParallelRegion).
struct GatherFromModelParallelRegion {
  Tensor forward(const Tensor& x, ProcessGroup& tp, const std::string& label) const;
  Tensor backward(const Tensor& dy, ProcessGroup& tp, const std::string& label) const;
};
/// Forward: keep this rank's sequence chunk [s/tp, b, h]; backward: all-gather dim 0, because the
/// input was replicated and every rank needs the full gradient (Megatron
/// _ScatterToSequenceParallelRegion; docs/known_cases.md M3).
struct ScatterToSequenceParallelRegion {
  Tensor forward(const Tensor& x, ProcessGroup& tp, const std::string& label) const;
  Tensor backward(const Tensor& dy, ProcessGroup& tp, const std::string& label) const;
};
/// SP's f: forward all-gather dim 0 [s/tp, b, h] → [s, b, h]; backward reduce-scatter dim 0
/// (tensor_parallel_output_grad = true: each rank's gradient is a partial sum), or just split when
/// the output gradient is already identical on every rank (Megatron
/// _GatherFromSequenceParallelRegion).
struct GatherFromSequenceParallelRegion {
  bool tensor_parallel_output_grad = true;
  Tensor forward(const Tensor& x, ProcessGroup& tp, const std::string& label) const;
  Tensor backward(const Tensor& dy, ProcessGroup& tp, const std::string& label) const;
};
/// SP's g: forward reduce-scatter dim 0 [s, b, h] → [s/tp, b, h]; backward all-gather dim 0
/// (Megatron _ReduceScatterToSequenceParallelRegion).
struct ReduceScatterToSequenceParallelRegion {
  Tensor forward(const Tensor& x, ProcessGroup& tp, const std::string& label) const;
  Tensor backward(const Tensor& dy, ProcessGroup& tp, const std::string& label) const;
};
/// sequence-parallel → head-parallel: [s/tp, b, h] (all heads, my tokens) → [s, b, h/tp] (my heads,
/// all tokens) with one all-to-all; backward is hp2sp (Megatron _AllToAll, all_to_all_sp2hp).
struct AllToAllSp2Hp {
  Tensor forward(const Tensor& x, ProcessGroup& tp, const std::string& label) const;
  Tensor backward(const Tensor& dy, ProcessGroup& tp, const std::string& label) const;
};
/// head-parallel → sequence-parallel: [s, b, h/tp] → [s/tp, b, h]; backward is sp2hp
/// (Megatron all_to_all_hp2sp).
struct AllToAllHp2Sp {
  Tensor forward(const Tensor& x, ProcessGroup& tp, const std::string& label) const;
  Tensor backward(const Tensor& dy, ProcessGroup& tp, const std::string& label) const;
};

// ---- 3. public names -------------------------------------------------------------------------
inline constexpr CopyToModelParallelRegion copy_to_tensor_model_parallel_region{};
inline constexpr ReduceFromModelParallelRegion reduce_from_tensor_model_parallel_region{};
inline constexpr ScatterToModelParallelRegion scatter_to_tensor_model_parallel_region{};
inline constexpr GatherFromModelParallelRegion gather_from_tensor_model_parallel_region{};
inline constexpr ScatterToSequenceParallelRegion scatter_to_sequence_parallel_region{};
inline constexpr GatherFromSequenceParallelRegion gather_from_sequence_parallel_region{};
inline constexpr ReduceScatterToSequenceParallelRegion reduce_scatter_to_sequence_parallel_region{};
inline constexpr AllToAllSp2Hp all_to_all_sp2hp{};
inline constexpr AllToAllHp2Sp all_to_all_hp2sp{};

}  // namespace tpsp::tensor_parallel
