// Causal multi-head attention: causality, key padding, uniform queries, dropout, head shards, and
// backward against finite differences of a double implementation.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/error.h"
#include "engine/ops/attention.h"
#include "tests/ops/helpers.h"

using namespace tpsp;

namespace {

/// Double attention with the same layout and rules as the op; drop: the dropout mask values
/// [b, heads, s, s] (empty = none), pad: [b, s] (empty = none).
std::vector<double> attention_d(const std::vector<double>& qkv, int64_t s, int64_t b, int64_t heads,
                                int64_t d, const Tensor& drop, const Tensor& pad) {
  std::vector<double> out(std::size_t(s * b * heads * d), 0.0);
  auto at = [&](int64_t si, int64_t bi, int64_t h, int64_t part, int64_t j) {
    return qkv[std::size_t(((si * b + bi) * heads + h) * 3 * d + part * d + j)];
  };
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < s; ++i) {
        std::vector<double> p(std::size_t(s), 0.0);
        double mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          if (pad.defined() && pad.at({bi, j}) == 0.f) continue;
          double dot = 0;
          for (int64_t l = 0; l < d; ++l) dot += at(i, bi, h, 0, l) * at(j, bi, h, 1, l);
          p[std::size_t(j)] = dot / std::sqrt(double(d));
          mx = std::fmax(mx, p[std::size_t(j)]);
        }
        if (mx == -INFINITY) continue;
        double z = 0;
        for (int64_t j = 0; j <= i; ++j)
          if (!pad.defined() || pad.at({bi, j}) != 0.f) z += std::exp(p[std::size_t(j)] - mx);
        for (int64_t j = 0; j <= i; ++j) {
          if (pad.defined() && pad.at({bi, j}) == 0.f) continue;
          double w = std::exp(p[std::size_t(j)] - mx) / z;
          if (drop.defined()) w *= drop.at({bi, h, i, j});
          for (int64_t l = 0; l < d; ++l)
            out[std::size_t(((i * b + bi) * heads + h) * d + l)] += w * at(j, bi, h, 2, l);
        }
      }
  return out;
}

}  // namespace

TEST_CASE("attention: changing a future token's q, k or v does not change earlier outputs") {
  const int64_t s = 6, b = 2, heads = 3, d = 4;
  Tensor qkv = test::rand_tensor({s, b, heads * 3 * d}, 50, -2.f, 2.f);
  ops::AttentionOptions opt;
  opt.heads = heads;
  Tensor out = ops::attention_forward(qkv, opt).out;
  Tensor changed = qkv.clone();
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t c = 0; c < heads * 3 * d; ++c) changed.at({4, bi, c}) += 3.f;  // token 4 of every batch
  Tensor out2 = ops::attention_forward(changed, opt).out;
  for (int64_t i = 0; i < 4 * b * heads * d; ++i) CHECK(out2.at(i) == out.at(i));  // tokens 0..3 exactly
  bool later_changed = false;
  for (int64_t i = 4 * b * heads * d; i < out.numel(); ++i) later_changed |= out2.at(i) != out.at(i);
  CHECK(later_changed);
}

TEST_CASE("attention: a padded key gets zero probability, a row with no visible key gives zeros") {
  const int64_t s = 5, b = 2, heads = 2, d = 3;
  Tensor qkv = test::rand_tensor({s, b, heads * 3 * d}, 51, -2.f, 2.f);
  ops::AttentionOptions opt;
  opt.heads = heads;
  opt.key_padding_mask = Tensor::from({b, s}, {1, 1, 0, 1, 1, 0, 1, 1, 1, 1});  // b0: key 2 padded, b1: key 0
  ops::AttentionOut res = ops::attention_forward(qkv, opt);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < s; ++i) {
      CHECK(res.probs.at({0, h, i, 2}) == 0.f);
      CHECK(res.probs.at({1, h, i, 0}) == 0.f);
      double sum0 = 0, sum1 = 0;
      for (int64_t j = 0; j < s; ++j) sum0 += res.probs.at({0, h, i, j}), sum1 += res.probs.at({1, h, i, j});
      CHECK(sum0 == doctest::Approx(1.0).epsilon(1e-6));
      CHECK(sum1 == doctest::Approx(i == 0 ? 0.0 : 1.0).epsilon(1e-6));  // b1 row 0 sees only padding
    }
  for (int64_t c = 0; c < heads * d; ++c) CHECK(res.out.at({0, 1, c}) == 0.f);
  // The padded key's value never reaches an output.
  Tensor changed = qkv.clone();
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < d; ++j) changed.at({2, 0, h * 3 * d + 2 * d + j}) += 5.f;
  Tensor out2 = ops::attention_forward(changed, opt).out;
  for (int64_t si = 0; si < s; ++si)
    for (int64_t c = 0; c < heads * d; ++c) CHECK(out2.at({si, 0, c}) == res.out.at({si, 0, c}));
}

TEST_CASE("attention: q = 0 gives uniform probabilities and the mean of the visible values") {
  const int64_t s = 7, b = 2, heads = 2, d = 5;
  Tensor qkv = test::rand_tensor({s, b, heads * 3 * d}, 52, -2.f, 2.f);
  for (int64_t si = 0; si < s; ++si)
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t j = 0; j < d; ++j) qkv.at({si, bi, h * 3 * d + j}) = 0.f;
  ops::AttentionOptions opt;
  opt.heads = heads;
  opt.key_padding_mask = Tensor::full({b, s}, 1.f);
  opt.key_padding_mask.at({1, 3}) = 0.f;
  Tensor out = ops::attention_forward(qkv, opt).out;
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < s; ++i)
        for (int64_t l = 0; l < d; ++l) {
          double sum = 0;
          int count = 0;
          for (int64_t j = 0; j <= i; ++j) {
            if (bi == 1 && j == 3) continue;
            sum += qkv.at({j, bi, h * 3 * d + 2 * d + l});
            ++count;
          }
          // Mean of ≤ 7 values in [−2, 2] with weights 1/count rounded in float: a few u·2·count.
          CHECK(std::fabs(out.at({i, bi, h * d + l}) - sum / count) <= 2e-6);
        }
}

TEST_CASE("attention forward with dropout equals (probs * mask) . v, and a head shard equals its heads") {
  const int64_t s = 6, b = 2, heads = 4, d = 3;
  Tensor qkv = test::rand_tensor({s, b, heads * 3 * d}, 53, -2.f, 2.f);
  ops::AttentionOptions opt;
  opt.heads = heads;
  opt.dropout_p = 0.3f;
  opt.dropout_key = ops::DropoutKey{
      8, ops::dropout_stream("decoder.layers.0.attention", 1), {b, heads, s, s}, {0, 0, 0, 0}};
  ops::AttentionOut res = ops::attention_forward(qkv, opt);
  Tensor mask = ops::dropout_mask({b, heads, s, s}, opt.dropout_p, opt.dropout_key);
  std::vector<double> ref = attention_d(test::to_double(qkv), s, b, heads, d, mask, Tensor());
  for (int64_t i = 0; i < res.out.numel(); ++i) CHECK(std::fabs(res.out.at(i) - ref[std::size_t(i)]) <= 5e-6);
  // TP rank 1 of 2 holds heads 2..3: qkv columns [2·3d, 4·3d), dropout offset [0, 2, 0, 0].
  ops::AttentionOptions shard = opt;
  shard.heads = 2;
  shard.dropout_key.offset = {0, 2, 0, 0};
  ops::AttentionOut part = ops::attention_forward(qkv.narrow_copy(2, 2 * 3 * d, 2 * 3 * d), shard);
  Tensor expect_out = res.out.narrow_copy(2, 2 * d, 2 * d), expect_probs = res.probs.narrow_copy(1, 2, 2);
  for (int64_t i = 0; i < part.out.numel(); ++i)
    CHECK(part.out.at(i) == doctest::Approx(expect_out.at(i)).epsilon(1e-6));
  for (int64_t i = 0; i < part.probs.numel(); ++i) CHECK(part.probs.at(i) == expect_probs.at(i));
}

TEST_CASE("attention backward equals finite differences (with padding, with and without dropout)") {
  const int64_t s = 4, b = 2, heads = 2, d = 3;
  Tensor qkv = test::rand_tensor({s, b, heads * 3 * d}, 54, -1.5f, 1.5f);
  Tensor dout = test::rand_tensor({s, b, heads * d}, 55);
  for (float p : {0.f, 0.35f}) {
    CAPTURE(p);
    ops::AttentionOptions opt;
    opt.heads = heads;
    opt.key_padding_mask = Tensor::from({b, s}, {1, 1, 1, 1, 1, 0, 1, 1});
    opt.dropout_p = p;
    opt.dropout_key = ops::DropoutKey{4, 9, {}, {}};
    ops::AttentionOut res = ops::attention_forward(qkv, opt);
    Tensor dqkv = ops::attention_backward(dout, qkv, res.probs, opt);
    REQUIRE(dqkv.shape() == qkv.shape());
    Tensor mask = p > 0 ? ops::dropout_mask({b, heads, s, s}, p, opt.dropout_key) : Tensor();
    std::vector<double> x = test::to_double(qkv);
    auto loss = [&] { return test::dot(attention_d(x, s, b, heads, d, mask, opt.key_padding_mask), dout); };
    // Gradients are O(1) sums of ≤ 4·3 float products through the softmax (and a 1/(1−p) ≤ 1.54
    // scale); the float rounding of the op stays below 1e-5 absolute here.
    for (std::size_t i = 0; i < x.size(); ++i)
      CHECK(std::fabs(dqkv.data()[i] - test::central_difference(x, i, loss)) <= 1e-5);
  }
}

TEST_CASE("attention shape errors") {
  ops::AttentionOptions opt;
  opt.heads = 2;
  CHECK_THROWS_AS(ops::attention_forward(Tensor({3, 1, 10}), opt), ShapeError);  // 10 % (3·2) != 0
  opt.key_padding_mask = Tensor({2, 3});
  CHECK_THROWS_AS(ops::attention_forward(Tensor({3, 1, 12}), opt), ShapeError);  // mask must be [1, 3]
  opt.key_padding_mask = Tensor();
  ops::AttentionOut res = ops::attention_forward(Tensor({3, 1, 12}), opt);
  CHECK_THROWS_AS(ops::attention_backward(Tensor({3, 1, 6}), Tensor({3, 1, 12}), res.probs, opt), ShapeError);
}
