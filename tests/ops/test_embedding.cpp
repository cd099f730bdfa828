// Token embedding with vocab-parallel masking, scatter-add backward, position embeddings.
#include <doctest/doctest.h>

#include "engine/error.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/embedding.h"
#include "tests/ops/helpers.h"

using namespace tpsp;

TEST_CASE("embedding lookup flips [b, s] ids to [s, b, h]") {
  Tensor wte = test::rand_tensor({7, 3}, 20);
  TokenBatch ids{2, 3, {0, 6, 2, 5, 5, 1}};  // batch 0: 0 6 2, batch 1: 5 5 1
  Tensor out = ops::embedding_forward(ids, wte);
  REQUIRE(out.shape() == Shape{3, 2, 3});
  for (int64_t si = 0; si < 3; ++si)
    for (int64_t bi = 0; bi < 2; ++bi)
      for (int64_t j = 0; j < 3; ++j) CHECK(out.at({si, bi, j}) == wte.at({ids.at(bi, si), j}));
}

TEST_CASE(
    "vocab-parallel embedding: ids outside the slice give zero rows and two slices sum to the dense lookup") {
  const int64_t V = 7, h = 4;
  Tensor wte = test::rand_tensor({V, h}, 21);
  TokenBatch ids{2, 3, {0, 6, 3, 4, 3, 1}};
  Tensor dense = ops::embedding_forward(ids, wte);
  // Uneven split: rank 0 holds rows [0, 4), rank 1 rows [4, 7).
  Tensor lo = ops::embedding_forward(ids, wte.slice0(0, 4), 0);
  Tensor hi = ops::embedding_forward(ids, wte.slice0(4, 7), 4);
  for (int64_t si = 0; si < 3; ++si)
    for (int64_t bi = 0; bi < 2; ++bi) {
      const bool in_lo = ids.at(bi, si) < 4;
      for (int64_t j = 0; j < h; ++j) {
        CHECK((in_lo ? hi : lo).at({si, bi, j}) == 0.f);
        CHECK((in_lo ? lo : hi).at({si, bi, j}) == dense.at({si, bi, j}));
      }
    }
  Tensor sum = ops::add(lo, hi);  // the all-reduce g over the two ranks
  for (int64_t i = 0; i < sum.numel(); ++i) CHECK(sum.at(i) == dense.at(i));
}

TEST_CASE("embedding backward scatter-adds repeated ids and ignores ids of other slices") {
  TokenBatch ids{1, 4, {2, 0, 2, 2}};
  Tensor dout = Tensor::from({4, 1, 2}, {1, 10, 2, 20, 3, 30, 4, 40});
  Tensor dwte = ops::embedding_backward(dout, ids, 3);
  REQUIRE(dwte.shape() == Shape{3, 2});
  CHECK(dwte.at({0, 0}) == 2.f);
  CHECK(dwte.at({0, 1}) == 20.f);
  CHECK(dwte.at({1, 0}) == 0.f);
  CHECK(dwte.at({2, 0}) == 8.f);  // 1 + 3 + 4
  CHECK(dwte.at({2, 1}) == 80.f);
  // The slice [2, 4) on another rank: only id 2 falls in it, at local row 0.
  Tensor shard = ops::embedding_backward(dout, ids, 2, 2);
  CHECK(shard.at({0, 0}) == 8.f);
  CHECK(shard.at({1, 0}) == 0.f);
  CHECK_THROWS_AS(ops::embedding_backward(Tensor({4, 2, 2}), ids, 3), ShapeError);
}

TEST_CASE("position embedding add and backward honour seq_start") {
  Tensor wpe = test::rand_tensor({6, 2}, 22);
  Tensor x = Tensor::full({2, 3, 2}, 1.f);  // s_local = 2 tokens of a sequence shard starting at 3
  ops::position_embedding_add(x, wpe, 3);
  for (int64_t si = 0; si < 2; ++si)
    for (int64_t bi = 0; bi < 3; ++bi)
      for (int64_t j = 0; j < 2; ++j) CHECK(x.at({si, bi, j}) == 1.f + wpe.at({3 + si, j}));
  Tensor dx = Tensor::from({2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor dwpe = ops::position_embedding_backward(dx, 6, 3);
  REQUIRE(dwpe.shape() == Shape{6, 2});
  for (int64_t r : {0, 1, 2, 5}) CHECK(dwpe.at({r, 0}) == 0.f);
  CHECK(dwpe.at({3, 0}) == 9.f);  // 1 + 3 + 5
  CHECK(dwpe.at({3, 1}) == 12.f);
  CHECK(dwpe.at({4, 0}) == 27.f);  // 7 + 9 + 11
  CHECK_THROWS_AS(ops::position_embedding_add(x, wpe, 5), ShapeError);
  CHECK_THROWS_AS(ops::position_embedding_backward(dx, 6, 5), ShapeError);
}
