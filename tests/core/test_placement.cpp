// engine/placement.h against hand-written ranges: a plain shard, Megatron's stride (SwiGLU's fused fc1),
// a shard over groups (grouped-query attention's k/v when groups < tp), the errors naming their rule,
// and whole_of_gathered as the inverse of an all-gather of shard_of's pieces.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "engine/error.h"
#include "engine/placement.h"

using namespace tpsp;

namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

/// [rows, cols] whose element (i, j) is 100·i + j.
Tensor indexed(int64_t rows, int64_t cols) {
  Tensor t({rows, cols});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t.at({i, j}) = static_cast<float>(100 * i + j);
  return t;
}

}  // namespace

TEST_CASE("placement: a plain shard, rank r holds chunk r") {
  const Placement p = Placement::Shard(0);
  CHECK(shard_ranges(p, {12, 3}, 1, 4) == Ranges{{3, 6}});
  CHECK(shard_range_str(p, {12, 3}, 1, 4) == "rows [3, 6) of dim 0");
  CHECK(shard_range_str(Placement::Shard(1), {3, 8}, 3, 4) == "indices [6, 8) of dim 1");
  CHECK(p.str() == "sharded on dim 0");
  CHECK(p.code() == "Shard(0)");
  CHECK(Placement::Replicate().str() == "replicated");
  CHECK(shard_range_str(Placement::Partial(), {4}, 0, 2) == "partial sum");
}

TEST_CASE("placement: stride 2 (fused [W_gate; W_up]) gives rank r gate_r then up_r") {
  const Placement p = Placement::Shard(0, 2);
  // [2·ffn, h] with ffn = 8 at tp = 4: gate rows 0-7, up rows 8-15; rank 1 holds gate 2-3 and up 10-11.
  CHECK(shard_ranges(p, {16, 2}, 1, 4) == Ranges{{2, 4}, {10, 12}});
  CHECK(shard_range_str(p, {16, 2}, 1, 4) == "rows [2, 4) and [10, 12) of dim 0");
  CHECK(p.str() == "sharded on dim 0 with stride 2");
  CHECK(p.code() == "Shard(0, stride=2)");
  const Tensor local = shard_of(indexed(16, 2), p, 1, 4);
  REQUIRE(local.shape() == Shape{4, 2});
  CHECK(local.at({0, 1}) == 201.f);
  CHECK(local.at({1, 0}) == 300.f);
  CHECK(local.at({2, 0}) == 1000.f);
  CHECK(local.at({3, 1}) == 1101.f);
  // Local row 2 is whole row 10: the second block's range.
  CHECK(global_index({2, 1}, p, {16, 2}, 1, 4) == std::vector<int64_t>{10, 1});
  CHECK(global_index({1, 0}, p, {16, 2}, 1, 4) == std::vector<int64_t>{3, 0});
}

TEST_CASE("placement: over groups, the ranks of a group hold the same chunk") {
  // k of [s, b, groups·d] with 2 groups of d = 3 at tp = 4: ranks 0, 1 hold group 0; ranks 2, 3 group 1.
  const Placement p = Placement::ShardOverGroups(2, 2);
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    CHECK(p.shard_index(r, 4) == r / 2);
    CHECK(shard_ranges(p, {5, 1, 6}, r, 4) == Ranges{{3 * (r / 2), 3 * (r / 2) + 3}});
  }
  CHECK(p.shards(4) == 2);
  CHECK(p.str() == "sharded on dim 2 over 2 groups (replicated within a group)");
  CHECK(p.code() == "ShardOverGroups(2, groups=2)");
  CHECK(global_index({4, 0, 1}, p, {5, 1, 6}, 3, 4) == std::vector<int64_t>{4, 0, 4});
}

TEST_CASE("placement: whole_of_gathered inverts an all-gather of shard_of's pieces") {
  const Tensor w = indexed(24, 5);
  for (const Placement& p : {Placement::Shard(0), Placement::Shard(0, 2), Placement::Shard(0, 3),
                             Placement::ShardOverGroups(0, 1), Placement::ShardOverGroups(0, 2)})
    for (const int tp : {1, 2, 4}) {
      if (p.groups > tp) continue;
      CAPTURE(p.code());
      CAPTURE(tp);
      std::vector<Tensor> pieces;
      for (int r = 0; r < tp; ++r) pieces.push_back(shard_of(w, p, r, tp));
      const Tensor back = whole_of_gathered(cat(pieces, 0), p, tp);
      REQUIRE(back.shape() == w.shape());
      for (int64_t i = 0; i < w.numel(); ++i) CHECK(back.at(i) == w.at(i));
    }
}

TEST_CASE("placement: sizes it cannot lay out raise a ShapeError naming the rule") {
  CHECK_THROWS_WITH_AS(shard_ranges(Placement::Shard(0, 2), {12, 4}, 0, 4),
                       "dim 0 of [12, 4] (12) is not divisible by stride 2 × tp 4", ShapeError);
  CHECK_THROWS_WITH_AS(shard_ranges(Placement::ShardOverGroups(1, 3), {4, 6}, 0, 4),
                       "ShardOverGroups(1, groups=3): tp=4 is not divisible by groups=3", ShapeError);
  CHECK_THROWS_WITH_AS(shard_of(indexed(4, 4), Placement::Shard(2), 0, 2),
                       "Shard(2) needs dim 2, but the tensor is [4, 4]", ShapeError);
  CHECK_THROWS_WITH_AS(shard_ranges(Placement::Shard(0), {4}, 2, 2), "rank=2 is not in [0, tp=2)",
                       ShapeError);
  CHECK_THROWS_AS(whole_of_gathered(indexed(6, 1), Placement::Shard(0, 2), 2), ShapeError);
}
