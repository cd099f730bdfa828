// Rank functions of the transformer-layer scenarios (checkers/layer/run.cpp).
#pragma once

#include "checkers/run_context.h"

namespace tpsp::checkers::layer {

/// One layer forward and kPasses backward passes; under SP also the gradient reduction (phase
/// "grad_sync"). Outputs y, dx and grad.<parameter>.
RankOutputs run_layer(RunContext& ctx);
/// One forward; output "activation_bytes" (a [1] tensor: LayerSaved::bytes()).
RankOutputs run_layer_memory(RunContext& ctx);
/// A forward whose input rows disagree with LayerContext::seq; output 1 if the layer refused it.
RankOutputs run_layer_wrong_seq(RunContext& ctx);

}  // namespace tpsp::checkers::layer
