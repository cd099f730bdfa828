// Faults end in bounded time and name the rank and the call: a skipped collective (timeout), a
// different collective of the same size (fingerprint mismatch), a rank killed mid all-reduce,
// a failure in one group reaching peers blocked in another group.
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "engine/comm/env.h"
#include "engine/parallel_state.h"
#include "tests/support/fork_ranks.h"

using tpsp::Shape;
using tpsp::Tensor;
using namespace tpsp::testing;
using clock_type = std::chrono::steady_clock;

namespace {
double since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}
}  // namespace

TEST_CASE(
    "a rank that skips a collective: the others time out quickly naming the call and the group is dead") {
  const auto res = run_ranks(3, [](int r) {
    tpsp::comm::GroupOptions o;
    o.timeout = std::chrono::milliseconds(300);
    auto pg = tpsp::comm::init_from_env(o);
    Tensor t = Tensor::full({1024}, 1.0f);
    pg->all_reduce(t, tpsp::comm::ReduceOp::sum, {"warmup"});
    if (r == 1) {  // skips "grad", stays alive past the others' timeout
      std::this_thread::sleep_for(std::chrono::milliseconds(900));
      return;
    }
    const auto t0 = clock_type::now();
    auto work = pg->all_reduce_async(t, tpsp::comm::ReduceOp::sum, {"grad"});
    try {
      work->wait();
      throw std::runtime_error("all_reduce 'grad' succeeded without rank 1");
    } catch (const tpsp::comm::CommError& e) {
      std::fprintf(stderr, "  [shown] %s\n", e.what());
      const std::string m = e.what();
      expect(contains(m, "all_reduce #1 'grad'"), "error does not name the call: " + m);
      expect(contains(m, "rank " + std::to_string(r)), "error does not name the rank: " + m);
      expect(contains(m, "group world"), "error does not name the group: " + m);
      expect(since(t0) < 1.5, "took " + std::to_string(since(t0)) + " s to fail (timeout 0.3 s): " + m);
      // At least one survivor is the one that timed out; the other may see the closed connection.
      expect(contains(m, "timed out after 0.3 s") || contains(m, "closed its connection"),
             "unexpected error: " + m);
    }
    // The group is dead and says so at once.
    const auto t1 = clock_type::now();
    try {
      pg->barrier({"after"});
      throw std::runtime_error("barrier on a dead group succeeded");
    } catch (const tpsp::comm::CommError& e) {
      std::fprintf(stderr, "  [shown] %s\n", e.what());
      expect(
          contains(e.what(), "is dead after an earlier failure") && contains(e.what(), "barrier #2 'after'"),
          std::string("dead-group message: ") + e.what());
      expect(since(t1) < 0.1, "a call on a dead group took " + std::to_string(since(t1)) + " s");
    }
  });
  REQUIRE_MESSAGE(all_ok(res), summary(res));
  // Rank 0 and rank 2 saw a timeout or the other's closed connection; at least one timed out.
  CHECK_MESSAGE(res[0].seconds < 5.0, summary(res));
}

TEST_CASE("a different collective of the same byte size: mismatch named on every rank") {
  const auto res = run_ranks(3, [](int r) {
    auto pg = tpsp::comm::init_from_env();
    pg->barrier();  // #0
    Tensor t = Tensor::full({4096}, 1.0f);
    const auto t0 = clock_type::now();
    try {
      if (r == 1) {
        pg->all_gather(t);  // #1, 4096 f32, where the others all_reduce 4096 f32
      } else {
        pg->all_reduce(t);
      }
      throw std::runtime_error("mismatched collectives succeeded");
    } catch (const tpsp::comm::CollectiveMismatchError& e) {
      std::fprintf(stderr, "  [shown] %s\n", e.what());
      const std::string m = e.what();
      expect(contains(m,
                      "rank 1 called all_gather #1 (4096 f32, group world) where rank 0 called all_reduce #1 "
                      "(4096 f32, group world)"),
             "mismatch message: " + m);
      expect(contains(m, "rank " + std::to_string(r) + " (world rank"),
             "message does not name this rank: " + m);
      expect(since(t0) < 1.0, "mismatch took " + std::to_string(since(t0)) + " s to report");
    }
  });
  REQUIRE_MESSAGE(all_ok(res), summary(res));
}

TEST_CASE("a rank SIGKILLed during a 64 MB all_reduce: every survivor ends within 5 s") {
  const auto res = run_ranks(3, [](int r) {
    tpsp::comm::GroupOptions o;
    o.timeout = std::chrono::seconds(30);  // fail-fast must not depend on the timeout
    auto pg = tpsp::comm::init_from_env(o);
    Tensor big = Tensor::full({16 * 1024 * 1024}, 1.0f);  // 64 MiB
    pg->barrier();
    auto work = pg->all_reduce_async(big, tpsp::comm::ReduceOp::sum, {"big"});
    if (r == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ::raise(SIGKILL);
    }
    const auto t0 = clock_type::now();
    try {
      work->wait();
      throw std::runtime_error("all_reduce survived a dead peer");
    } catch (const tpsp::comm::CommError& e) {
      std::fprintf(stderr, "  [shown] %s\n", e.what());
      expect(contains(e.what(), "all_reduce #1 'big'"),
             std::string("error does not name the call: ") + e.what());
      expect(since(t0) < 5.0, "survivor took " + std::to_string(since(t0)) + " s");
    }
  });
  CHECK(res[2].signal == SIGKILL);
  CHECK_MESSAGE(res[0].ok, summary(res));
  CHECK_MESSAGE(res[1].ok, summary(res));
  CHECK_MESSAGE(res[0].seconds < 8.0, summary(res));
  CHECK_MESSAGE(res[1].seconds < 8.0, summary(res));
}

TEST_CASE("a failure in the tp group reaches ranks blocked in the world group at once") {
  const auto res = run_ranks(4, [](int r) {
    tpsp::comm::GroupOptions o;
    o.timeout = std::chrono::seconds(30);
    auto world = tpsp::comm::init_from_env(o);
    tpsp::ParallelState ps(world, 2);
    Tensor t = Tensor::full({256}, 1.0f);
    const auto t0 = clock_type::now();
    try {
      if (r < 2) {
        // tp group {0,1}: mismatched calls, then (never reached) the world all_reduce.
        if (r == 0)
          ps.tp().all_reduce(t);
        else
          ps.tp().broadcast(t, 0);
      }
      world->all_reduce(t, tpsp::comm::ReduceOp::sum, {"world.sync"});
      throw std::runtime_error("no error");
    } catch (const tpsp::comm::CommError& e) {
      std::fprintf(stderr, "  [shown] %s\n", e.what());
      const std::string m = e.what();
      if (r < 2) {
        expect(contains(m, "collective mismatch in group tp"), "tp ranks: " + m);
      } else {
        expect(contains(m, "all_reduce #") && contains(m, "'world.sync'"), "world ranks: " + m);
      }
      expect(since(t0) < 5.0, "took " + std::to_string(since(t0)) + " s: " + m);
    }
  });
  REQUIRE_MESSAGE(all_ok(res), summary(res));
}

TEST_CASE("a rank that never joins the rendezvous: the others fail at the timeout naming the world group") {
  LaunchOptions o;
  o.env = {{"TPSP_COMM_TIMEOUT", "0.5"}};
  const auto res = run_ranks(
      2,
      [](int r) {
        if (r == 1) return;  // never calls init_from_env
        const auto t0 = clock_type::now();
        try {
          auto pg = tpsp::comm::init_from_env();
          throw std::runtime_error("rendezvous succeeded without rank 1");
        } catch (const tpsp::comm::CommError& e) {
          std::fprintf(stderr, "  [shown] %s\n", e.what());
          expect(contains(e.what(), "rank 0: rendezvous of the world group (2 ranks"), e.what());
          expect(since(t0) < 3.0, "rendezvous failure took " + std::to_string(since(t0)) + " s");
        }
      },
      o);
  REQUIRE_MESSAGE(all_ok(res), summary(res));
}
