// The grader's comparison of one output (checkers/grader/grade.h compare_output) under the Llama block's
// placements: a strided shard (the fused [W_gate; W_up], Megatron's stride 2) and a shard over groups
// (grouped-query attention's k/v with groups < tp). The right shards pass on every rank; the wrong
// implementations the placements exist to catch — a contiguous split of the fused weight, the rank →
// group map r % groups, the same shard everywhere — fail with their signatures, and a worst element's
// global index lands in the right block.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "checkers/grader/grade.h"
#include "engine/placement.h"

using namespace tpsp;
using namespace tpsp::checkers;

namespace {

/// [rows, cols] with distinct values in [0.5, 1.5) and no structure between rows or columns (a wrong
/// shard of such a tensor matches no other signature, as with real activations): element k is
/// 0.5 + (7919·k mod 1009) / 1009, distinct for k < 1009.
Tensor indexed(int64_t rows, int64_t cols) {
  Tensor t({rows, cols});
  for (int64_t k = 0; k < rows * cols; ++k) t.at(k) = 0.5f + static_cast<float>(7919 * k % 1009) / 1009.f;
  return t;
}

/// Every rank's tensor cut from `whole` by `cut` (rank → its local tensor).
template <typename Cut>
std::vector<Tensor> every_rank(int tp, Cut cut) {
  std::vector<Tensor> out;
  for (int r = 0; r < tp; ++r) out.push_back(cut(r));
  return out;
}

/// compare_output on every rank; the first rank's problem or "".
std::string first_problem(const Expected& e, const std::vector<Tensor>& got) {
  for (int r = 0; r < static_cast<int>(got.size()); ++r)
    if (std::string p = compare_output("w", e, got, r, {}); !p.empty()) return p;
  return "";
}

}  // namespace

TEST_CASE("grader: a strided shard passes as Megatron lays it out and names a contiguous split") {
  const Tensor whole = indexed(16, 3);  // [2·ffn, h] with ffn = 8: gate rows 0-7, up rows 8-15
  const Expected e{.whole = whole, .placement = Placement::Shard(0, 2)};
  for (const int tp : {2, 4}) {
    CAPTURE(tp);
    CHECK(first_problem(e, every_rank(tp, [&](int r) { return shard_of(whole, e.placement, r, tp); })) == "");
    const std::string p =
        first_problem(e, every_rank(tp, [&](int r) { return shard_of(whole, Placement::Shard(0), r, tp); }));
    CHECK_MESSAGE(p.find("one contiguous chunk of the fused dim") != std::string::npos, p);
    CHECK_MESSAGE(p.find("gate only") != std::string::npos, p);
  }
  // tp = 2, rank 0: it must hold rows [0, 4) and [8, 12); the contiguous split gives it rows [0, 8).
  const std::string p =
      first_problem(e, every_rank(2, [&](int r) { return shard_of(whole, Placement::Shard(0), r, 2); }));
  CHECK(p.starts_with("w on rank 0 (rows [0, 4) and [8, 12) of dim 0): "));
  CHECK_MESSAGE(p.find("rank 0 holds rows [0, 8) of dim 0") != std::string::npos, p);
  CHECK_MESSAGE(p.find("rank 0 must hold rows [0, 4) and [8, 12) of dim 0") != std::string::npos, p);
}

TEST_CASE("grader: a strided shard's worst element is reported at its index in the whole tensor") {
  const Tensor whole = indexed(16, 3);
  const Expected e{.whole = whole, .placement = Placement::Shard(0, 2)};
  std::vector<Tensor> got = every_rank(2, [&](int r) { return shard_of(whole, e.placement, r, 2); });
  got[1].at({5, 2}) += 1000.f;  // rank 1's local row 5 = up row 1 of its chunk = whole row 13
  const std::string p = first_problem(e, got);
  CHECK_MESSAGE(
      p.starts_with("w on rank 1 (rows [4, 8) and [12, 16) of dim 0): 1 of 24 elements differ; worst "
                    "at global index [13, 2]"),
      p);
}

TEST_CASE("grader: a shard over groups passes when the ranks of a group agree and names r % groups") {
  const Tensor whole = indexed(6, 4);  // k as [s, groups·d] with 2 groups of d = 2
  const Placement p = Placement::ShardOverGroups(1, 2);
  const Expected e{.whole = whole, .placement = p};
  const int tp = 4;
  CHECK(first_problem(e, every_rank(tp, [&](int r) { return shard_of(whole, p, r, tp); })) == "");
  // The wrong map: rank r keeps group r % groups (ranks 1 and 2 swapped with respect to r / (tp/groups)).
  const std::string wrong =
      first_problem(e, every_rank(tp, [&](int r) { return shard_of(whole, Placement::Shard(1), r % 2, 2); }));
  CHECK_MESSAGE(wrong.starts_with("w on rank 1 (indices [0, 2) of dim 1): "), wrong);
  CHECK_MESSAGE(wrong.find("rank 1 holds group 1's chunk (indices [2, 4) of dim 1) but is in group 0") !=
                    std::string::npos,
                wrong);
  CHECK_MESSAGE(wrong.find("r % groups") != std::string::npos, wrong);
  // Every rank with group 0's chunk: no per-rank offset.
  const std::string same =
      first_problem(e, every_rank(tp, [&](int) { return shard_of(whole, Placement::Shard(1), 0, 2); }));
  CHECK_MESSAGE(same.find("every rank holds the same shard (indices [0, 2) of dim 1)") != std::string::npos,
                same);
}

TEST_CASE("grader: a placement that cannot lay out the expected tensor is a checker bug, not a verdict") {
  const Expected e{.whole = indexed(6, 2), .placement = Placement::Shard(0, 2)};
  const std::string p = first_problem(e, every_rank(2, [&](int) { return indexed(3, 2); }));
  CHECK_MESSAGE(p.find("(a checker bug)") != std::string::npos, p);
  CHECK_MESSAGE(p.find("is not divisible by stride 2 × tp 2") != std::string::npos, p);
}

TEST_CASE("grader: a strided shard with its blocks' chunks stacked in the wrong order is named") {
  const Tensor whole = indexed(16, 3);  // [2·ffn, h]: gate rows 0-7, up rows 8-15
  const Expected e{.whole = whole, .placement = Placement::Shard(0, 2)};
  // [up_r; gate_r] instead of [gate_r; up_r].
  const std::string p =
      first_problem(e, every_rank(2, [&](int r) {
                      const Tensor right = shard_of(whole, e.placement, r, 2);
                      return cat({right.narrow_copy(0, 4, 4), right.narrow_copy(0, 0, 4)}, 0);
                    }));
  CHECK_MESSAGE(
      p.find("stacked in the wrong order (its pieces are the chunks of blocks 1, 0 in that order)") !=
          std::string::npos,
      p);
  CHECK_MESSAGE(p.find("[gate_r | up_r]") != std::string::npos, p);
}

TEST_CASE("grader: positions numbered per shard or across packed documents are named") {
  const auto ramp = [](std::vector<float> v) { return Tensor::from({static_cast<int64_t>(v.size())}, v); };
  // Whole sequence of 8 tokens, one document: rank-local numbering at tp = 2 restarts at 4.
  const Expected whole_seq{.whole = ramp({0, 1, 2, 3, 4, 5, 6, 7})};
  const std::string per_shard = first_problem(whole_seq, every_rank(2, [&](int) {
                                                return ramp({0, 1, 2, 3, 0, 1, 2, 3});
                                              }));
  CHECK_MESSAGE(per_shard.find("positions restart at 0 every s/tp = 4 tokens") != std::string::npos,
                per_shard);
  // Two packed documents [0, 3) and [3, 8): a count that ignores them.
  const Expected packed{.whole = ramp({0, 1, 2, 0, 1, 2, 3, 4})};
  const std::string across = first_problem(packed, every_rank(2, [&](int) {
                                             return ramp({0, 1, 2, 3, 4, 5, 6, 7});
                                           }));
  CHECK_MESSAGE(across.find("positions run 0 … s−1 across the packed documents") != std::string::npos,
                across);
  // Another wrong count matches neither.
  const std::string other = first_problem(whole_seq, every_rank(2, [&](int) {
                                            return ramp({1, 2, 3, 4, 5, 6, 7, 8});
                                          }));
  CHECK(other.find("positions") == std::string::npos);
}
