#include "reference/linear.h"

#include "engine/ops/elementwise.h"
#include "engine/ops/matmul.h"

namespace tpsp::reference {

Tensor linear_forward(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor y = ops::matmul_forward(x, w);
  if (b.defined()) ops::bias_add_forward(y, b);
  return y;
}

LinearGrads linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool has_bias) {
  ops::MatmulGrads g = ops::matmul_backward(dy, x, w);
  return {g.dx, g.dw, has_bias ? ops::bias_add_backward(dy) : Tensor()};
}

Tensor mlp_forward(const Tensor& x, const MLPParams& p, MLPSaved& saved) {
  saved.x = x;
  saved.fc1 = linear_forward(x, p.w1, p.b1);
  return linear_forward(ops::gelu_forward(saved.fc1), p.w2, p.b2);
}

MLPGrads mlp_backward(const Tensor& dy, const MLPParams& p, const MLPSaved& saved) {
  const LinearGrads g2 = linear_backward(dy, ops::gelu_forward(saved.fc1), p.w2, p.b2.defined());
  const LinearGrads g1 = linear_backward(ops::gelu_backward(g2.dx, saved.fc1), saved.x, p.w1, p.b1.defined());
  return {g1.dx, g1.dw, g1.db, g2.dw, g2.db};
}

}  // namespace tpsp::reference
