// Packed sequences (engine/packed_seq.h): the cu_seqlens rules and their messages, the per-sequence
// padding to a multiple of tp, and the position runs of a rank's rows. Every value is exact (integer
// bookkeeping), so every comparison is ==.
#include <doctest/doctest.h>

#include <vector>

#include "engine/error.h"
#include "engine/packed_seq.h"

using namespace tpsp;

TEST_CASE("validate_cu_seqlens names the rule and the values it breaks") {
  CHECK_NOTHROW(validate_cu_seqlens({0, 5, 8, 15}, 15, "t"));
  CHECK_THROWS_WITH_AS(validate_cu_seqlens({1, 5, 8, 15}, 15, "t"),
                       doctest::Contains("t: cu_seqlens[0] = 1 must be 0"), ShapeError);
  CHECK_THROWS_WITH_AS(validate_cu_seqlens({0, 5, 5, 15}, 15, "t"),
                       doctest::Contains("cu_seqlens[2] = 5 is not greater than cu_seqlens[1] = 5"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(validate_cu_seqlens({0, 8, 5, 15}, 15, "t"),
                       doctest::Contains("cu_seqlens[2] = 5 is not greater than cu_seqlens[1] = 8"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(validate_cu_seqlens({0, 5, 8, 14}, 15, "t"),
                       doctest::Contains("the last cu_seqlens[3] = 14 must equal the packed total T = 15"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(validate_cu_seqlens({0}, 0, "t"), doctest::Contains("cu_seqlens has 1 entries"),
                       ShapeError);
}

TEST_CASE("pack_sequences pads each sequence to a multiple of tp with pad ids and ignored targets") {
  const std::vector<std::vector<int64_t>> ids{{1, 2, 3, 4, 5}, {6, 7, 8}, {9, 10, 11, 12, 13, 14, 15}};
  const std::vector<std::vector<int64_t>> tgt{{2, 3, 4, 5, 6}, {7, 8, 9}, {10, 11, 12, 13, 14, 15, 16}};
  const PackedBatch p1 = pack_sequences(ids, tgt, 1);  // no padding: T = 15
  CHECK(p1.params.cu_seqlens == std::vector<int64_t>{0, 5, 8, 15});
  CHECK(p1.ids.b == 1);
  CHECK(p1.ids.s == 15);
  CHECK(p1.seqlens == std::vector<int64_t>{5, 3, 7});
  const PackedBatch p2 = pack_sequences(ids, tgt, 2);  // 5→6, 3→4, 7→8: T = 18
  CHECK(p2.params.cu_seqlens == std::vector<int64_t>{0, 6, 10, 18});
  CHECK(p2.ids.ids == std::vector<int64_t>{1, 2, 3, 4, 5, 0, 6, 7, 8, 0, 9, 10, 11, 12, 13, 14, 15, 0});
  const int64_t I = kIgnoreIndex;
  CHECK(p2.targets.ids == std::vector<int64_t>{2, 3, 4, 5, 6, I, 7, 8, 9, I, 10, 11, 12, 13, 14, 15, 16, I});
  CHECK(pack_sequences(ids, tgt, 3).params.cu_seqlens == std::vector<int64_t>{0, 6, 9, 18});
  CHECK(pack_sequences(ids, tgt, 4).params.cu_seqlens == std::vector<int64_t>{0, 8, 12, 20});
  CHECK_THROWS_WITH_AS(pack_sequences({{1}, {}}, {{1}, {}}, 2), doctest::Contains("sequence 1 is empty"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(pack_sequences({{1, 2}}, {{1}}, 2),
                       doctest::Contains("sequence 0 has 2 ids but 1 targets"), ShapeError);
  CHECK_THROWS_WITH_AS(pack_sequences({}, {}, 2), doctest::Contains("no sequence to pack"), ShapeError);
  CHECK_THROWS_WITH_AS(pack_sequences({{1}}, {{1}}, 0), doctest::Contains("pad_multiple = 0 must be >= 1"),
                       ShapeError);
}

TEST_CASE("packed_position_runs restart positions at each boundary inside a rank's rows") {
  const std::vector<int64_t> cu{0, 6, 10, 18};
  // Rank 1 of tp=2 holds rows [9, 18): the last row of sequence 1 (position 3), then sequence 2.
  const std::vector<PositionRun> runs = packed_position_runs(cu, 9, 18);
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].row == 0);
  CHECK(runs[0].position == 3);
  CHECK(runs[0].rows == 1);
  CHECK(runs[1].row == 1);
  CHECK(runs[1].position == 0);
  CHECK(runs[1].rows == 8);
  CHECK(packed_position_runs(cu, 0, 18).size() == 3);
  CHECK(packed_sequence_index(cu) ==
        std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2});
}
