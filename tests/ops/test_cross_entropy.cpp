// Dense cross entropy: known values (case C1), ignore_index (C4), label smoothing (C3's definition),
// bad targets and NaN logits.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "engine/error.h"
#include "engine/ops/cross_entropy.h"
#include "tests/ops/helpers.h"

using namespace tpsp;

TEST_CASE("cross entropy of case C1: values and per-row gradient") {
  Tensor logits = Tensor::from({2, 3}, {1, 2, 3, 0.5f, -0.5f, 1});
  ops::CrossEntropyOut out = ops::cross_entropy_forward(logits, {2, 0});
  CHECK(out.n_valid == 2);
  CHECK(out.losses.at(0) == doctest::Approx(0.407606).epsilon(1e-6));
  CHECK(out.losses.at(1) == doctest::Approx(1.104131).epsilon(1e-6));
  CHECK(out.loss == doctest::Approx((0.4076059644 + 1.1041307) / 2).epsilon(1e-6));
  // dloss = n_valid turns the mean gradient into the per-row (unreduced) gradient softmax − onehot.
  Tensor g = ops::cross_entropy_backward(logits, {2, 0}, 2.f);
  const float expect[6] = {0.090031f, 0.244728f, -0.334759f, -0.668501f, 0.121952f, 0.546549f};
  for (int64_t i = 0; i < 6; ++i) CHECK(g.at(i) == doctest::Approx(expect[i]).epsilon(1e-5));
}

TEST_CASE("cross entropy of uniform logits is ln V") {
  for (int64_t V : {2, 37, 1000}) {
    Tensor logits = Tensor::full({3, V}, 0.25f);
    ops::CrossEntropyOut out = ops::cross_entropy_forward(logits, {0, V - 1, V / 2});
    // lse = 0.25 + ln V exactly in double; one float rounding of ln V.
    for (int64_t i = 0; i < 3; ++i) CHECK(out.losses.at(i) == static_cast<float>(std::log(double(V))));
    CHECK(out.loss == static_cast<float>(std::log(double(V))));
  }
}

TEST_CASE("ignore_index rows contribute 0 loss and 0 gradient and are excluded from the mean") {
  Tensor logits = test::rand_tensor({4, 5}, 30, -2.f, 2.f);
  ops::CrossEntropyOut all = ops::cross_entropy_forward(logits, {1, 3, 0, 4});
  ops::CrossEntropyOut some = ops::cross_entropy_forward(logits, {1, kIgnoreIndex, 0, kIgnoreIndex});
  CHECK(some.n_valid == 2);
  CHECK(some.losses.at(1) == 0.f);
  CHECK(some.losses.at(3) == 0.f);
  CHECK(some.losses.at(0) == all.losses.at(0));
  CHECK(some.loss == doctest::Approx((all.losses.at(0) + all.losses.at(2)) / 2.0).epsilon(1e-6));
  Tensor g_all = ops::cross_entropy_backward(logits, {1, 3, 0, 4});
  Tensor g = ops::cross_entropy_backward(logits, {1, kIgnoreIndex, 0, kIgnoreIndex});
  for (int64_t j = 0; j < 5; ++j) {
    CHECK(g.at({1, j}) == 0.f);
    CHECK(g.at({3, j}) == 0.f);
    // Mean over 2 rows instead of 4: twice the gradient of the same row.
    CHECK(g.at({0, j}) == doctest::Approx(2.0 * g_all.at({0, j})).epsilon(1e-6));
  }
  ops::CrossEntropyOut none = ops::cross_entropy_forward(logits, std::vector<int64_t>(4, kIgnoreIndex));
  CHECK(none.n_valid == 0);
  CHECK(none.loss == 0.f);
  Tensor g0 = ops::cross_entropy_backward(logits, std::vector<int64_t>(4, kIgnoreIndex));
  for (int64_t i = 0; i < g0.numel(); ++i) CHECK(g0.at(i) == 0.f);
}

TEST_CASE("label smoothing: loss = (1-a)(-log p_t) + (a/V) sum_j(-log p_j), gradient p - target") {
  const float a = 0.1f;
  const int64_t V = 6;
  Tensor logits = test::rand_tensor({3, V}, 31, -3.f, 3.f);
  const std::vector<int64_t> t = {5, 0, 2};
  ops::CrossEntropyOut out = ops::cross_entropy_forward(logits, t, a);
  Tensor g = ops::cross_entropy_backward(logits, t, 3.f, a);  // dloss = n: per-row gradient
  double mean = 0;
  for (int64_t i = 0; i < 3; ++i) {
    double z = 0;
    for (int64_t j = 0; j < V; ++j) z += std::exp(double(logits.at({i, j})));
    double smooth = 0;
    for (int64_t j = 0; j < V; ++j) smooth += -std::log(std::exp(double(logits.at({i, j}))) / z);
    const double nlp_t = -std::log(std::exp(double(logits.at({i, t[i]}))) / z);
    const double expect = (1.0 - a) * nlp_t + a / double(V) * smooth;
    CHECK(out.losses.at(i) == doctest::Approx(expect).epsilon(1e-6));
    mean += expect / 3.0;
    for (int64_t j = 0; j < V; ++j) {
      const double p = std::exp(double(logits.at({i, j}))) / z;
      const double target = (j == t[i] ? 1.0 - a : 0.0) + a / double(V);
      CHECK(g.at({i, j}) == doctest::Approx(p - target).epsilon(1e-6));
    }
  }
  CHECK(out.loss == doctest::Approx(mean).epsilon(1e-6));
}

TEST_CASE("cross entropy backward equals finite differences of the mean loss") {
  Tensor logits = test::rand_tensor({3, 5}, 32, -2.f, 2.f);
  const std::vector<int64_t> t = {4, kIgnoreIndex, 1};
  Tensor g = ops::cross_entropy_backward(logits, t, 0.7f, 0.2f);
  std::vector<double> xd = test::to_double(logits);
  auto loss = [&] {  // 0.7 · mean over valid rows of the smoothed loss, in double
    double total = 0;
    for (std::size_t i : {0u, 2u}) {
      double z = 0, sum_x = 0;
      for (std::size_t j = 0; j < 5; ++j) z += std::exp(xd[i * 5 + j]), sum_x += xd[i * 5 + j];
      const double lse = std::log(z);
      total += lse - 0.8 * xd[i * 5 + std::size_t(t[i])] - 0.2 / 5 * sum_x;
    }
    return 0.7 * total / 2;
  };
  for (std::size_t i = 0; i < xd.size(); ++i)
    CHECK(std::fabs(g.data()[i] - test::central_difference(xd, i, loss)) <= 1e-7);  // computed in double
}

TEST_CASE("a bad target is a ShapeError naming the value and the row") {
  Tensor logits({3, 37});
  for (int64_t bad : {40, -5, 37}) {
    try {
      ops::cross_entropy_forward(logits, {0, bad, 1});
      FAIL("no error for target ", bad);
    } catch (const ShapeError& e) {
      const std::string msg = e.what();
      CHECK(msg.find("target " + std::to_string(bad)) != std::string::npos);
      CHECK(msg.find("row 1") != std::string::npos);
    }
    CHECK_THROWS_AS(ops::cross_entropy_backward(logits, {0, bad, 1}), ShapeError);
  }
  CHECK_THROWS_AS(ops::cross_entropy_forward(logits, {0, 1}), ShapeError);  // 2 targets for 3 rows
}

TEST_CASE("a NaN or +inf logit is a NumericError naming the row, a -inf logit is a masked class") {
  Tensor logits = test::rand_tensor({3, 4}, 33);
  logits.at({2, 1}) = std::numeric_limits<float>::quiet_NaN();
  try {
    ops::cross_entropy_forward(logits, {0, 1, 2});
    FAIL("no error");
  } catch (const NumericError& e) {
    CHECK(std::string(e.what()).find("row 2") != std::string::npos);
  }
  CHECK_THROWS_AS(ops::cross_entropy_backward(logits, {0, 1, 2}), NumericError);
  logits.at({2, 1}) = std::numeric_limits<float>::infinity();
  CHECK_THROWS_AS(ops::cross_entropy_forward(logits, {0, 1, 2}), NumericError);
  // A −inf logit (e.g. a padded vocabulary column) has probability 0 and leaves the loss unchanged.
  Tensor base = Tensor::from({1, 3}, {1, 2, 3});
  Tensor padded = Tensor::from({1, 4}, {1, 2, 3, -std::numeric_limits<float>::infinity()});
  CHECK(ops::cross_entropy_forward(padded, {2}).loss == ops::cross_entropy_forward(base, {2}).loss);
  CHECK(ops::cross_entropy_backward(padded, {2}).at({0, 3}) == 0.f);
  // ...but as the target it makes the loss infinite, which is an error naming the row.
  try {
    ops::cross_entropy_forward(padded, {3});
    FAIL("no error");
  } catch (const NumericError& e) {
    CHECK(std::string(e.what()).find("row 0") != std::string::npos);
  }
}
