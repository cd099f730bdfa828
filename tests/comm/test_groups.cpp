// parallel_state (DP x TP, TP innermost), new_group, and init_from_env's store and env variants.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/comm/env.h"
#include "engine/error.h"
#include "engine/parallel_state.h"
#include "tests/support/fork_ranks.h"

using tpsp::Shape;
using tpsp::Tensor;
using namespace tpsp::testing;

TEST_CASE("parallel_state layout: tp contiguous, dp strided, clear errors") {
  using PS = tpsp::ParallelState;
  CHECK(PS::tp_group_ranks(5, 8, 4) == std::vector<int>{4, 5, 6, 7});
  CHECK(PS::dp_group_ranks(5, 8, 4) == std::vector<int>{1, 5});
  CHECK(PS::dp_group_ranks(2, 6, 1) == std::vector<int>{0, 1, 2, 3, 4, 5});
  CHECK(PS::tp_group_ranks(2, 6, 6) == std::vector<int>{0, 1, 2, 3, 4, 5});
  CHECK_THROWS_WITH_AS(PS::check_layout(6, 4), "world_size=6 is not divisible by tp=4", tpsp::ShapeError);
  CHECK_THROWS_WITH_AS(PS::check_layout(4, 0), "tp=0 must be at least 1", tpsp::ShapeError);
}

TEST_CASE("DP x TP = 2 x 2: tp and dp collectives stay inside their groups") {
  const auto res = run_ranks(4, [](int r) {
    tpsp::ParallelState ps(tpsp::comm::init_from_env(), 2);
    expect_eq(ps.tp_size(), 2, "tp size");
    expect_eq(ps.dp_size(), 2, "dp size");
    expect_eq(ps.tp_rank(), r % 2, "tp rank");
    expect_eq(ps.dp_rank(), r / 2, "dp rank");
    expect_eq(ps.tp().name(), std::string("tp"), "tp name");
    expect(ps.tp().global_ranks() == tpsp::ParallelState::tp_group_ranks(r, 4, 2), "tp members");
    expect(ps.dp().global_ranks() == tpsp::ParallelState::dp_group_ranks(r, 4, 2), "dp members");
    Tensor t = Tensor::full({1}, static_cast<float>(r));
    ps.tp().all_reduce(t);
    expect_eq(t.data()[0], r < 2 ? 1.0f : 5.0f, "tp all_reduce");
    Tensor d = Tensor::full({1}, static_cast<float>(r));
    ps.dp().all_reduce(d);
    expect_eq(d.data()[0], r % 2 == 0 ? 2.0f : 4.0f, "dp all_reduce");
    // Async on two groups at once: each group has its own worker and context.
    Tensor a = Tensor::full({3}, 1.0f), b = Tensor::full({3}, 10.0f);
    auto wa = ps.tp().all_reduce_async(a);
    auto wb = ps.dp().all_reduce_async(b);
    wb->wait();
    wa->wait();
    expect_eq(a.data()[2] + b.data()[2], 22.0f, "concurrent tp and dp all_reduce");
    const Tensor g = ps.tp().all_gather(Tensor::full({1, 2}, static_cast<float>(r)));
    expect_eq(g.data()[2], static_cast<float>(r / 2 * 2 + 1), "tp all_gather");
  });
  REQUIRE_MESSAGE(all_ok(res), summary(res));
}

TEST_CASE("new_group: non-members get nullptr, and bad rank lists raise ShapeError") {
  const auto res = run_ranks(3, [](int r) {
    auto world = tpsp::comm::init_from_env();
    auto g = world->new_group({2, 0}, "pair");
    expect((g != nullptr) == (r != 1), "membership");
    if (g) {
      expect_eq(g->rank(), r == 2 ? 0 : 1, "rank follows the list order");
      Tensor t = Tensor::full({2}, static_cast<float>(r + 1));
      g->all_reduce(t);
      expect_eq(t.data()[1], 4.0f, "pair all_reduce");
    }
    try {
      world->new_group({0, 0}, "dup");
      throw std::runtime_error("duplicate accepted");
    } catch (const tpsp::ShapeError& e) {
      expect(contains(e.what(), "world rank 0 is listed twice"), e.what());
    }
    try {
      world->new_group({0, 7}, "bad");
      throw std::runtime_error("rank 7 accepted");
    } catch (const tpsp::ShapeError& e) {
      expect(contains(e.what(), "world rank 7 is not a member of the parent group world"), e.what());
    }
    world->barrier();
  });
  REQUIRE_MESSAGE(all_ok(res), summary(res));
}

TEST_CASE("ParallelState raises ShapeError when the world is not divisible by tp") {
  const auto res = run_ranks(1, [](int) {
    auto world = tpsp::comm::init_from_env();
    try {
      tpsp::ParallelState ps(world, 4);
      throw std::runtime_error("accepted tp=4 on 1 rank");
    } catch (const tpsp::ShapeError& e) {
      expect_eq(std::string(e.what()), std::string("world_size=1 is not divisible by tp=4"), "message");
    }
  });
  REQUIRE_MESSAGE(all_ok(res), summary(res));
}

TEST_CASE("init_from_env: MASTER_ADDR/MASTER_PORT TCP store served by rank 0") {
  // A free port: bind to 0, read it, close (the store server reuses the address).
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  ::close(fd);
  LaunchOptions o;
  o.store_dir = false;
  o.env = {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}};
  const auto res = run_ranks(
      3,
      [](int r) {
        auto pg = tpsp::comm::init_from_env();
        Tensor t = Tensor::full({8}, static_cast<float>(r));
        pg->all_reduce(t);
        expect_eq(t.data()[7], 3.0f, "all_reduce over the TCP-store world");
        tpsp::ParallelState ps(pg, 3);  // new_group rendezvous through the same store
        ps.tp().barrier();
      },
      o);
  REQUIRE_MESSAGE(all_ok(res), summary(res));
}

TEST_CASE("init_from_env: Slurm variable names, env options, and a second init in the same store dir") {
  LaunchOptions o;
  o.slurm_names = true;
  o.env = {{"TPSP_COMM_TIMEOUT", "7.5"}, {"TPSP_COMM_FINGERPRINT", "0"}, {"TPSP_LINK", "ib"}};
  const auto res = run_ranks(
      2,
      [](int r) {
        auto pg = tpsp::comm::init_from_env();
        expect_eq(pg->rank(), r, "rank from SLURM_PROCID");
        expect_eq(pg->size(), 2, "size from SLURM_NTASKS");
        expect_eq(tpsp::comm::local_rank(), r, "local rank from SLURM_LOCALID");
        expect_eq(pg->options().timeout.count(), int64_t{7500}, "TPSP_COMM_TIMEOUT");
        expect(!pg->options().fingerprints, "TPSP_COMM_FINGERPRINT=0");
        expect_eq(pg->options().link.name, std::string("ib"), "TPSP_LINK");
        auto again = tpsp::comm::init_from_env();  // same TPSP_STORE_DIR, new key prefix
        Tensor t = Tensor::full({2}, 1.0f);
        again->all_reduce(t);
        pg->all_reduce(t);
        expect_eq(t.data()[0], 4.0f, "two worlds in one store dir");
      },
      o);
  REQUIRE_MESSAGE(all_ok(res), summary(res));
}
