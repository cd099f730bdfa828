// all_to_all with split sizes through the relay (launch/relay_server.h): the ranks' results equal the
// other transports' (the shared body, tests/support/all_to_all_cases.h), the relay's log carries each
// rank's bytes to every peer, and split sizes that disagree are refused by the relay itself when a rank
// skips the ProcessGroup's own exchange of them, naming both ranks and both counts.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "tests/support/all_to_all_cases.h"
#include "tests/support/ranks.h"
#include "tests/witness/relay_fixture.h"

using namespace tpsp;
using nlohmann::json;
using testing::RelayFixture;

TEST_CASE("relay: all_to_all with split sizes carries exact rows and logs the bytes to each peer") {
  constexpr int n = 3;
  RelayFixture relay(n);
  const auto results =
      testing::run_ranks(n, [&](int r) { testing::check_uneven_all_to_all(*relay.world(r, n)); });
  CHECK_MESSAGE(testing::all_ok(results), testing::summary(results));
  int seen = 0;
  for (const json& e : relay.finish()) {
    if (e.value("op", "") != "all_to_all") continue;
    const int r = e["rank"];
    std::vector<uint64_t> want, expects;
    uint64_t total = 0;
    for (int j = 0; j < n; ++j) {
      want.push_back(static_cast<uint64_t>(testing::rows_between(r, j, n)) * 12);  // rows of 3 f32
      expects.push_back(static_cast<uint64_t>(testing::rows_between(j, r, n)) * 12);
      total += want.back();
    }
    CHECK(e["send_bytes"].get<std::vector<uint64_t>>() == want);
    CHECK(e["recv_bytes"].get<std::vector<uint64_t>>() == expects);
    CHECK(e["bytes"].get<uint64_t>() == total);  // the rows, not the split header
    ++seen;
  }
  CHECK(seen == 2 * n);  // blocking and async, every rank
}

TEST_CASE("relay: all_to_all split sizes that disagree are refused by the relay itself, naming both counts") {
  RelayFixture relay(2);
  const auto results = testing::run_ranks(2, [&](int r) {
    auto world = relay.world(r, 2);
    // The transport called directly, as a rank that skips the ProcessGroup's split exchange would: rank 0
    // sends 32 bytes to rank 1, which expects 16 from rank 0.
    std::vector<float> in(r == 0 ? 12 : 8), out(8);
    const std::vector<std::size_t> send =
        r == 0 ? std::vector<std::size_t>{16, 32} : std::vector<std::size_t>{16, 16};
    world->backend().all_to_all_v(in.data(), send, out.data(), {16, 16},
                                  {0, std::chrono::milliseconds(20000)});
  });
  relay.finish();
  REQUIRE(results.size() == 2);
  for (const auto& res : results) {
    CHECK_FALSE(res.ok);
    CHECK_MESSAGE(testing::contains(res.message,
                                    "all_to_all in group world: rank 0 sends 32 bytes to rank 1, "
                                    "which expects 16 bytes from rank 0"),
                  res.message);
  }
}
