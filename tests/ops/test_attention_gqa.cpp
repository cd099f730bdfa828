// Grouped-query attention (engine/ops/attention.h, Megatron's per-group [q… | k | v] layout) against
// multi-head attention on the same queries with each group's key and value copied to its query heads:
// the outputs and probabilities must be those of MHA, dq MHA's dq, and a group's dk and dv the sums of
// MHA's dk and dv over the group's heads (the chain rule of the copy). MHA itself is tested against
// finite differences (test_attention.cpp) and PyTorch (tests/golden/test_golden_llama.cpp checks GQA
// against torch's repeat_interleave too). Both sides run the same float kernels on the same numbers
// with other leading dimensions, and the sums over heads add ≤ 4 terms: 1e-6 absolute and relative.
#include <doctest/doctest.h>

#include <string>

#include "engine/error.h"
#include "engine/ops/attention.h"
#include "tests/ops/helpers.h"

using namespace tpsp;

namespace {

/// The MHA qkv [s, b, heads·3·d] of a GQA qkv [s, b, G·(heads/G + 2)·d]: head h's [q | k | v] with the
/// k and v of its group h / (heads/G).
Tensor expand_groups(const Tensor& gqa, int64_t heads, int64_t groups, int64_t d) {
  const int64_t s = gqa.size(0), b = gqa.size(1), per = heads / groups, w = (per + 2) * d;
  Tensor mha({s, b, heads * 3 * d});
  for (int64_t si = 0; si < s; ++si)
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < d; ++e) {
          const int64_t g = h / per, base = g * w;
          mha.at({si, bi, h * 3 * d + e}) = gqa.at({si, bi, base + (h % per) * d + e});
          mha.at({si, bi, h * 3 * d + d + e}) = gqa.at({si, bi, base + per * d + e});
          mha.at({si, bi, h * 3 * d + 2 * d + e}) = gqa.at({si, bi, base + (per + 1) * d + e});
        }
  return mha;
}

/// The GQA gradient of an MHA gradient: q as it is, a group's k and v summed over its heads.
Tensor fold_groups(const Tensor& dmha, int64_t heads, int64_t groups, int64_t d) {
  const int64_t s = dmha.size(0), b = dmha.size(1), per = heads / groups, w = (per + 2) * d;
  Tensor g({s, b, groups * w});
  for (int64_t si = 0; si < s; ++si)
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < d; ++e) {
          const int64_t base = (h / per) * w;
          g.at({si, bi, base + (h % per) * d + e}) = dmha.at({si, bi, h * 3 * d + e});
          g.at({si, bi, base + per * d + e}) += dmha.at({si, bi, h * 3 * d + d + e});
          g.at({si, bi, base + (per + 1) * d + e}) += dmha.at({si, bi, h * 3 * d + 2 * d + e});
        }
  return g;
}

void check_close(const Tensor& got, const Tensor& want, const char* what) {
  CAPTURE(what);
  REQUIRE(got.shape() == want.shape());
  for (int64_t i = 0; i < got.numel(); ++i)
    CHECK(std::fabs(got.data()[i] - want.data()[i]) <= 1e-6 + 1e-6 * std::fabs(want.data()[i]));
}

}  // namespace

TEST_CASE("grouped-query attention equals MHA on copied keys and values, forward and backward") {
  const int64_t s = 5, b = 2, heads = 4, d = 3;
  for (const int64_t groups : {4, 2, 1}) {
    for (const float p : {0.f, 0.3f}) {
      CAPTURE(groups);
      CAPTURE(p);
      const Tensor qkv = test::rand_tensor({s, b, groups * (heads / groups + 2) * d}, 71, -1.5f, 1.5f);
      const Tensor dout = test::rand_tensor({s, b, heads * d}, 72);
      ops::AttentionOptions gqa;
      gqa.heads = heads;
      gqa.query_groups = groups;
      gqa.key_padding_mask = Tensor::from({b, s}, {1, 1, 1, 1, 1, 1, 0, 1, 1, 1});
      gqa.dropout_p = p;
      gqa.dropout_key = ops::DropoutKey{3, 8, {}, {}};
      ops::AttentionOptions mha = gqa;
      mha.query_groups = 0;
      const Tensor expanded = expand_groups(qkv, heads, groups, d);
      const ops::AttentionOut got = ops::attention_forward(qkv, gqa);
      const ops::AttentionOut want = ops::attention_forward(expanded, mha);
      check_close(got.out, want.out, "out");
      check_close(got.probs, want.probs, "probs");
      check_close(ops::attention_backward(dout, qkv, got.probs, gqa),
                  fold_groups(ops::attention_backward(dout, expanded, want.probs, mha), heads, groups, d),
                  "dqkv");
    }
  }
}

TEST_CASE("grouped-query attention: query_groups = heads is multi-head attention, bit for bit") {
  const Tensor qkv = test::rand_tensor({4, 1, 3 * 3 * 2}, 73);
  ops::AttentionOptions mha;
  mha.heads = 3;
  ops::AttentionOptions same = mha;
  same.query_groups = 3;
  const Tensor a = ops::attention_forward(qkv, mha).out, c = ops::attention_forward(qkv, same).out;
  for (int64_t i = 0; i < a.numel(); ++i) CHECK(a.data()[i] == c.data()[i]);
}

TEST_CASE("grouped-query attention refuses heads not divisible by the groups, and a qkv of another width") {
  ops::AttentionOptions opt;
  opt.heads = 6;
  opt.query_groups = 4;
  std::string msg;
  try {
    ops::attention_forward(Tensor({3, 1, 4 * 3 * 2}), opt);
  } catch (const ShapeError& e) {
    msg = e.what();
  }
  CHECK(msg.find("heads=6 is not divisible by query_groups=4") != std::string::npos);
  opt.query_groups = 2;  // width 2·(3 + 2) = 10 per unit of d: 18 columns is not a multiple
  msg.clear();
  try {
    ops::attention_forward(Tensor({3, 1, 18}), opt);
  } catch (const ShapeError& e) {
    msg = e.what();
  }
  CHECK(msg.find("not a positive multiple of query_groups*(heads/query_groups+2) = 2*(6/2+2) = 10") !=
        std::string::npos);
  opt.query_groups = -1;
  CHECK_THROWS_AS(ops::attention_forward(Tensor({3, 1, 20}), opt), ShapeError);
  opt.query_groups = 2;
  const ops::AttentionOut ok = ops::attention_forward(Tensor({3, 1, 20}), opt);  // d = 2
  CHECK(ok.out.shape() == Shape{3, 1, 12});
  CHECK_THROWS_AS(ops::attention_backward(Tensor({3, 1, 10}), Tensor({3, 1, 20}), ok.probs, opt), ShapeError);
}
