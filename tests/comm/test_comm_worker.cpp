// CommWorker's claim (engine/comm/work.h): a blocking call runs on its caller's thread only when the
// worker is idle, and tasks stay one at a time in submission order. And over the test backend: an async
// call issued before a blocking one completes first (the blocking call waits behind it on the worker).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/comm/work.h"
#include "tests/support/local_backend.h"

using tpsp::Shape;
using tpsp::Tensor;
using namespace tpsp::comm;
using namespace std::chrono_literals;

TEST_CASE("CommWorker: a claim is granted only while idle, and what is submitted during it waits") {
  CommWorker w;
  std::mutex mu;
  std::vector<int> order;
  auto log = [&](int i) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(i);
  };

  REQUIRE(w.claim_if_idle());
  CHECK_FALSE(w.claim_if_idle());  // claimed: a second claimer must queue
  std::atomic<bool> ran{false};
  w.submit([&] {
    log(2);
    ran = true;
  });
  std::this_thread::sleep_for(50ms);
  CHECK_FALSE(ran.load());  // the worker holds off while the claim lasts
  log(1);                   // the claimer's own task
  w.release();
  for (int i = 0; i < 200 && !ran; ++i) std::this_thread::sleep_for(5ms);
  REQUIRE(ran.load());
  CHECK(order == std::vector<int>{1, 2});

  // A task queued or running: no claim.
  std::atomic<bool> go{false};
  w.submit([&] {
    while (!go) std::this_thread::sleep_for(1ms);
  });
  std::this_thread::sleep_for(20ms);  // running now (or still queued): either way not idle
  CHECK_FALSE(w.claim_if_idle());
  go = true;
  bool claimed = false;
  for (int i = 0; i < 200 && !claimed; ++i) {
    claimed = w.claim_if_idle();
    if (!claimed) std::this_thread::sleep_for(5ms);
  }
  CHECK(claimed);  // idle again once the task ended
  if (claimed) w.release();
}

TEST_CASE("protocol: a blocking call issued after an async one runs after it (issue order kept)") {
  GroupOptions o;
  o.timeout = 3000ms;
  tpsp::testing::run_local_ranks(
      2,
      [](ProcessGroup& g) {
        ProcessGroup* pg = &g;
        Tensor a(Shape{256}), b(Shape{4});
        for (int64_t i = 0; i < a.numel(); ++i) a.at(i) = static_cast<float>(pg->rank() + 1);
        for (int64_t i = 0; i < b.numel(); ++i) b.at(i) = 10.0f * static_cast<float>(pg->rank() + 1);
        WorkPtr first = pg->all_reduce_async(a);
        pg->all_reduce(b);             // blocking, issued second
        CHECK(first->is_completed());  // it ran before the blocking call returned
        first->wait();
        CHECK(a.at(0) == 3.0f);
        CHECK(b.at(0) == 30.0f);
        const auto records = pg->recorder().records();
        REQUIRE(records.size() == 2);
        CHECK(records[0].seq == 0);
        CHECK(records[1].seq == 1);
        CHECK(records[0].t_end <= records[1].t_start);
      },
      o);
}
