// Golden tests of the dense ops against PyTorch (float64 oracle, tools/make_goldens.py):
// matmul, bias add, GELU, LayerNorm, RMSNorm, softmax. Tolerances and their reasons: docs/tolerances.md.
#include <doctest/doctest.h>

#include <string>

#include "engine/ops/elementwise.h"
#include "engine/ops/layernorm.h"
#include "engine/ops/matmul.h"
#include "engine/ops/rmsnorm.h"
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

TEST_CASE("golden: rmsnorm forward+backward") {
  // rmsnorm: rows N(0, 2²), h = 24. rmsnorm_large: h = 37, rows N(±300, 2²), and row 5 at 3e19·N(0, 1)
  // whose squares overflow float32 (the op sums them in double). RMSNorm subtracts no mean, so x̂ ≈ ±1
  // carries one rounding and the ±300 rows keep the O(1) tolerance (unlike layernorm_offset). Their dx
  // is O(rstd) ≈ 1/300, compared relative to its scale; row 5's rstd and dx (≈ 3e-20) fall under any
  // absolute tolerance, so rstd is compared relatively and row 5's dx on its own (docs/tolerances.md).
  struct Case {
    const char* name;
    Tol rstd, dx;
    int64_t tiny_row;  // a row whose dx is compared on its own scale, or −1
  };
  const Tol o1{1e-5, 2e-6};  // y, dweight: 24- or 37-term row sums, 15- or 12-row column sums of O(1) terms
  for (const Case& k : {Case{"rmsnorm", Tol{2e-6, 1e-7}, o1, -1},
                        Case{"rmsnorm_large", Tol{2e-6, 0}, Tol{1e-5, 0, 2e-7}, 5}}) {
    const std::string c = k.name;
    CAPTURE(c);
    const float eps = golden::case_params(c).at("eps").get<float>();
    const Tensor x = load(c, "x"), w = load(c, "weight"), dy = load(c, "dy");
    const int64_t h = w.numel(), n = x.numel() / h;
    const ops::RMSNormOut f = ops::rmsnorm_forward(x, w, eps);
    check_close(c + "/y", f.y, load(c, "y"), o1);
    check_close(c + "/rstd", f.rstd, load(c, "rstd"), k.rstd);
    Tensor dweight = Tensor::zeros({h});
    const Tensor dx = ops::rmsnorm_backward(dy, x, w, f.rstd, dweight);
    const Tensor want_dx = load(c, "dx");
    check_close(c + "/dx", dx, want_dx, k.dx);
    if (k.tiny_row >= 0) {
      const std::string row = std::to_string(k.tiny_row);
      check_close(c + "/dx row " + row, dx.reshape({n, h}).slice0(k.tiny_row, k.tiny_row + 1),
                  want_dx.reshape({n, h}).slice0(k.tiny_row, k.tiny_row + 1), k.dx);
    }
    check_close(c + "/dweight", dweight, load(c, "dweight"), o1);
    // dweight is a main_grad: the op adds its f32 column sums to what the buffer holds. From
    // v_j = j/4 − 3 (exact in f32) the buffer must hold v + dweight, one f32 add, bit for bit; and
    // within o1 (plus the add's ½ ulp ≤ 4.8e-7) of v + the golden.
    Tensor acc({h}), want_acc = load(c, "dweight").clone();
    for (int64_t j = 0; j < h; ++j) {
      acc.at(j) = 0.25f * static_cast<float>(j) - 3.f;
      want_acc.at(j) += acc.at(j);
    }
    const Tensor v = acc.clone();
    ops::rmsnorm_backward(dy, x, w, f.rstd, acc);
    int64_t inexact = 0;
    for (int64_t j = 0; j < h; ++j) inexact += acc.at(j) != v.at(j) + dweight.at(j);
    CHECK_MESSAGE(inexact == 0, c, ": ", inexact, " of ", h, " dweight elements are not v + dweight");
    check_close(c + "/dweight accumulated", acc, want_acc, o1);
  }
}

TEST_CASE("golden: softmax forward+backward") {
  const std::string c = "softmax";
  const Tol tol{5e-6, 1e-7};  // sums of 19 exponentials; probabilities ≤ 1
  const Tensor y = ops::softmax_forward(load(c, "x"));
  check_close(c + "/y", y, load(c, "y"), tol);
  check_close(c + "/dx", ops::softmax_backward(load(c, "dy"), y), load(c, "dx"), tol);
}
