// The recorder: bytes equal the closed forms per op and world size, reduce_scatter moves half of
// all_reduce's bytes, queries filter, the Chrome trace parses and holds one event per call.
// The link model: closed forms, parsing, and emulation that sleeps instead of burning CPU.
#include <doctest/doctest.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/comm/cost_model.h"
#include "engine/comm/env.h"
#include "engine/error.h"
#include "tests/support/fork_ranks.h"

using tpsp::Shape;
using tpsp::Tensor;
using tpsp::comm::OpKind;
using tpsp::trace::RecordFilter;
using namespace tpsp::testing;

TEST_CASE("recorded bytes follow the closed forms per op and world size 1..4") {
  for (int n = 1; n <= 4; ++n) {
    CAPTURE(n);
    const auto res = run_ranks(n, [](int r) {
      auto pg = tpsp::comm::init_from_env();
      const uint64_t n = static_cast<uint64_t>(pg->size());
      const int64_t rows = 12 * static_cast<int64_t>(n);  // S divisible by n: exact closed forms
      Tensor x(Shape{rows, 8});
      const uint64_t S = x.nbytes();
      pg->all_reduce(x, tpsp::comm::ReduceOp::sum, {"L0.fwd.g"});
      const Tensor g = pg->all_gather(x.slice0(0, 12), 0, {"L0.fwd.ag"});
      const Tensor s = pg->reduce_scatter(x, 0, tpsp::comm::ReduceOp::sum, {"L0.bwd.rs"});
      const Tensor a = pg->all_to_all(x, {"L1.a2a"});
      pg->broadcast(x, 0, {"L1.bcast"});
      pg->barrier({"L1.barrier"});
      Tensor gd1 = pg->all_gather(x, 1, {"L1.ag1"});
      expect_eq(g.nbytes(), S, "all_gather output bytes");

      auto& rec = pg->recorder();
      const auto all = rec.records();
      expect_eq(all.size(), std::size_t{7}, "number of records");
      const auto one = [&](OpKind op, const std::string& label) {
        const auto q = rec.query(RecordFilter{op, "world", label});
        expect_eq(q.size(), std::size_t{1}, std::string("records of ") + tpsp::comm::op_name(op));
        return q[0];
      };
      // Closed forms written out here, independently of cost_model.cpp.
      expect_eq(one(OpKind::all_reduce, "L0.fwd.g").bytes, 2 * (n - 1) * S / n,
                "all_reduce bytes 2(n-1)/n S");
      expect_eq(one(OpKind::all_gather, "L0.fwd.ag").bytes, (n - 1) * S / n,
                "all_gather bytes (n-1)/n S_out");
      const auto rs = one(OpKind::reduce_scatter, "L0.bwd.rs");
      expect_eq(rs.bytes, (n - 1) * S / n, "reduce_scatter bytes (n-1)/n S_in");
      expect_eq(2 * rs.bytes, one(OpKind::all_reduce, "").bytes, "reduce_scatter moves half of all_reduce");
      expect_eq(rs.tensor_bytes, S, "reduce_scatter tensor bytes");
      expect(rs.shape == Shape({rows, 8}), "reduce_scatter records the input shape");
      expect_eq(one(OpKind::all_to_all, "L1").bytes, (n - 1) * S / n, "all_to_all bytes");
      // Binomial tree from root 0: total over ranks is (n-1) S; the root sends ceil(log2 n) S.
      const uint64_t root_children = n == 1 ? 0 : n == 2 ? 1 : 2;
      const uint64_t children = r == 0 ? root_children : (n == 4 && r == 1 ? 1 : 0);
      expect_eq(one(OpKind::broadcast, "L1.bcast").bytes, children * S, "broadcast bytes");
      expect_eq(one(OpKind::barrier, "L1.barrier").bytes, uint64_t{0}, "barrier bytes");
      const auto ag1 = one(OpKind::all_gather, "L1.ag1");
      expect_eq(ag1.dim, int64_t{1}, "all_gather dim recorded");
      expect_eq(ag1.bytes, (n - 1) * gd1.nbytes() / n, "all_gather dim 1 bytes");
      for (std::size_t i = 0; i < all.size(); ++i) {
        expect_eq(all[i].seq, uint64_t{i}, "sequence numbers");
        expect(all[i].ok && all[i].t_issue <= all[i].t_start && all[i].t_start <= all[i].t_end,
               "record times");
        expect_eq(all[i].group, std::string("world"), "group name");
        expect_eq(all[i].global_rank, r, "global rank");
      }
      expect_eq(rec.query(RecordFilter{std::nullopt, "", "L0."}).size(), std::size_t{3},
                "label prefix query");
      expect_eq(rec.query(RecordFilter{std::nullopt, "tp", ""}).size(), std::size_t{0}, "group query");
      expect_eq(rec.total_bytes(RecordFilter{std::nullopt, "", "L0.fwd"}), 3 * (n - 1) * S / n,
                "total bytes");

      // Chrome trace: parses, one complete event per call, readable fields.
      const auto text = rec.chrome_trace().dump();
      const auto j = nlohmann::json::parse(text);
      int x_events = 0;
      for (const auto& ev : j.at("traceEvents"))
        if (ev.at("ph") == "X") {
          ++x_events;
          expect(ev.at("dur").get<double>() >= 0 && ev.at("args").contains("bytes"), "trace event fields");
        }
      expect_eq(x_events, 7, "trace events");
      // The same through a file, as Perfetto would read it.
      const std::string path =
          std::string(std::getenv("TPSP_STORE_DIR")) + "/trace" + std::to_string(r) + ".json";
      rec.write_chrome_trace(path);
      std::ifstream f(path);
      const auto jf = nlohmann::json::parse(f);
      expect_eq(jf.at("traceEvents").size(), j.at("traceEvents").size(), "events in the trace file");
      expect_eq(j.at("traceEvents").back().at("args").at("op").get<std::string>(), std::string("all_gather"),
                "last event op");
      rec.clear();
      expect_eq(rec.size(), std::size_t{0}, "records after clear");
    });
    REQUIRE_MESSAGE(all_ok(res), summary(res));
  }
}

TEST_CASE("subgroups share the world's recorder and async calls are flagged") {
  const auto res = run_ranks(2, [](int r) {
    auto world = tpsp::comm::init_from_env();
    auto sub = world->new_group({0, 1}, "tp");
    expect(sub != nullptr, "member got no group");
    Tensor t = Tensor::full({4}, 1.0f);
    sub->all_reduce_async(t, tpsp::comm::ReduceOp::sum, {"x"})->wait();
    const auto q = world->recorder().query(RecordFilter{OpKind::all_reduce, "tp", ""});
    expect_eq(q.size(), std::size_t{1}, "tp records seen from the world recorder");
    expect(q[0].async && q[0].label == "x", "async flag and label");
    sub->all_reduce(t, tpsp::comm::ReduceOp::sum, {"y"});
    expect(!world->recorder().query(RecordFilter{OpKind::all_reduce, "tp", "y"}).at(0).async,
           "blocking flag");
    expect_eq(world->recorder().query(RecordFilter{OpKind::new_group, "world", ""}).size(), std::size_t{1},
              "new_group recorded on the parent");
    (void)r;
  });
  REQUIRE_MESSAGE(all_ok(res), summary(res));
}

TEST_CASE("cost model closed forms and busbw factors") {
  using tpsp::comm::wire_bytes;
  CHECK(wire_bytes(OpKind::all_reduce, 4, 4096) == 6144);  // 2*3/4
  CHECK(wire_bytes(OpKind::reduce_scatter, 4, 4096) == 3072);
  CHECK(wire_bytes(OpKind::all_gather, 8, 8192) == 7168);
  CHECK(wire_bytes(OpKind::all_reduce, 1, 4096) == 0);
  uint64_t total = 0;  // a broadcast sends n-1 copies in all
  for (int r = 0; r < 7; ++r) total += wire_bytes(OpKind::broadcast, 7, 100, r, 3);
  CHECK(total == 600);
  CHECK(wire_bytes(OpKind::broadcast, 8, 100, 0, 0) == 300);  // root: log2(8) children
  CHECK(tpsp::comm::busbw_factor(OpKind::all_reduce, 2) == doctest::Approx(1.0));
  CHECK(tpsp::comm::busbw_factor(OpKind::all_gather, 4) == doctest::Approx(0.75));
}

TEST_CASE("link specs parse, and bad ones name the spec") {
  using tpsp::comm::LinkModel;
  CHECK_FALSE(LinkModel::parse("").enabled());
  CHECK_FALSE(LinkModel::parse("off").enabled());
  CHECK(LinkModel::parse("nvlink").bandwidth_Bps == doctest::Approx(150e9));
  CHECK(LinkModel::parse("PCIe").bandwidth_Bps == doctest::Approx(24e9));
  const auto l = LinkModel::parse("2GB/s");
  CHECK(l.bandwidth_Bps == doctest::Approx(2e9));
  CHECK(l.latency_s == doctest::Approx(10e-6));
  const auto m = LinkModel::parse("500MB/s,2ms");
  CHECK(m.bandwidth_Bps == doctest::Approx(500e6));
  CHECK(m.latency_s == doctest::Approx(2e-3));
  // 2 ranks all_reduce of 1e6 bytes at 1 GB/s, 0 latency: 2*(1/2)*1e6 / 1e9 = 1 ms.
  CHECK(LinkModel::parse("1GB/s,0us").seconds(OpKind::all_reduce, 2, 1000000) == doctest::Approx(1e-3));
  CHECK_THROWS_WITH_AS(LinkModel::parse("warp9"), doctest::Contains("link spec 'warp9'"), tpsp::ShapeError);
}

// The link is slow enough that the modelled time (0.42 s) dwarfs the CPU work of a real 4 MiB
// all_reduce (~25 ms on a loaded 2-core machine), so "CPU < half the modelled time" holds under load
// and still fails if the emulation spins instead of sleeping.
TEST_CASE(
    "link emulation: a 4 MiB all_reduce on a 10 MB/s link takes its modelled time without burning CPU") {
  const auto res = run_ranks(2, [](int) {
    auto pg = tpsp::comm::init_from_env({.timeout = std::chrono::seconds(30),
                                         .fingerprints = true,
                                         .link = tpsp::comm::LinkModel::parse("10MB/s")});
    Tensor t = Tensor::full({1024 * 1024}, 1.0f);  // 4 MiB
    pg->barrier();
    // 2 ranks: 2 * (1/2) * 4 MiB / 10 MB/s + 10 us latency = 0.419 s.
    const double modelled = pg->options().link.seconds(OpKind::all_reduce, 2, t.nbytes());
    expect(modelled > 0.41 && modelled < 0.43, "modelled time " + std::to_string(modelled));
    rusage u0{}, u1{};
    ::getrusage(RUSAGE_SELF, &u0);
    const auto t0 = std::chrono::steady_clock::now();
    pg->all_reduce(t, tpsp::comm::ReduceOp::sum, {"slow"});
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ::getrusage(RUSAGE_SELF, &u1);
    auto secs = [](const timeval& a, const timeval& b) {
      return static_cast<double>(b.tv_sec - a.tv_sec) + 1e-6 * static_cast<double>(b.tv_usec - a.tv_usec);
    };
    const double cpu = secs(u0.ru_utime, u1.ru_utime) + secs(u0.ru_stime, u1.ru_stime);
    expect_eq(t.data()[0], 2.0f, "value");
    expect(wall >= modelled,
           "wall " + std::to_string(wall) + " s < modelled " + std::to_string(modelled) + " s");
    expect(cpu < 0.5 * modelled,
           "CPU " + std::to_string(cpu) + " s for a modelled " + std::to_string(modelled) + " s");
    const auto rec = pg->recorder().query(RecordFilter{OpKind::all_reduce, "", "slow"}).at(0);
    expect(rec.t_end - rec.t_start >= modelled, "recorded duration shorter than modelled");
  });
  REQUIRE_MESSAGE(all_ok(res), summary(res));
}
