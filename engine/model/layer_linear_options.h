// The options every linear layer of a transformer layer takes (GPT-2's TransformerLayer and LlamaLayer):
// column- and row-parallel alike, the input already parallel, the bias added inside, SP and the
// communication overlap from the model's settings.
#pragma once

#include "engine/tensor_parallel/layers.h"

namespace tpsp::model {

/// LinearOptions{gather_output = false, input_is_parallel = true, skip_bias_add = false,
/// sequence_parallel = sp, tp_comm_overlap = overlap}.
inline tensor_parallel::LinearOptions layer_linear_options(bool sp, bool overlap) {
  return {.gather_output = false,
          .input_is_parallel = true,
          .skip_bias_add = false,
          .sequence_parallel = sp,
          .tp_comm_overlap = overlap};
}

}  // namespace tpsp::model
