// Expected tensors and calls of the transformer-layer scenarios (checkers/layer/expected.cpp).
#pragma once

#include "checkers/scenario.h"

namespace tpsp::checkers::layer {

/// y, dx and every parameter gradient of one layer forward and kPasses backward passes, from
/// reference/transformer_layer.h, with each output's placement at (tp, sp).
ExpectedOutputs expected_layer(uint64_t seed, bool sp);
/// Without SP 2 all-reduces forward and 2 per backward pass; with SP 2 all-gathers + 2
/// reduce-scatters forward, 4 all-gathers + 2 reduce-scatters per backward pass, and 1 coalesced
/// all-reduce of the sequence-parallel gradients.
Pattern layer_pattern(int tp, bool sp);
/// Bytes of activations one rank keeps for backward (LayerSaved::bytes), from the layer's shapes:
/// the [s, b, h]-sized residual and LayerNorm tensors are [s/tp, b, h] under SP.
uint64_t layer_activation_bytes(int tp, bool sp);

}  // namespace tpsp::checkers::layer
