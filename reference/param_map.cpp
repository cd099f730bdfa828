#include "reference/param_map.h"

#include "engine/error.h"
#include "engine/ops/elementwise.h"

namespace tpsp::reference {

const Tensor& param(const ParamMap& p, const std::string& name) {
  const auto it = p.find(name);
  TPSP_CHECK(it != p.end(), "reference layer: parameter '", name, "' is missing");
  return it->second;
}

Tensor& grad_buffer(ParamMap& grads, const std::string& name) {
  const auto it = grads.find(name);
  TPSP_CHECK(it != grads.end(), "reference layer: gradient buffer '", name, "' is missing");
  return it->second;
}

void accumulate(ParamMap& grads, const std::string& name, const Tensor& g) {
  ops::add_(grad_buffer(grads, name), g);
}

}  // namespace tpsp::reference
