// Dropout: kept fraction, scaling, determinism per key, and shard invariance of the masks.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/error.h"
#include "engine/ops/dropout.h"
#include "engine/random/philox.h"
#include "tests/ops/helpers.h"

using namespace tpsp;

TEST_CASE("dropout keeps a fraction 1-p and scales kept values by 1/(1-p)") {
  const float p = 0.3f;
  const int64_t n = 100000;
  Tensor x = test::rand_tensor({100, 1000}, 40, 0.5f, 1.5f);  // never 0, so kept ⇔ y ≠ 0
  ops::DropoutKey key{17, ops::dropout_stream("embedding", 0), {}, {}};
  Tensor y = ops::dropout_forward(x, p, key);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (y.at(i) == 0.f) continue;
    ++kept;
    CHECK(y.at(i) == x.at(i) * (1.f / (1.f - p)));                                 // the mask value 1/(1−p)
    CHECK(y.at(i) == doctest::Approx(double(x.at(i)) / (1.0 - p)).epsilon(3e-7));  // = x/(1−p) to ~2u
  }
  // Binomial(n, 1−p): σ = √(n·p·(1−p)) = 144.9 elements, i.e. 1.45e-3 of n; allow 5σ = 7.3e-3.
  CHECK(std::fabs(double(kept) / n - (1.0 - p)) < 7.3e-3);
  // The keep rule itself: uniform(seed, stream, flat index) >= p.
  for (int64_t i = 0; i < 1000; ++i)
    CHECK((y.at(i) != 0.f) == (random::uniform(17, key.stream, uint64_t(i)) >= p));
}

TEST_CASE("dropout masks: same key same mask, another stream or seed another mask, backward uses the mask") {
  const float p = 0.5f;
  const Shape shape{64, 3, 20};
  ops::DropoutKey key{5, ops::dropout_stream("decoder.layers.0.hidden_attn", 2), {}, {}};
  Tensor m1 = ops::dropout_mask(shape, p, key), m2 = ops::dropout_mask(shape, p, key);
  ops::DropoutKey next = key;
  next.stream = ops::dropout_stream("decoder.layers.0.hidden_attn", 3);
  ops::DropoutKey other_seed = key;
  other_seed.seed = 6;
  Tensor m3 = ops::dropout_mask(shape, p, next), m4 = ops::dropout_mask(shape, p, other_seed);
  int64_t same3 = 0, same4 = 0;
  for (int64_t i = 0; i < m1.numel(); ++i) {
    REQUIRE(m1.at(i) == m2.at(i));
    same3 += m1.at(i) == m3.at(i);
    same4 += m1.at(i) == m4.at(i);
  }
  // Independent masks with p = 0.5 agree on half the 3840 elements (σ = 31); identical ones on all.
  CHECK(same3 < m1.numel() * 6 / 10);
  CHECK(same4 < m1.numel() * 6 / 10);
  CHECK(ops::dropout_stream("embedding", 0) != ops::dropout_stream("embedding", 1));
  CHECK(ops::dropout_stream("embedding", 0) != ops::dropout_stream("decoder.layers.0.attention", 0));
  Tensor dy = test::rand_tensor(shape, 41);
  Tensor dx = ops::dropout_backward(dy, p, key);
  for (int64_t i = 0; i < dy.numel(); ++i) CHECK(dx.at(i) == dy.at(i) * m1.at(i));
}

TEST_CASE("dropout mask of a sequence shard equals the rows of the whole mask (SP, case S2)") {
  const int64_t s = 12, b = 3, h = 10;
  const float p = 0.4f;
  ops::DropoutKey whole_key{99, 7, {s, b, h}, {0, 0, 0}};
  Tensor whole = ops::dropout_mask({s, b, h}, p, whole_key);
  Tensor whole_default = ops::dropout_mask({s, b, h}, p, ops::DropoutKey{99, 7, {}, {}});
  for (int64_t i = 0; i < whole.numel(); ++i) REQUIRE(whole.at(i) == whole_default.at(i));
  for (int64_t rank = 0; rank < 4; ++rank) {  // tp = 4: rows [3·rank, 3·rank + 3)
    ops::DropoutKey shard_key{99, 7, {s, b, h}, {rank * s / 4, 0, 0}};
    Tensor shard = ops::dropout_mask({s / 4, b, h}, p, shard_key);
    Tensor expect = whole.slice0(rank * s / 4, (rank + 1) * s / 4);
    int64_t differs_from_rank0 = 0;
    for (int64_t i = 0; i < shard.numel(); ++i) {
      REQUIRE(shard.at(i) == expect.at(i));
      differs_from_rank0 += shard.at(i) != whole.at(i);
    }
    if (rank > 0) CHECK(differs_from_rank0 > 0);  // no two ranks reuse one mask
  }
}

TEST_CASE("dropout mask of a head shard of [b, heads, s, s] equals the heads of the whole mask") {
  const int64_t b = 2, heads = 6, s = 5;
  const float p = 0.25f;
  Tensor whole = ops::dropout_mask({b, heads, s, s}, p, ops::DropoutKey{3, 11, {}, {}});
  for (int64_t first : {0, 2, 4}) {  // tp = 3: two heads per rank
    Tensor shard =
        ops::dropout_mask({b, 2, s, s}, p, ops::DropoutKey{3, 11, {b, heads, s, s}, {0, first, 0, 0}});
    Tensor expect = whole.narrow_copy(1, first, 2);
    for (int64_t i = 0; i < shard.numel(); ++i) REQUIRE(shard.at(i) == expect.at(i));
    // ...and it is the keep rule at the global flat index ((bi·heads + first + hl)·s + i)·s + j.
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t hl = 0; hl < 2; ++hl)
        for (int64_t i = 0; i < s; ++i)
          for (int64_t j = 0; j < s; ++j) {
            const uint64_t g = uint64_t(((bi * heads + first + hl) * s + i) * s + j);
            CHECK((shard.at({bi, hl, i, j}) != 0.f) == (random::uniform(3, 11, g) >= p));
          }
  }
  // A shard along the last dim (offset inside the contiguous rows) as well.
  Tensor cols =
      ops::dropout_mask({b, heads, s, 2}, p, ops::DropoutKey{3, 11, {b, heads, s, s}, {0, 0, 0, 3}});
  Tensor expect = whole.narrow_copy(3, 3, 2);
  for (int64_t i = 0; i < cols.numel(); ++i) REQUIRE(cols.at(i) == expect.at(i));
}

TEST_CASE("dropout with p = 0 is a copy, and bad p or a shard outside the global shape are errors") {
  Tensor x = test::rand_tensor({4, 3}, 42);
  Tensor y = ops::dropout_forward(x, 0.f, ops::DropoutKey{});
  CHECK_FALSE(y.shares_storage_with(x));
  for (int64_t i = 0; i < x.numel(); ++i) CHECK(y.at(i) == x.at(i));
  CHECK_THROWS_AS(ops::dropout_mask({4, 3}, 1.f, ops::DropoutKey{}), ShapeError);
  CHECK_THROWS_AS(ops::dropout_mask({4, 3}, -0.1f, ops::DropoutKey{}), ShapeError);
  CHECK_THROWS_AS(ops::dropout_mask({4, 3}, 0.1f, ops::DropoutKey{1, 1, {6, 3}, {3, 0}}), ShapeError);
  CHECK_THROWS_AS(ops::dropout_mask({4, 3}, 0.1f, ops::DropoutKey{1, 1, {8, 3, 1}, {0, 0, 0}}), ShapeError);
}
