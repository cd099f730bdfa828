// The ProcessGroup protocol over the test backend (tests/support/local_backend.h: ranks are threads
// of this process): the seam between protocol and transport, tested without Gloo. Values are small
// integers (exact in any order) or chosen so that f32 accumulation has a known answer.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "engine/bf16.h"
#include "engine/comm/process_group.h"
#include "engine/error.h"
#include "tests/support/local_backend.h"

using tpsp::DType;
using tpsp::Shape;
using tpsp::Tensor;
using namespace tpsp::comm;
using namespace tpsp::trace;
using tpsp::testing::run_local_ranks;

namespace {

Tensor iota(const Shape& shape, float start) {
  Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.at(i) = start + static_cast<float>(i);
  return t;
}

GroupOptions quick() {
  GroupOptions o;
  o.timeout = std::chrono::milliseconds(3000);
  return o;
}

}  // namespace

TEST_CASE("protocol over the test backend: every collective at world sizes 1..4 gives the exact result") {
  for (int n = 1; n <= 4; ++n) {
    CAPTURE(n);
    run_local_ranks(n, [n](ProcessGroup& pg) {
      const int r = pg.rank();
      Tensor t = iota({n * 2, 3}, static_cast<float>(10 * r));
      pg.all_reduce(t);
      for (int64_t i = 0; i < t.numel(); ++i)
        REQUIRE(t.at(i) == static_cast<float>(n * i + 10 * n * (n - 1) / 2));
      Tensor mx = Tensor::full({2}, static_cast<float>(r));
      pg.all_reduce(mx, ReduceOp::max);
      REQUIRE(mx.at(1) == static_cast<float>(n - 1));
      const Tensor g0 = pg.all_gather(Tensor::full({1, 2}, static_cast<float>(r)), 0);
      const Tensor g1 = pg.all_gather(Tensor::full({2, 1}, static_cast<float>(r)), 1);
      for (int k = 0; k < n; ++k) REQUIRE((g0.at({k, 1}) == k && g1.at({1, k}) == k));
      const Tensor rs = pg.reduce_scatter(iota({n, 2}, 0.f), 0);  // every rank holds the same: sum = n·x
      REQUIRE(rs.shape() == Shape{1, 2});
      REQUIRE(rs.at(1) == static_cast<float>(n * (2 * r + 1)));
      const Tensor rs1 = pg.reduce_scatter(iota({2, n}, 0.f), 1);
      REQUIRE(rs1.at({1, 0}) == static_cast<float>(n * (n + r)));
      const Tensor a2a = pg.all_to_all(iota({n, 1}, static_cast<float>(100 * r)));
      for (int j = 0; j < n; ++j) REQUIRE(a2a.at(j) == static_cast<float>(100 * j + r));
      Tensor b = Tensor::full({3}, static_cast<float>(r + 7));
      pg.broadcast(b, n - 1);
      REQUIRE(b.at(2) == static_cast<float>(n + 6));
      if (n > 1) {
        Tensor in({2});
        WorkPtr s = pg.send_async(Tensor::full({2}, static_cast<float>(r)), (r + 1) % n);
        pg.recv(in, (r + n - 1) % n);
        s->wait();
        REQUIRE(in.at(0) == static_cast<float>((r + n - 1) % n));
      }
      pg.barrier();
    });
  }
}

TEST_CASE("protocol: a bf16 all-reduce accumulates in float32 and rounds once") {
  // Partial sums [256, 1, 1, −256] on 4 ranks: f32 accumulation gives 2. A bf16 accumulation in rank
  // order gives 0: 256 + 1 = 257 rounds to 256 (bf16 keeps 8 significant bits), + 1 → 256, − 256 → 0.
  float ring = tpsp::bf16_to_f32(tpsp::f32_to_bf16(256.f));
  for (float v : {1.f, 1.f, -256.f}) ring = tpsp::bf16_to_f32(tpsp::f32_to_bf16(ring + v));
  CHECK(ring == 0.f);
  run_local_ranks(4, [](ProcessGroup& pg) {
    const float mine[] = {256.f, 1.f, 1.f, -256.f};
    Tensor t = Tensor::full({5}, mine[pg.rank()]).to(DType::bf16);
    pg.all_reduce(t);
    REQUIRE(t.dtype() == DType::bf16);
    REQUIRE(t.value(3) == 2.0f);
    Tensor rs = pg.reduce_scatter(Tensor::full({4, 2}, mine[pg.rank()]).to(DType::bf16), 0);
    REQUIRE((rs.dtype() == DType::bf16 && rs.value(1) == 2.0f));
    const Tensor g = pg.all_gather(Tensor::full({1}, mine[pg.rank()]).to(DType::bf16), 0);
    REQUIRE((g.dtype() == DType::bf16 && g.value(3) == -256.f));
  });
}

TEST_CASE("protocol: ranks that call different collectives get CollectiveMismatchError naming both calls") {
  std::atomic<int> raised{0};
  CHECK_THROWS_WITH_AS(
      run_local_ranks(
          2,
          [&](ProcessGroup& pg) {
            try {
              if (pg.rank() == 0) {
                Tensor t({4});
                pg.all_reduce(t, ReduceOp::sum, {"grad"});
              } else {
                pg.all_gather(Tensor({4}), 0, {"grad"});
              }
            } catch (const CollectiveMismatchError&) {
              ++raised;
              throw;
            }
          },
          quick()),
      doctest::Contains("rank 1 called all_gather #0 (4 f32, group world) where rank 0 called "
                        "all_reduce #0 (4 f32, group world)"),
      CollectiveMismatchError);
  CHECK(raised == 2);  // on every rank of the group
}

TEST_CASE("protocol: argument errors are raised before any communication and use no sequence number") {
  run_local_ranks(2, [](ProcessGroup& pg) {
    CHECK_THROWS_WITH_AS(pg.reduce_scatter(Tensor({3, 2}), 0), doctest::Contains("dim 0 extent 3"),
                         tpsp::ShapeError);
    CHECK_THROWS_AS(pg.send(Tensor({2}), pg.rank()), tpsp::ShapeError);
    CHECK_THROWS_AS(pg.broadcast(*std::make_unique<Tensor>(Shape{1}), 5), tpsp::ShapeError);
    CHECK(pg.recorder().size() == 0);
    Tensor t = Tensor::full({2}, 1.f);
    pg.all_reduce(t, ReduceOp::sum, {"first"});
    REQUIRE(pg.recorder().records().at(0).seq == 0);  // the failed calls took no number
  });
}

TEST_CASE(
    "protocol: records say op, group, bytes, async and waited; an async call not waited (yet) is marked") {
  run_local_ranks(2, [](ProcessGroup& pg) {
    Tensor a = Tensor::full({8}, 1.f), b = Tensor::full({8}, 1.f);
    pg.all_reduce(a, ReduceOp::sum, {"blocking"});
    WorkPtr w = pg.all_reduce_async(b, ReduceOp::sum, {"waited"});
    w->wait();
    {
      Tensor c = Tensor::full({8}, 1.f);
      WorkPtr dropped = pg.all_reduce_async(c, ReduceOp::sum, {"dropped"});
      while (!dropped->is_completed()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }  // destroyed without wait()
    Tensor d = Tensor::full({8}, 1.f);
    WorkPtr alive = pg.all_reduce_async(d, ReduceOp::sum, {"alive"});  // completed, kept, not waited yet
    while (!alive->is_completed()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(!pg.recorder().query({OpKind::all_reduce, "", "alive"}).at(0).waited);
    alive->wait();
    CHECK(pg.recorder().query({OpKind::all_reduce, "", "alive"}).at(0).waited);
    pg.barrier();
    const auto recs = pg.recorder().query({OpKind::all_reduce, "", ""});
    REQUIRE(recs.size() == 4);
    CHECK((!recs[0].async && recs[0].waited && recs[0].tensor_bytes == 32 && recs[0].bytes == 32));
    CHECK((recs[1].async && recs[1].waited && recs[1].label == "waited"));
    CHECK((recs[2].async && !recs[2].waited && recs[2].label == "dropped"));
    CHECK(recs[1].t_issue <= recs[1].t_start);
    CHECK(recs[1].t_start <= recs[1].t_end);
    CHECK(w->start_time() == recs[1].t_start);
    CHECK(w->end_time() == recs[1].t_end);
  });
}

TEST_CASE(
    "protocol: with buffer checks on, an in-place all_reduce_async waited after other work is no error") {
  // The call writes its own buffer before wait(): that is not the caller modifying it (lab04's async
  // backward all-reduce of dX, issued before the weight-gradient GEMM and waited after it).
  GroupOptions o = quick();
  o.check_buffers = true;
  run_local_ranks(
      2,
      [](ProcessGroup& pg) {
        Tensor t = Tensor::full({4}, float(pg.rank() + 1));
        WorkPtr w = pg.all_reduce_async(t, ReduceOp::sum, {"dgrad"});
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the GEMM it overlaps
        w->wait();
        CHECK(t.at(3) == 3.f);
        const auto recs = pg.recorder().records();
        REQUIRE(recs.size() == 1);
        // t_waited: when wait() returned, after the call completed and after the 20 ms of "GEMM".
        CHECK(recs[0].t_waited >= recs[0].t_end);
        CHECK(recs[0].t_waited >= recs[0].t_issue + 0.019);
      },
      o);
}

TEST_CASE("protocol: with buffer checks on, an async call's output reads NaN until the call completes") {
  // A consumer that reads a receive buffer before wait() must not see data that happened to arrive
  // early: loopback delivers at once, while the emulated link completes the call 200 ms later.
  GroupOptions o = quick();
  o.check_buffers = true;
  o.link = LinkModel::parse("1GB/s,200ms");
  run_local_ranks(
      2,
      [](ProcessGroup& pg) {
        const int peer = 1 - pg.rank();
        Tensor mine = Tensor::full({4}, float(pg.rank() + 1));
        Tensor got = Tensor::full({4}, 7.f);  // stale contents: never visible again before wait()
        WorkPtr s = pg.send_async(mine, peer, {"chunk"});
        WorkPtr r = pg.recv_async(got, peer, {"chunk"});
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the bytes are there by now
        CHECK(std::isnan(got.at(0)));
        CHECK(std::isnan(got.at(3)));
        s->wait();
        r->wait();
        CHECK(got.at(0) == float(peer + 1));
        CHECK(got.at(3) == float(peer + 1));

        Tensor gathered;
        WorkPtr g = pg.all_gather_async(mine, gathered, 0, {"ag"});
        CHECK(gathered.numel() == 8);
        CHECK(std::isnan(gathered.at(0)));
        CHECK(std::isnan(gathered.at(7)));
        g->wait();
        CHECK(gathered.at(0) == 1.f);
        CHECK(gathered.at(7) == 2.f);
      },
      o);
}

TEST_CASE("protocol: with buffer checks on, a send buffer modified before wait() is an error") {
  GroupOptions o = quick();
  o.check_buffers = true;
  run_local_ranks(
      2,
      [](ProcessGroup& pg) {
        if (pg.rank() == 0) {
          Tensor t = Tensor::full({4}, 1.f);
          WorkPtr s = pg.send_async(t, 1, {"chunk"});
          t.at(2) = 5.f;  // the bug: the buffer is still being sent
          pg.barrier();   // let the receiver post (the test backend copies at the match)
          CHECK_THROWS_WITH_AS(s->wait(), doctest::Contains("modified between the call and its wait()"),
                               CommError);
          WorkPtr ok = pg.send_async(t, 1, {"untouched"});
          ok->wait();
        } else {
          Tensor in({4});
          pg.barrier();
          pg.recv(in, 0);
          pg.recv(in, 0);
        }
      },
      o);
}

TEST_CASE("protocol: Work::wait(timeout) raises while the peers have not arrived, then the call completes") {
  run_local_ranks(
      2,
      [](ProcessGroup& pg) {
        if (pg.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        WorkPtr w = pg.barrier_async({"late"});
        if (pg.rank() == 0) {
          CHECK_THROWS_WITH_AS(w->wait(std::chrono::milliseconds(20)), doctest::Contains("barrier #0 'late'"),
                               CommTimeoutError);
          CHECK(!w->is_completed());
        }
        w->wait();
        CHECK((w->is_completed() && w->exception() == nullptr));
      },
      quick());
}

TEST_CASE("protocol: a collective nobody else joins times out naming the call, and kills the group") {
  GroupOptions o = quick();
  o.timeout = std::chrono::milliseconds(200);
  CHECK_THROWS_WITH_AS(run_local_ranks(
                           2,
                           [](ProcessGroup& pg) {
                             if (pg.rank() == 0) {
                               Tensor t({2});
                               try {
                                 pg.all_reduce(t, ReduceOp::sum, {"lonely"});
                               } catch (const CommTimeoutError&) {
                                 CHECK(pg.dead());
                                 throw;
                               }
                             }
                           },
                           o),
                       doctest::Contains("all_reduce #0 'lonely' (2 f32, group world) timed out after 0.2 s"),
                       CommTimeoutError);
}

TEST_CASE("protocol: link emulation stretches a call to its modelled time on any backend") {
  GroupOptions o = quick();
  o.link = LinkModel::parse("10MB/s,0us");
  run_local_ranks(
      2,
      [](ProcessGroup& pg) {
        Tensor t({256 * 1024});  // 1 MiB: all-reduce of 2 ranks moves 1 MiB → 0.105 s at 10 MB/s
        const double modelled = pg.options().link.seconds(OpKind::all_reduce, 2, t.nbytes());
        pg.all_reduce(t, ReduceOp::sum, {"slow"});
        const CommRecord r = pg.recorder().query({OpKind::all_reduce, "", "slow"}).at(0);
        CHECK(r.t_end - r.t_start >= modelled);
      },
      o);
}

TEST_CASE("protocol: subgroups over the test backend") {
  run_local_ranks(4, [](ProcessGroup& pg) {
    const int r = pg.rank();
    // Like c10d, every rank creates every group, in the same order.
    auto low = pg.new_group({0, 1}, "pair"), high = pg.new_group({2, 3}, "pair");
    auto odd = pg.new_group({1, 3}, "odd");
    auto pair = r < 2 ? low : high;
    REQUIRE((pair != nullptr && (r < 2 ? high : low) == nullptr));
    Tensor t = Tensor::full({1}, static_cast<float>(r));
    pair->all_reduce(t);
    CHECK(t.at(0) == (r < 2 ? 1.f : 5.f));
    CHECK((odd != nullptr) == (r % 2 == 1));
    if (odd) {
      Tensor u = Tensor::full({1}, static_cast<float>(r));
      odd->all_reduce(u);
      CHECK(u.at(0) == 4.f);
      CHECK(odd->global_ranks() == std::vector<int>{1, 3});
    }
  });
}
