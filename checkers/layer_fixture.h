// A TransformerLayer built from whole parameters drawn from the check's seed, shared by the lab02
// (no SP) and lab03 (SP) layer scenarios. Sizes: s=12, b=2, h=24, 12 heads, ffn=48, dropout 0.1
// (every size divisible by tp = 1, 2, 3, 4).
#pragma once

#include <map>
#include <string>

#include "checkers/scenario.h"
#include "engine/model/transformer_layer.h"

namespace tpsp::checkers {

/// Runs one TransformerLayer forward and backward on this rank; under SP also sums the
/// sequence-parallel gradients over TP (phase "grad_sync"). Outputs: y, dx and every parameter
/// gradient with its layout.
Outputs run_layer(RunContext& ctx);
/// The layer's communication: without SP 2 all-reduces each way; with SP 2 all-gathers + 2
/// reduce-scatters forward, 2 reduce-scatters + 4 all-gathers backward, 1 coalesced all-reduce of
/// the sequence-parallel gradients.
Pattern layer_pattern(int tp, bool sp);
/// Bytes of activations one rank keeps for backward (LayerSaved::bytes), from the layer's shapes:
/// the [s, b, h]-sized residual and LayerNorm tensors are [s/tp, b, h] under SP.
uint64_t layer_activation_bytes(int tp, bool sp);
/// One forward on this rank; output "activation_bytes" (a [1] tensor) for the memory scenario.
Outputs run_layer_memory(RunContext& ctx);

}  // namespace tpsp::checkers
