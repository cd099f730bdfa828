// AdamW: one and two steps against the update written out by hand in double.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/error.h"
#include "engine/ops/adamw.h"

using namespace tpsp;

namespace {

/// The header's update in double for one element; returns the new parameter and updates m, v.
double adamw_d(double p, double g, double& m, double& v, int t, const ops::AdamWConfig& c) {
  p *= 1.0 - double(c.lr) * c.weight_decay;
  m = c.beta1 * m + (1.0 - c.beta1) * g;
  v = c.beta2 * v + (1.0 - c.beta2) * g * g;
  const double bc1 = 1.0 - std::pow(double(c.beta1), t), bc2 = 1.0 - std::pow(double(c.beta2), t);
  return p - (c.lr / bc1) * m / (std::sqrt(v) / std::sqrt(bc2) + c.eps);
}

}  // namespace

TEST_CASE("adamw: two steps equal the hand computation") {
  ops::AdamWConfig cfg;
  cfg.lr = 0.01f;
  cfg.weight_decay = 0.1f;
  Tensor p = Tensor::from({2, 2}, {1.f, -2.f, 0.5f, 0.f});
  const Tensor g1 = Tensor::from({2, 2}, {0.1f, -0.3f, 2.f, 1e-9f});
  const Tensor g2 = Tensor::from({2, 2}, {-0.2f, 0.4f, 1.f, 0.f});
  ops::AdamWState st;
  std::vector<double> pd(p.data(), p.data() + 4), m(4, 0.0), v(4, 0.0);
  ops::adamw_step(p, g1, st, 1, cfg);
  REQUIRE(st.m.shape() == p.shape());  // state created on first use
  for (int i = 0; i < 4; ++i) pd[i] = adamw_d(pd[i], g1.at(i), m[i], v[i], 1, cfg);
  // Step 1 closed form: m̂ = g, v̂ = g², so p ← p(1 − lr·wd) − lr·g/(|g| + eps) ≈ p(1 − 1e-3) − 0.01·sign(g).
  CHECK(p.at(0) == doctest::Approx(1.0 * 0.999 - 0.01).epsilon(1e-6));
  CHECK(p.at(1) == doctest::Approx(-2.0 * 0.999 + 0.01).epsilon(1e-6));
  // A tiny gradient (1e-9 vs eps 1e-8) moves the parameter by only lr·g/(g + eps) = 0.01/11.
  CHECK(p.at(3) == doctest::Approx(-0.01 * 1e-9 / (1e-9 + 1e-8)).epsilon(1e-5));
  for (int i = 0; i < 4; ++i) {
    CHECK(p.at(i) == doctest::Approx(pd[i]).epsilon(1e-6));
    CHECK(st.m.at(i) == doctest::Approx(m[i]).epsilon(1e-6));
    CHECK(st.v.at(i) == doctest::Approx(v[i]).epsilon(1e-6));
  }
  ops::adamw_step(p, g2, st, 2, cfg);
  for (int i = 0; i < 4; ++i) {
    pd[i] = adamw_d(pd[i], g2.at(i), m[i], v[i], 2, cfg);
    // A dozen float operations on O(1) values: relative 1e-6 (absolute for the zero parameter).
    CHECK(std::fabs(p.at(i) - pd[i]) <= 1e-6 * (1.0 + std::fabs(pd[i])));
    CHECK(std::fabs(st.m.at(i) - m[i]) <= 1e-6 * (1.0 + std::fabs(m[i])));
    CHECK(std::fabs(st.v.at(i) - v[i]) <= 1e-6 * (1.0 + std::fabs(v[i])));
  }
}

TEST_CASE("adamw rejects mismatched shapes and a step below 1") {
  Tensor p({3});
  ops::AdamWState st;
  CHECK_THROWS_AS(ops::adamw_step(p, Tensor({4}), st, 1, ops::AdamWConfig{}), ShapeError);
  CHECK_THROWS_AS(ops::adamw_step(p, Tensor({3}), st, 0, ops::AdamWConfig{}), ShapeError);
  ops::AdamWState bad{Tensor({2}), Tensor({2})};
  CHECK_THROWS_AS(ops::adamw_step(p, Tensor({3}), bad, 1, ops::AdamWConfig{}), ShapeError);
}

TEST_CASE("adamw: three steps equal torch 1.13 AdamW(foreach=False) bit for bit") {
  // Expected values printed (with %.9e, which round-trips float32) by torch 1.13.0 on CPU for
  // AdamW(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1), each given as its float32 value.
  Tensor p = Tensor::from({11}, {0.5f, -1.25f, 2.0f, 0.1f, -0.3f, 0.75f, 1e-3f, -2.5f, 0.0f, 1.5f, -0.01f});
  const std::vector<std::vector<float>> grads = {
      {0.3f, -0.2f, 0.05f, 1.7f, -0.9f, 0.001f, 0.4f, -0.6f, 0.25f, -0.15f, 0.8f},
      {-0.1f, 0.35f, 0.2f, -1.1f, 0.5f, 0.02f, -0.45f, 0.3f, 0.0f, 0.6f, -0.7f},
      {0.25f, -0.05f, -0.3f, 0.9f, 0.15f, -0.01f, 0.2f, -0.8f, 0.1f, -0.35f, 0.45f}};
  const std::vector<float> torch_p = {4.781332314e-01f,  -1.241029978e+00f, 1.976586699e+00f,
                                      8.442808688e-02f,  -2.860889733e-01f, 7.274982333e-01f,
                                      -9.070526809e-03f, -2.473647833e+00f, -2.385687642e-02f,
                                      1.499279022e+00f,  -2.268158644e-02f};
  ops::AdamWConfig cfg;
  cfg.lr = 0.01f;
  cfg.weight_decay = 0.1f;
  ops::AdamWState st;
  for (int t = 1; t <= 3; ++t) ops::adamw_step(p, Tensor::from({11}, grads[std::size_t(t - 1)]), st, t, cfg);
  for (int64_t i = 0; i < 11; ++i) CHECK(p.at(i) == torch_p[std::size_t(i)]);
}
