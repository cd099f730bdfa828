// Every collective at world sizes 1..4, blocking and async, on exact inputs (small integers, so any
// reduction order gives the same floats; nccl-tests' idea), along dim 0 and dim 1.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "engine/comm/env.h"
#include "engine/error.h"
#include "tests/support/fork_ranks.h"

using tpsp::Shape;
using tpsp::Tensor;
using tpsp::comm::ReduceOp;
using namespace tpsp::testing;

namespace {

/// A tensor whose flat element i is f(i).
template <typename F>
Tensor make(const Shape& shape, F f) {
  Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>(f(i));
  return t;
}

/// Throws naming the first element where t differs from f(i).
template <typename F>
void expect_values(const Tensor& t, const Shape& shape, F f, const std::string& what) {
  expect(t.shape() == shape,
         what + ": shape " + tpsp::shape_str(t.shape()) + ", expected " + tpsp::shape_str(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float want = static_cast<float>(f(i));
    if (t.data()[i] != want)
      throw std::runtime_error(what + ": element " + std::to_string(i) + " is " +
                               std::to_string(t.data()[i]) + ", expected " + std::to_string(want));
  }
}

void run_all_worlds(const std::function<void(int rank)>& body) {
  for (int n = 1; n <= 4; ++n) {
    CAPTURE(n);
    const auto res = run_ranks(n, body);
    REQUIRE_MESSAGE(all_ok(res), "world size " << n << ":\n" << summary(res));
  }
}

}  // namespace

TEST_CASE("all_reduce sum and max, blocking and async, world 1..4") {
  run_all_worlds([](int r) {
    auto pg = tpsp::comm::init_from_env();
    const int n = pg->size();
    auto t = make({5, 3}, [&](int64_t i) { return r * 100 + i; });
    pg->all_reduce(t);
    expect_values(
        t, {5, 3}, [&](int64_t i) { return 100 * n * (n - 1) / 2 + n * i; }, "all_reduce sum");

    auto m = make({7}, [&](int64_t i) { return ((i + r) % n) * 10 + i; });
    pg->all_reduce(m, ReduceOp::max);
    expect_values(
        m, {7}, [&](int64_t i) { return (n - 1) * 10 + i; }, "all_reduce max");

    // Async: three in flight, waited in reverse order.
    std::vector<Tensor> ts;
    std::vector<tpsp::comm::WorkPtr> ws;
    for (int k = 0; k < 3; ++k) ts.push_back(make({4, 4}, [&](int64_t i) { return (k + 1) * (r + i); }));
    for (int k = 0; k < 3; ++k) ws.push_back(pg->all_reduce_async(ts[static_cast<std::size_t>(k)]));
    for (int k = 2; k >= 0; --k) ws[static_cast<std::size_t>(k)]->wait();
    for (int k = 0; k < 3; ++k) {
      expect(ws[static_cast<std::size_t>(k)]->is_completed(), "async all_reduce not completed after wait");
      expect_values(
          ts[static_cast<std::size_t>(k)], {4, 4},
          [&](int64_t i) { return (k + 1) * (n * (n - 1) / 2 + n * i); }, "async all_reduce");
    }
  });
}

TEST_CASE("all_gather along dim 0 and dim 1, blocking and async, world 1..4") {
  run_all_worlds([](int r) {
    auto pg = tpsp::comm::init_from_env();
    const int n = pg->size();
    const auto in = make({2, 3}, [&](int64_t i) { return r * 1000 + i; });
    const Tensor g0 = pg->all_gather(in, 0);
    expect_values(
        g0, {2 * n, 3}, [&](int64_t i) { return (i / 6) * 1000 + i % 6; }, "all_gather dim 0");
    const Tensor g1 = pg->all_gather(in, 1);
    // out[a, j*3 + b] = rank j's in[a, b]
    expect_values(
        g1, {2, 3 * n},
        [&](int64_t i) {
          const int64_t a = i / (3 * n), c = i % (3 * n);
          return (c / 3) * 1000 + a * 3 + c % 3;
        },
        "all_gather dim 1");
    const Tensor gneg = pg->all_gather(in, -1);  // same as dim 1
    expect_values(
        gneg, {2, 3 * n}, [&](int64_t i) { return g1.data()[i]; }, "all_gather dim -1");

    Tensor out0, out1;
    auto w0 = pg->all_gather_async(in, out0, 0);
    auto w1 = pg->all_gather_async(in, out1, 1);
    w1->wait();
    w0->wait();
    expect_values(
        out0, {2 * n, 3}, [&](int64_t i) { return g0.data()[i]; }, "async all_gather dim 0");
    expect_values(
        out1, {2, 3 * n}, [&](int64_t i) { return g1.data()[i]; }, "async all_gather dim 1");
    Tensor pre(Shape{2 * n, 3});  // preallocated output
    pg->all_gather_async(in, pre, 0)->wait();
    expect_values(
        pre, {2 * n, 3}, [&](int64_t i) { return g0.data()[i]; }, "all_gather into a given output");
  });
}

TEST_CASE("reduce_scatter along dim 0 and dim 1, sum and max, blocking and async, world 1..4") {
  run_all_worlds([](int r) {
    auto pg = tpsp::comm::init_from_env();
    const int n = pg->size();
    const int tri = n * (n - 1) / 2;
    // dim 0: in [2n, 3], in[i] = r + i; rank r keeps rows [2r, 2r+2)
    const auto in0 = make({2 * n, 3}, [&](int64_t i) { return r + i; });
    const Tensor rs0 = pg->reduce_scatter(in0, 0);
    expect_values(
        rs0, {2, 3}, [&](int64_t k) { return tri + n * (r * 6 + k); }, "reduce_scatter dim 0");
    expect_values(
        in0, {2 * n, 3}, [&](int64_t i) { return r + i; }, "reduce_scatter input untouched");
    // dim 1: in [2, 3n], rank r keeps columns [3r, 3r+3)
    const auto in1 = make({2, 3 * n}, [&](int64_t i) { return r + i; });
    const Tensor rs1 = pg->reduce_scatter(in1, 1);
    expect_values(
        rs1, {2, 3},
        [&](int64_t k) {
          const int64_t a = k / 3, b = k % 3;
          return tri + n * (a * 3 * n + r * 3 + b);
        },
        "reduce_scatter dim 1");
    // max: element i of rank q is ((i + q) % n) * 10 + i, so the max is (n-1)*10 + i.
    const auto inm = make({3 * n}, [&](int64_t i) { return ((i + r) % n) * 10 + i; });
    const Tensor rsm = pg->reduce_scatter(inm, 0, ReduceOp::max);
    expect_values(
        rsm, {3}, [&](int64_t k) { return (n - 1) * 10 + r * 3 + k; }, "reduce_scatter max");
    // async, two in flight
    Tensor a0, a1;
    auto w0 = pg->reduce_scatter_async(in0, a0, 0);
    auto w1 = pg->reduce_scatter_async(in1, a1, 1);
    w0->wait();
    w1->wait();
    expect_values(
        a0, {2, 3}, [&](int64_t k) { return rs0.data()[k]; }, "async reduce_scatter dim 0");
    expect_values(
        a1, {2, 3}, [&](int64_t k) { return rs1.data()[k]; }, "async reduce_scatter dim 1");
    // A larger one through the ring (several chunks per rank, odd sizes).
    const auto big = make({n * 1001}, [&](int64_t i) { return (r + 1) * (i % 97); });
    const Tensor rb = pg->reduce_scatter(big);
    expect_values(
        rb, {1001}, [&](int64_t k) { return (n * (n + 1) / 2) * ((r * 1001 + k) % 97); },
        "reduce_scatter 1001 per rank");
  });
}

TEST_CASE("all_to_all, broadcast and barrier, blocking and async, world 1..4") {
  run_all_worlds([](int r) {
    auto pg = tpsp::comm::init_from_env();
    const int n = pg->size();
    // all_to_all: chunk j of rank r (4 elements) goes to rank j; out chunk j comes from rank j.
    const auto in = make({2 * n, 2}, [&](int64_t i) { return r * 100 + (i / 4) * 10 + i % 4; });
    const Tensor a = pg->all_to_all(in);
    expect_values(
        a, {2 * n, 2}, [&](int64_t i) { return (i / 4) * 100 + r * 10 + i % 4; }, "all_to_all");
    Tensor aa;
    pg->all_to_all_async(in, aa)->wait();
    expect_values(
        aa, {2 * n, 2}, [&](int64_t i) { return a.data()[i]; }, "async all_to_all");

    for (int root : {0, n - 1}) {
      Tensor t = r == root ? make({3, 5}, [&](int64_t i) { return root * 1000 + i; }) : Tensor(Shape{3, 5});
      pg->broadcast(t, root);
      expect_values(
          t, {3, 5}, [&](int64_t i) { return root * 1000 + i; }, "broadcast");
      Tensor u = r == root ? make({4}, [&](int64_t i) { return -i; }) : Tensor(Shape{4});
      pg->broadcast_async(u, root)->wait();
      expect_values(
          u, {4}, [&](int64_t i) { return -i; }, "async broadcast");
    }

    // Barrier: rank r arrives after r*60 ms; nobody leaves before the last one arrived. The property
    // is checked on one clock (CLOCK_MONOTONIC via steady_clock is the same in every process of the
    // machine): every rank's leave time >= every rank's arrival time, so a loaded machine that starts
    // the ranks unevenly cannot fail it.
    pg->barrier();  // align the start (roughly: the check below does not depend on it)
    std::this_thread::sleep_for(std::chrono::milliseconds(60 * r));
    const auto arrive = std::chrono::steady_clock::now();
    pg->barrier_async()->wait();
    const auto leave = std::chrono::steady_clock::now();
    // Times as (whole seconds, microseconds): both exact in f32 (< 2^24).
    auto split = [](std::chrono::steady_clock::time_point t) {
      const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
      return std::pair<float, float>(static_cast<float>(us / 1000000), static_cast<float>(us % 1000000));
    };
    const auto [as, au] = split(arrive);
    const auto [ls, lu] = split(leave);
    const Tensor times = pg->all_gather(Tensor::from({1, 4}, {as, au, ls, lu}));
    auto seconds = [&](int64_t rank, int64_t at) {
      return static_cast<double>(times.at({rank, at})) + static_cast<double>(times.at({rank, at + 1})) * 1e-6;
    };
    double last_arrival = 0;
    for (int64_t i = 0; i < n; ++i) last_arrival = std::max(last_arrival, seconds(i, 0));
    const double left = seconds(r, 2);
    expect(left >= last_arrival, "barrier returned on rank " + std::to_string(r) + " " +
                                     std::to_string(last_arrival - left) + " s before the last rank arrived");
  });
}

TEST_CASE("send/recv around a ring, world 2..4") {
  for (int n = 2; n <= 4; ++n) {
    CAPTURE(n);
    const auto res = run_ranks(n, [](int r) {
      auto pg = tpsp::comm::init_from_env();
      const int n = pg->size();
      const auto mine = make({3, 2}, [&](int64_t i) { return r * 10 + i; });
      Tensor got(Shape{3, 2});
      // Both posted before either is waited: works in any order on every rank.
      auto ws = pg->send_async(mine, (r + 1) % n);
      auto wr = pg->recv_async(got, (r + n - 1) % n);
      wr->wait();
      ws->wait();
      const int from = (r + n - 1) % n;
      expect_values(
          got, {3, 2}, [&](int64_t i) { return from * 10 + i; }, "recv");
      // Blocking forms, even ranks send first.
      if (n % 2 == 0) {
        Tensor back(Shape{3, 2});
        if (r % 2 == 0) {
          pg->send(mine, r + 1);
          pg->recv(back, r + 1);
          expect_values(
              back, {3, 2}, [&](int64_t i) { return (r + 1) * 10 + i; }, "blocking recv");
        } else {
          pg->recv(back, r - 1);
          pg->send(mine, r - 1);
          expect_values(
              back, {3, 2}, [&](int64_t i) { return (r - 1) * 10 + i; }, "blocking recv");
        }
      }
      pg->barrier();
    });
    REQUIRE_MESSAGE(all_ok(res), summary(res));
  }
}

TEST_CASE("bad arguments raise ShapeError naming the values before any communication") {
  const auto res = run_ranks(2, [](int r) {
    auto pg = tpsp::comm::init_from_env();
    auto expect_shape_error = [](const std::function<void()>& f, const std::string& part) {
      try {
        f();
      } catch (const tpsp::ShapeError& e) {
        expect(contains(e.what(), part), std::string("message '") + e.what() + "' lacks '" + part + "'");
        return;
      }
      throw std::runtime_error("no ShapeError (expected one mentioning '" + part + "')");
    };
    const Tensor odd(Shape{3, 4});
    expect_shape_error([&] { pg->reduce_scatter(odd); },
                       "dim 0 extent 3 of input [3, 4] is not divisible by the group size 2");
    expect_shape_error([&] { pg->reduce_scatter(odd, 1 + 5); }, "dim 6 is out of range");
    expect_shape_error([&] { pg->all_to_all(odd); }, "not divisible by the group size 2");
    Tensor wrong(Shape{5, 4});
    expect_shape_error([&] { pg->all_gather_async(odd, wrong, 0); },
                       "output has shape [5, 4] but the result has shape [6, 4]");
    Tensor t(Shape{2});
    expect_shape_error([&] { pg->broadcast(t, 2); }, "root=2 is not a rank of the group (size 2)");
    expect_shape_error([&] { pg->send(t, r); }, "cannot send to itself");
    // Nothing was sent, and no sequence number was consumed: the group still works.
    Tensor one = Tensor::full({1}, 1.0f);
    pg->all_reduce(one);
    expect_eq(one.data()[0], 2.0f, "all_reduce after rejected calls");
    expect_eq(pg->recorder().size(), std::size_t{1}, "records after rejected calls");
  });
  REQUIRE_MESSAGE(all_ok(res), summary(res));
}

TEST_CASE("reduce_scatter of several pipelined segments per chunk, world 2 and 3") {
  for (int n : {2, 3}) {
    CAPTURE(n);
    const auto res = run_ranks(n, [](int r) {
      auto pg = tpsp::comm::init_from_env();
      const int n = pg->size();
      const int64_t k = 600001;  // about 2.3 segments of 1 MiB, not a multiple of one
      const auto in = make({n * k}, [&](int64_t i) { return (r + 1) * (i % 1013); });
      Tensor out;
      pg->reduce_scatter_async(in, out)->wait();
      expect_values(
          out, {k}, [&](int64_t j) { return (n * (n + 1) / 2) * ((r * k + j) % 1013); },
          "segmented reduce_scatter");
    });
    REQUIRE_MESSAGE(all_ok(res), summary(res));
  }
}
