// Gradient reductions after backward (Megatron-LM megatron/core/distributed/finalize_model_grads.py
// _allreduce_layernorm_grads / sequence-parallel grads; Korthikanti et al. 2022 §4.2.2).
#pragma once

#include <string>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/tensor.h"

namespace tpsp::model {

/// Under sequence parallelism every TP rank computes the gradients of the replicated
/// "sequence_parallel" parameters (LayerNorm γ/β, row-parallel biases, position embeddings) from
/// its own [s/tp, b, h] tokens only: each holds a partial sum. This sums them over the TP group —
/// summed, not averaged (docs/known_cases.md S1) — in ONE coalesced all-reduce labelled
/// "grads.sequence_parallel", in place. tp == 1 or an empty list: nothing. ParallelGPT also passes the
/// Llama block's per-head q/k_layernorm weight gradients, which are partial over TP even without SP
/// (each rank normalises only its heads). lab03 replaces this file.
void allreduce_sequence_parallel_grads(const std::vector<Tensor*>& grads, comm::ProcessGroup& tp);

/// Averages every gradient over the data-parallel group in one coalesced all-reduce labelled
/// "grads.data_parallel", in place (dp == 1: nothing).
void allreduce_data_parallel_grads(const std::vector<Tensor*>& grads, comm::ProcessGroup& dp);

/// All-reduces the tensors as one flat buffer (one collective on `pg`), in place; all ranks must
/// pass tensors of the same shapes in the same order.
void coalesced_all_reduce(const std::vector<Tensor*>& ts, comm::ProcessGroup& pg, const std::string& label);

}  // namespace tpsp::model
