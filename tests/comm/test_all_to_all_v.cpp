// all_to_all with split sizes (ProcessGroup::all_to_all with output/input_split_sizes): the exchange
// MoE token dispatch needs, on the threads backend and over Gloo at world sizes 1..4 (the relay's and the
// GPU's are in tests/witness and tests/gpu, with the same body: tests/support/all_to_all_cases.h); split
// sizes that disagree between two ranks fail on every rank naming both ranks and both counts; bad split
// lists are ShapeErrors before any communication.
#include <doctest/doctest.h>

#include <atomic>
#include <limits>

#include "engine/comm/comm_error.h"
#include "engine/comm/env.h"
#include "engine/error.h"
#include "tests/support/all_to_all_cases.h"
#include "tests/support/fork_ranks.h"
#include "tests/support/local_backend.h"

using namespace tpsp;
using namespace tpsp::testing;
using comm::CollectiveMismatchError;
using comm::ProcessGroup;

namespace {

comm::GroupOptions quick() {
  comm::GroupOptions o;
  o.timeout = std::chrono::milliseconds(5000);
  return o;
}

}  // namespace

TEST_CASE("all_to_all with split sizes on the threads backend, world 1..4") {
  for (int n = 1; n <= 4; ++n) {
    CAPTURE(n);
    run_local_ranks(n, [](ProcessGroup& pg) { check_uneven_all_to_all(pg); });
  }
}

TEST_CASE("all_to_all with split sizes over Gloo, world 1..4") {
  for (int n = 1; n <= 4; ++n) {
    CAPTURE(n);
    const auto res = run_ranks(n, [](int) { check_uneven_all_to_all(*comm::init_from_env()); });
    REQUIRE_MESSAGE(all_ok(res), "world size " << n << ":\n" << summary(res));
  }
}

TEST_CASE("all_to_all split sizes that disagree fail on every rank, naming both ranks and counts") {
  std::atomic<int> raised{0};
  // Rank 0 sends 2 rows to rank 1; rank 1 expects 1 row from rank 0.
  CHECK_THROWS_WITH_AS(
      run_local_ranks(
          2,
          [&](ProcessGroup& pg) {
            const bool zero = pg.rank() == 0;
            try {
              pg.all_to_all(Tensor({zero ? 3 : 2, 4}), {1, 1}, {1, zero ? 2 : 1}, {"dispatch"});
            } catch (const CollectiveMismatchError&) {
              ++raised;
              throw;
            }
          },
          quick()),
      doctest::Contains("split sizes disagree in all_to_all #0 'dispatch' in group world: rank 0 "
                        "sends 2 rows to rank 1, which expects 1 row from rank 0"),
      CollectiveMismatchError);
  CHECK(raised == 2);
}

TEST_CASE("all_to_all split sizes that disagree fail by name with fingerprints off too, over Gloo") {
  // Without the exchange, Gloo aborts a receiver sent more than it expects, or leaves rows unwritten.
  for (const bool more : {true, false}) {
    CAPTURE(more);
    const auto res = run_ranks(2, [more](int r) {
      comm::GroupOptions o = comm::options_from_env();
      o.fingerprints = false;
      o.timeout = std::chrono::milliseconds(5000);
      auto pg = comm::init_from_env(o);
      // more: rank 0 sends 2 rows to rank 1, which expects 1; else rank 1 expects 3 where 1 comes.
      const std::vector<int64_t> in =
          r == 0 ? std::vector<int64_t>{1, more ? 2 : 1} : std::vector<int64_t>{1, 1};
      const std::vector<int64_t> out =
          r == 1 && !more ? std::vector<int64_t>{3, 1} : std::vector<int64_t>{1, 1};
      int64_t rows = 0;
      for (int64_t k : in) rows += k;
      try {
        pg->all_to_all(Tensor({rows, 4}), out, in);
      } catch (const CollectiveMismatchError& e) {
        expect(contains(e.what(), more ? "rank 0 sends 2 rows to rank 1, which expects 1 row from rank 0"
                                       : "rank 0 sends 1 row to rank 1, which expects 3 rows from rank 0"),
               e.what());
        return;
      }
      throw std::runtime_error("no CollectiveMismatchError");
    });
    CHECK_MESSAGE(all_ok(res), summary(res));
  }
}

TEST_CASE("all_to_all split sizes too large for any tensor are ShapeErrors, not overflows") {
  run_local_ranks(2, [](ProcessGroup& pg) {
    const int64_t big = int64_t{1} << 61, max = std::numeric_limits<int64_t>::max();
    CHECK_THROWS_WITH_AS(pg.all_to_all(Tensor({1, 2}), {1, 3 * big}, {1, 0}),
                         doctest::Contains("output_split_sizes [1, 6917529027641081856] add up to more than "
                                           "1099511627776 elements of rows of 2"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(pg.all_to_all(Tensor({2, 3}), {1, 1}, {max, max}),
                         doctest::Contains("input_split_sizes"), ShapeError);
    CHECK(pg.recorder().size() == 0);
  });
}

TEST_CASE("all_to_all: an uneven call on one rank and an equal one on another is a mismatch") {
  CHECK_THROWS_WITH_AS(run_local_ranks(
                           2,
                           [&](ProcessGroup& pg) {
                             if (pg.rank() == 0)
                               pg.all_to_all(Tensor({2, 4}), {1, 1}, {1, 1});
                             else
                               pg.all_to_all(Tensor({2, 4}));
                           },
                           quick()),
                       doctest::Contains("all_to_all #0 (rows [*, 4] f32, split sizes, group world)"),
                       CollectiveMismatchError);
}

TEST_CASE("all_to_all split lists that cannot fit are ShapeErrors before any communication") {
  run_local_ranks(2, [](ProcessGroup& pg) {
    const Tensor in({3, 4});
    const int r = pg.rank();
    CHECK_THROWS_WITH_AS(
        pg.all_to_all(in, {1, 2}, {1, 1, 1}),
        doctest::Contains("input_split_sizes [1, 1, 1] has 3 entries, but the group has 2 ranks"),
        ShapeError);
    CHECK_THROWS_WITH_AS(pg.all_to_all(in, {1, -1}, {1, 2}),
                         doctest::Contains("output_split_sizes[1] = -1 is negative"), ShapeError);
    CHECK_THROWS_WITH_AS(
        pg.all_to_all(in, {1, 2}, {2, 2}),
        doctest::Contains("input_split_sizes [2, 2] add up to 4 rows, but the input [3, 4] has 3"),
        ShapeError);
    const std::vector<int64_t> keeps = r == 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{2, 1};
    const std::vector<int64_t> expects = r == 0 ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{2, 2};
    CHECK_THROWS_WITH_AS(
        pg.all_to_all(in, expects, keeps),
        doctest::Contains(r == 0 ? "rank 0 sends 1 row(s) to itself (input_split_sizes[0]) but expects 2"
                                 : "rank 1 sends 1 row(s) to itself (input_split_sizes[1]) but expects 2"),
        ShapeError);
    CHECK(pg.recorder().size() == 0);  // nothing was issued
    // The group still works, and the first call takes number 0.
    const Tensor out = pg.all_to_all(in, r == 0 ? std::vector<int64_t>{1, 1} : std::vector<int64_t>{2, 2},
                                     r == 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1, 2});
    CHECK(out.size(0) == (r == 0 ? 2 : 4));
    CHECK(pg.recorder().records().at(0).seq == 0);
  });
}

TEST_CASE("all_to_all with split sizes under link emulation takes the time of what a rank moves") {
  comm::GroupOptions o = quick();
  o.link = comm::LinkModel::parse("10MB/s,0us");
  run_local_ranks(
      2,
      [](ProcessGroup& pg) {
        // Rank 0 sends 1 MiB to rank 1 and nothing comes back: both take ≥ 0.105 s at 10 MB/s (rank 0
        // sends it, rank 1 receives it); an all-to-all of 4 bytes each way takes microseconds.
        const int64_t rows = 256 * 1024;
        const bool zero = pg.rank() == 0;
        pg.all_to_all(Tensor({zero ? rows + 1 : 1, 1}),
                      zero ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{rows, 1},
                      zero ? std::vector<int64_t>{1, rows} : std::vector<int64_t>{0, 1}, {"big"});
        const auto r = pg.recorder().query({comm::OpKind::all_to_all, "", "big"}).at(0);
        CHECK(r.t_end - r.t_start >= 1024.0 * 1024.0 / 10e6);
      },
      o);
}
