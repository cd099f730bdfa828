// Golden tests of the dense ops against PyTorch (float64 oracle, tools/make_goldens.py):
// matmul, bias add, GELU, LayerNorm, softmax. Tolerances and their reasons: docs/tolerances.md.
#include <doctest/doctest.h>

#include <string>

#include "engine/ops/elementwise.h"
#include "engine/ops/layernorm.h"
#include "engine/ops/matmul.h"
#include "engine/ops/softmax.h"
#include "tests/golden/golden_util.h"

using namespace tpsp;
using golden::check_close;
using golden::load;
using golden::Tol;

TEST_CASE("golden: matmul forward+backward") {
  const std::string c = "matmul";
  const Tol tol{1e-5, 3e-6};  // dot products of 11 (Y), 13 (dX) and 35 (dW) terms of O(1)
  const Tensor x = load(c, "x"), w = load(c, "w"), dy = load(c, "dy");
  check_close(c + "/y", ops::matmul_forward(x, w), load(c, "y"), tol);
  const ops::MatmulGrads g = ops::matmul_backward(dy, x, w);
  check_close(c + "/dx", g.dx, load(c, "dx"), tol);
  check_close(c + "/dw", g.dw, load(c, "dw"), tol);
  // Skipping one gradient leaves it undefined and does not change the other.
  const ops::MatmulGrads only_dx = ops::matmul_backward(dy, x, w, true, false);
  const ops::MatmulGrads only_dw = ops::matmul_backward(dy, x, w, false, true);
  CHECK_FALSE(only_dx.dw.defined());
  CHECK_FALSE(only_dw.dx.defined());
  check_close(c + "/dx (need_dw=false)", only_dx.dx, load(c, "dx"), tol);
  check_close(c + "/dw (need_dx=false)", only_dw.dw, load(c, "dw"), tol);
}

TEST_CASE("golden: bias add forward+backward") {
  const std::string c = "bias_add";
  Tensor y = load(c, "y").clone();
  ops::bias_add_forward(y, load(c, "b"));
  check_close(c + "/out", y, load(c, "out"), Tol{1.2e-7, 0});  // one correctly rounded add
  check_close(c + "/db", ops::bias_add_backward(load(c, "dy")), load(c, "db"), Tol{1e-5, 3e-6});  // 35 terms
}

TEST_CASE("golden: gelu forward+backward") {
  const std::string c = "gelu";
  const Tensor x = load(c, "x");
  const Tol tol{1e-5, 3e-6};  // tanh and a cubic; gelu' cancels to 0 near x ≈ −0.75 (atol)
  check_close(c + "/y", ops::gelu_forward(x), load(c, "y"), tol);
  check_close(c + "/dx", ops::gelu_backward(load(c, "dy"), x), load(c, "dx"), tol);
}

TEST_CASE("golden: layernorm forward+backward") {
  // layernorm: rows N(0, 2²). layernorm_offset: rows N(300, 2²), where a one-pass variance would
  // cancel catastrophically; x − mean there is only known to ½ulp(300)·rstd ≈ 1.3e-5 (normalised
  // units), hence its larger absolute tolerances (docs/tolerances.md).
  struct Case {
    const char* name;
    Tol y_dx, dgamma_dbeta;
  };
  const Tol stats{2e-6, 1e-7};  // mean and rstd: 17-term sums
  for (const Case& k : {Case{"layernorm", Tol{1e-5, 2e-6}, Tol{1e-5, 2e-6}},
                        Case{"layernorm_offset", Tol{1e-5, 5e-5}, Tol{1e-5, 1.5e-4}}}) {
    const std::string c = k.name;
    CAPTURE(c);
    const float eps = golden::case_params(c).at("eps").get<float>();
    const Tensor x = load(c, "x"), gamma = load(c, "gamma"), beta = load(c, "beta");
    const ops::LayerNormOut f = ops::layernorm_forward(x, gamma, beta, eps);
    check_close(c + "/y", f.y, load(c, "y"), k.y_dx);
    check_close(c + "/mean", f.mean, load(c, "mean"), stats);
    check_close(c + "/rstd", f.rstd, load(c, "rstd"), stats);
    const ops::LayerNormGrads g = ops::layernorm_backward(load(c, "dy"), x, gamma, f.mean, f.rstd);
    check_close(c + "/dx", g.dx, load(c, "dx"), k.y_dx);
    check_close(c + "/dgamma", g.dgamma, load(c, "dgamma"), k.dgamma_dbeta);
    check_close(c + "/dbeta", g.dbeta, load(c, "dbeta"), k.dgamma_dbeta);
  }
}

TEST_CASE("golden: softmax forward+backward") {
  const std::string c = "softmax";
  const Tol tol{5e-6, 1e-7};  // sums of 19 exponentials; probabilities ≤ 1
  const Tensor y = ops::softmax_forward(load(c, "x"));
  check_close(c + "/y", y, load(c, "y"), tol);
  check_close(c + "/dx", ops::softmax_backward(load(c, "dy"), y), load(c, "dx"), tol);
}
