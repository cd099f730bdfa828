// AdamW: one and two steps against the update written out by hand in double; three against torch 1.13;
// the vector loop against the scalar one; the CPU probe that picks its FMA variant.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/ops/adamw.h"
#include "engine/ops/cpu/vector_clones.h"

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

TEST_CASE("adamw: the vector loop equals the scalar float loop bit for bit (100 003 elements, 5 steps)") {
  // The engine runs an AVX2+FMA variant where the CPU has it (this machine's CI: yes) and a baseline one
  // elsewhere; both must round exactly as this scalar loop, which is torch 1.13's order (file comment of
  // engine/ops/cpu/adamw.cpp): std::fma here is libm's exact fmaf (this file is built without FMA).
  // Values span 1e-20 … 1e10 so that sqrt, the division and eps all matter somewhere.
  const int64_t n = 100003;  // not a multiple of 8 or 16: the vector loop's remainder runs too
  std::vector<float> p0(n), g(n);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&state] {  // xorshift64: fixed values, no dependence on <random>'s implementation
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  for (int64_t i = 0; i < n; ++i) {
    const double mant = double(next() % 2000001) / 1e6 - 1.0;  // [-1, 1]
    p0[std::size_t(i)] = float(mant * 3.0);
    g[std::size_t(i)] = float(mant * std::pow(10.0, double(next() % 31) - 20.0));
  }
  ops::AdamWConfig cfg;
  cfg.lr = 0.01f;
  cfg.weight_decay = 0.1f;
  Tensor p = Tensor::from({n}, p0), grad = Tensor::from({n}, g);
  ops::AdamWState st;
  std::vector<float> ref = p0, m(n, 0.f), v(n, 0.f);
  for (int t = 1; t <= 5; ++t) {
    ops::adamw_step(p, grad, st, t, cfg);
    const float decay = float(1.0 - double(cfg.lr) * double(cfg.weight_decay));
    const float b1 = cfg.beta1, b2 = cfg.beta2, omb1 = float(1.0 - double(cfg.beta1)),
                omb2 = float(1.0 - double(cfg.beta2));
    const float neg_step = float(-(double(cfg.lr) / (1.0 - std::pow(double(cfg.beta1), t))));
    const float bc2_sqrt = float(std::sqrt(1.0 - std::pow(double(cfg.beta2), t)));
    for (std::size_t i = 0; i < std::size_t(n); ++i) {
      const float pi = ref[i] * decay;
      m[i] = std::fma(g[i], omb1, m[i] * b1);
      v[i] = std::fma(omb2 * g[i], g[i], v[i] * b2);
      const float denom = std::sqrt(v[i]) / bc2_sqrt + cfg.eps;
      const float step = neg_step * m[i];
      ref[i] = pi + step / denom;
    }
  }
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) differ += p.at(i) != ref[std::size_t(i)];
  CHECK(differ == 0);
}

TEST_CASE("cpu_has_avx2_fma agrees with the CPU flags in /proc/cpuinfo") {
  // What selects AdamW's FMA variant. (It once was GCC's target_clones("arch=haswell"), whose resolver
  // asks for the Haswell model: every AMD and post-Haswell Intel core ran the baseline loop.)
  std::ifstream in("/proc/cpuinfo");
  if (!in) {
    MESSAGE("skipped: no /proc/cpuinfo on this system");
    return;
  }
  std::string line;
  while (std::getline(in, line) && line.rfind("flags", 0) != 0) {
  }
  if (line.rfind("flags", 0) != 0) {
    MESSAGE("skipped: /proc/cpuinfo has no flags line (not x86)");
    return;
  }
  std::istringstream words(line.substr(line.find(':') + 1));
  std::set<std::string> flags{std::istream_iterator<std::string>(words),
                              std::istream_iterator<std::string>()};
  const bool expect = flags.count("avx2") && flags.count("fma");
  CHECK(ops::cpu::cpu_has_avx2_fma() == expect);
}
