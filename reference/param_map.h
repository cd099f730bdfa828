// Named whole parameters (or gradients) of the reference models, and the two look-ups their layers use.
#pragma once

#include <map>
#include <string>

#include "engine/tensor.h"

namespace tpsp::reference {

/// Named whole parameters (or gradients), ordered by name.
using ParamMap = std::map<std::string, Tensor>;

/// p[name]; throws ShapeError "reference layer: parameter '<name>' is missing".
const Tensor& param(const ParamMap& p, const std::string& name);
/// grads[name] += g; throws ShapeError naming a missing gradient buffer (and a shape mismatch, via add_).
void accumulate(ParamMap& grads, const std::string& name, const Tensor& g);
/// grads[name] itself, for an op that adds into its gradient buffer; throws ShapeError when missing.
Tensor& grad_buffer(ParamMap& grads, const std::string& name);

}  // namespace tpsp::reference
