// Attention on packed sequences (AttentionOptions::cu_seqlens): the packed row must give every
// sequence exactly what attention on that sequence alone gives (outputs and dqkv), and bad
// boundaries are refused. Tolerance 1e-6 absolute on O(1) values: the packed call multiplies
// larger GEMMs whose masked entries are exact zeros after softmax, so only the float32 rounding of
// d = 4-term dot products and ≤ 9-term sums may differ (≈ 1e-7).
#include <doctest/doctest.h>

#include <vector>

#include "engine/error.h"
#include "engine/ops/attention.h"
#include "tests/ops/helpers.h"

using namespace tpsp;

namespace {
void check_close(const Tensor& got, const Tensor& want, const char* what) {
  REQUIRE(got.shape() == want.shape());
  for (int64_t i = 0; i < got.numel(); ++i)
    REQUIRE_MESSAGE(std::fabs(got.at(i) - want.at(i)) <= 1e-6, what, " element ", i, ": ", got.at(i), " vs ",
                    want.at(i));
}
}  // namespace

TEST_CASE("attention with cu_seqlens equals attention on each sequence alone, forward and backward") {
  const int64_t heads = 2, d = 4, T = 9;
  const std::vector<int64_t> cu{0, 4, 6, 9};
  const Tensor qkv = test::rand_tensor({T, 1, heads * 3 * d}, 7, -2.f, 2.f);
  const Tensor dout = test::rand_tensor({T, 1, heads * d}, 8);
  ops::AttentionOptions packed;
  packed.heads = heads;
  packed.cu_seqlens = cu;
  const ops::AttentionOut p = ops::attention_forward(qkv, packed);
  const Tensor dqkv = ops::attention_backward(dout, qkv, p.probs, packed);
  ops::AttentionOptions alone;
  alone.heads = heads;
  ops::AttentionOut whole = ops::attention_forward(qkv, alone);
  for (std::size_t k = 0; k + 1 < cu.size(); ++k) {
    const Tensor q = qkv.slice0(cu[k], cu[k + 1]).clone();
    const ops::AttentionOut o = ops::attention_forward(q, alone);
    check_close(p.out.slice0(cu[k], cu[k + 1]).clone(), o.out, "out");
    const Tensor dq = ops::attention_backward(dout.slice0(cu[k], cu[k + 1]).clone(), q, o.probs, alone);
    check_close(dqkv.slice0(cu[k], cu[k + 1]).clone(), dq, "dqkv");
  }
  // Not vacuous: without the boundaries, the later sequences see the earlier ones.
  double diff = 0;
  for (int64_t i = 4 * heads * d; i < T * heads * d; ++i)
    diff = std::max(diff, double(std::fabs(whole.out.at(i) - p.out.at(i))));
  CHECK(diff > 1e-3);
}

TEST_CASE("attention refuses cu_seqlens with b != 1 or boundaries that do not fit s") {
  ops::AttentionOptions opt;
  opt.cu_seqlens = {0, 2, 4};
  CHECK_THROWS_WITH_AS(ops::attention_forward(Tensor({4, 2, 3}), opt),
                       doctest::Contains("packed sequences (cu_seqlens) need b = 1"), ShapeError);
  opt.cu_seqlens = {0, 2, 5};
  CHECK_THROWS_WITH_AS(ops::attention_forward(Tensor({4, 1, 3}), opt),
                       doctest::Contains("the last cu_seqlens[2] = 5 must equal the packed total T = 4"),
                       ShapeError);
}
