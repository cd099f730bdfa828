// lab00's ring collectives (engine/comm/ring_collectives.h) at world sizes 1..4 on forked ranks.
// Inputs are small integers (nccl-tests' idea: any summation order gives the same floats), so every
// result is compared with == against its closed form and against the engine's own collective, and
// the recorder's bytes are compared exactly against the ring's formulas.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/comm/cost_model.h"
#include "engine/comm/env.h"
#include "engine/comm/ring_collectives.h"
#include "engine/error.h"
#include "tests/support/ranks.h"

using tpsp::Shape;
using tpsp::Tensor;
using namespace tpsp::comm;
using namespace tpsp::trace;
using tpsp::testing::expect;

namespace {

/// A tensor whose flat element i is f(i).
Tensor make(const Shape& shape, const std::function<double(int64_t)>& f) {
  Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>(f(i));
  return t;
}

/// Throws naming the first element where t differs from f(i), or a wrong shape.
void expect_values(const Tensor& t, const Shape& shape, const std::function<double(int64_t)>& f,
                   const std::string& what) {
  expect(t.shape() == shape,
         what + ": shape " + tpsp::shape_str(t.shape()) + ", expected " + tpsp::shape_str(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float want = static_cast<float>(f(i));
    if (t.data()[i] != want)  // the message is built only on a failure (4 MiB tensors are checked)
      throw std::runtime_error(what + ": element " + std::to_string(i) + " is " +
                               std::to_string(t.data()[i]) + ", expected exactly " + std::to_string(want));
  }
}

/// got == want element by element (both exact).
void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  expect_values(
      got, want.shape(), [&](int64_t i) { return want.data()[i]; }, what);
}

/// The world group with a 10 s call timeout: a ring that deadlocks (every rank blocked in a send)
/// fails with CommTimeoutError naming the step, well before run_world's deadline kills the ranks.
std::shared_ptr<ProcessGroup> world_group() {
  GroupOptions o = options_from_env();
  o.timeout = std::chrono::seconds(10);
  return init_from_env(o);
}

/// Runs body as n forked ranks and CHECKs that every rank succeeded (worst case 4 worlds x 25 s stays
/// under ctest's 120 s per test).
void run_world(int n, const std::function<void(int rank)>& body, double timeout_s = 25) {
  CAPTURE(n);
  const auto results = tpsp::testing::run_ranks(n, body, timeout_s);
  const std::string f = tpsp::testing::failures(results);
  CHECK_MESSAGE(f.empty(), "world size " << n << ":\n" << f);
}

/// Records whose label starts with `prefix` and whose op is `op`.
std::vector<CommRecord> records(ProcessGroup& pg, OpKind op, const std::string& prefix) {
  RecordFilter f;
  f.op = op;
  f.label_prefix = prefix;
  return pg.recorder().query(f);
}

/// Every record is a send or a recv; one send and one recv labelled prefix + ".step<i>" for each
/// i in [0, steps); each send carries `chunk_bytes`, each recv 0. Returns the bytes sent.
uint64_t expect_ring_steps(ProcessGroup& pg, const std::string& prefix, int steps, uint64_t chunk_bytes) {
  for (const auto& rec : pg.recorder().query({std::nullopt, "", prefix}))
    expect(rec.op == OpKind::send || rec.op == OpKind::recv,
           prefix + ": recorded a " + op_name(rec.op) + " ('" + rec.label + "'), expected only send/recv");
  const auto sends = records(pg, OpKind::send, prefix);
  const auto recvs = records(pg, OpKind::recv, prefix);
  expect(static_cast<int>(sends.size()) == steps,
         prefix + ": " + std::to_string(sends.size()) + " sends, expected " + std::to_string(steps));
  expect(static_cast<int>(recvs.size()) == steps,
         prefix + ": " + std::to_string(recvs.size()) + " recvs, expected " + std::to_string(steps));
  for (int i = 0; i < steps; ++i) {
    const std::string label = prefix + ".step" + std::to_string(i);
    int s = 0, r = 0;
    for (const auto& rec : sends)
      if (rec.label == label) {
        ++s;
        expect(rec.bytes == chunk_bytes, label + ": send of " + std::to_string(rec.bytes) +
                                             " bytes, expected " + std::to_string(chunk_bytes));
        expect(rec.ok && rec.group == pg.name(), label + ": send failed or in the wrong group");
      }
    for (const auto& rec : recvs)
      if (rec.label == label) {
        ++r;
        expect(rec.bytes == 0 && rec.tensor_bytes == chunk_bytes, label + ": recv bytes wrong");
      }
    expect(s == 1 && r == 1, label + ": " + std::to_string(s) + " sends and " + std::to_string(r) +
                                 " recvs, expected one of each");
  }
  return pg.recorder().total_bytes({OpKind::send, "", prefix});
}

/// Runs fn, which must throw ShapeError whose message contains every needle.
void expect_shape_error(const std::function<void()>& fn, const std::vector<std::string>& needles,
                        const std::string& what) {
  try {
    fn();
  } catch (const tpsp::ShapeError& e) {
    const std::string msg = e.what();
    for (const auto& n : needles)
      expect(msg.find(n) != std::string::npos, what + ": message '" + msg + "' does not name '" + n + "'");
    return;
  }
  throw std::runtime_error(what + ": no ShapeError");
}

}  // namespace

TEST_CASE(
    "ring reduce-scatter, all-gather and all-reduce equal the closed forms and the engine collectives") {
  for (int world = 1; world <= 4; ++world) {
    run_world(world, [](int) {
      auto pg = world_group();
      const int n = pg->size(), r = pg->rank();
      const double tri = n * (n - 1) / 2.0;  // sum of the ranks 0 .. n-1

      // reduce-scatter [2n, 3, 2] -> [2, 3, 2]: element i of rank q is 1000 q + i; rank r keeps
      // rows [2r, 2r+2), i.e. flat elements 12 r + e.
      const Tensor in = make({2 * n, 3, 2}, [&](int64_t i) { return 1000 * r + i; });
      const Tensor rs = ring_reduce_scatter(*pg, in, "rs");
      expect_values(
          rs, {2, 3, 2}, [&](int64_t e) { return 1000 * tri + n * (12 * r + e); }, "ring_reduce_scatter");
      expect_values(
          in, {2 * n, 3, 2}, [&](int64_t i) { return 1000 * r + i; }, "ring_reduce_scatter input untouched");
      expect_same(rs, pg->reduce_scatter(in, 0), "ring_reduce_scatter vs pg.reduce_scatter");
      expect(!rs.shares_storage_with(in), "ring_reduce_scatter returned a view of its input");

      // all-gather [2, 3] -> [2n, 3]: chunk j is rank j's input, 100 j + e.
      const Tensor shard = make({2, 3}, [&](int64_t e) { return 100 * r + e; });
      const Tensor ag = ring_all_gather(*pg, shard, "ag");
      expect_values(
          ag, {2 * n, 3}, [&](int64_t i) { return 100 * (i / 6) + i % 6; }, "ring_all_gather");
      expect_same(ag, pg->all_gather(shard, 0), "ring_all_gather vs pg.all_gather");

      // all-gather of a 1-d shard of 5 elements (any dim-0 extent is allowed).
      const Tensor v = make({5}, [&](int64_t e) { return 10 * r - e; });
      expect_values(
          ring_all_gather(*pg, v, "ag1"), {5 * n}, [&](int64_t i) { return 10 * (i / 5) - i % 5; },
          "ring_all_gather 1-d");

      // all-reduce in place, [3n, 4]: element i of rank q is (q + 1)(i + 1) -> n(n+1)/2 (i + 1).
      Tensor t = make({3 * n, 4}, [&](int64_t i) { return (r + 1) * (i + 1); });
      Tensor ref = t.clone();
      const float* before = t.data();
      ring_all_reduce(*pg, t, "ar");
      expect(t.data() == before, "ring_all_reduce did not work in place");
      expect_values(
          t, {3 * n, 4}, [&](int64_t i) { return n * (n + 1) / 2.0 * (i + 1); }, "ring_all_reduce");
      pg->all_reduce(ref);
      expect_same(t, ref, "ring_all_reduce vs pg.all_reduce");
    });
  }
}

TEST_CASE("ring collectives on 4 MiB tensors at world 2 and 4") {
  // Larger than a socket buffer: the ring must post each send before its recv on every rank.
  for (int world : {2, 4}) {
    run_world(world, [](int) {
      auto pg = world_group();
      const int n = pg->size(), r = pg->rank();
      const int64_t rows = 1024;  // [1024, 1024] f32 = 4 MiB
      Tensor t = make({rows, 1024}, [&](int64_t i) { return (i % 4096) + r; });
      const Tensor orig = t.clone();
      ring_all_reduce(*pg, t, "big");
      expect_values(
          t, {rows, 1024}, [&](int64_t i) { return n * (i % 4096) + n * (n - 1) / 2; }, "4 MiB all-reduce");
      Tensor rs = ring_reduce_scatter(*pg, orig, "big_rs");
      expect_same(rs, t.slice0(r * rows / n, (r + 1) * rows / n),
                  "4 MiB reduce-scatter = chunk r of the all-reduce");
      expect_same(ring_all_gather(*pg, rs, "big_ag"), t,
                  "4 MiB all-gather of the reduced chunks = the all-reduce");
    });
  }
}

TEST_CASE("the recorder shows n-1 send and recv steps per phase and 2(n-1)/n S bytes per ring all-reduce") {
  for (int world = 1; world <= 4; ++world) {
    run_world(world, [](int) {
      auto pg = world_group();
      const int n = pg->size();
      const auto un = static_cast<uint64_t>(n);
      pg->recorder().clear();

      // S = 4n rows x 6 f32 = 96 n bytes for every phase, so RS, AG and AR move the same S.
      const Tensor in = make({4 * n, 6}, [](int64_t i) { return i % 7; });
      const uint64_t S = in.nbytes();
      (void)ring_reduce_scatter(*pg, in, "rs");
      const Tensor shard = make({4, 6}, [](int64_t i) { return i; });
      (void)ring_all_gather(*pg, shard, "ag");
      Tensor t = in.clone();
      ring_all_reduce(*pg, t, "ar");

      if (n == 1) {
        expect(pg->recorder().size() == 0, "world 1: the ring collectives recorded a call");
        return;
      }
      const uint64_t chunk = S / un;
      const uint64_t rs_bytes = expect_ring_steps(*pg, "rs", n - 1, chunk);
      const uint64_t ag_bytes = expect_ring_steps(*pg, "ag", n - 1, chunk);
      const uint64_t ar_rs = expect_ring_steps(*pg, "ar.reduce_scatter", n - 1, chunk);
      const uint64_t ar_ag = expect_ring_steps(*pg, "ar.all_gather", n - 1, chunk);
      for (const auto& rec : pg->recorder().records())
        expect(rec.op == OpKind::send || rec.op == OpKind::recv,
               std::string("the ring collectives recorded a ") + op_name(rec.op) + " ('" + rec.label + "')");
      expect(pg->recorder().size() == 4 * 2 * (un - 1), "records other than the ring steps");
      const uint64_t ar_bytes = pg->recorder().total_bytes({OpKind::send, "", "ar"});
      const auto ar_sends = records(*pg, OpKind::send, "ar");
      expect(static_cast<int>(ar_sends.size()) == wire_steps(OpKind::all_reduce, n),
             "ring all-reduce: " + std::to_string(ar_sends.size()) + " sends, expected 2(n-1)");

      // (n-1)/n S per phase, 2(n-1)/n S per all-reduce, exactly, and the all-reduce = RS + AG.
      expect(rs_bytes == (un - 1) * S / un, "reduce-scatter bytes " + std::to_string(rs_bytes));
      expect(ag_bytes == (un - 1) * S / un, "all-gather bytes " + std::to_string(ag_bytes));
      expect(ar_bytes == 2 * (un - 1) * S / un, "all-reduce bytes " + std::to_string(ar_bytes));
      expect(ar_bytes == rs_bytes + ag_bytes, "all-reduce bytes != reduce-scatter + all-gather bytes");
      expect(ar_rs + ar_ag == ar_bytes, "all-reduce bytes are not its two phases' bytes");
      expect(ar_bytes == wire_bytes(OpKind::all_reduce, n, S), "all-reduce bytes != cost_model wire_bytes");

      // The engine's own all-reduce of the same tensor records the same bytes.
      Tensor u = in.clone();
      pg->all_reduce(u, ReduceOp::sum, {"engine_ar"});
      const auto eng = records(*pg, OpKind::all_reduce, "engine_ar");
      expect(eng.size() == 1 && eng[0].bytes == ar_bytes, "pg.all_reduce records different bytes");
    });
  }
}

TEST_CASE("ring collectives on a subgroup use group ranks") {
  // World 4; the group's members are world ranks 3, 1, 2 in that order (group ranks 0, 1, 2).
  run_world(4, [](int) {
    auto world = world_group();
    const std::vector<int> members = {3, 1, 2};
    auto g = world->new_group(members, "ring3");
    if (!g) return;  // world rank 0 is not a member
    const int me = world->rank();
    const Tensor shard = make({2, 2}, [&](int64_t e) { return 100 * me + e; });
    expect_values(
        ring_all_gather(*g, shard, "g.ag"), {6, 2},
        [&](int64_t i) { return 100 * members[static_cast<std::size_t>(i / 4)] + i % 4; },
        "subgroup all-gather in group-rank order");
    Tensor t = make({3, 2}, [&](int64_t i) { return me * (i + 1); });
    ring_all_reduce(*g, t, "g.ar");
    expect_values(
        t, {3, 2}, [&](int64_t i) { return 6 * (i + 1); }, "subgroup all-reduce");
    const auto sends = records(*g, OpKind::send, "g.");
    expect(sends.size() == 2 + 4, "subgroup: expected 2 + 4 sends, got " + std::to_string(sends.size()));
    for (const auto& s : sends) expect(s.group == "ring3", "subgroup send recorded in group " + s.group);
  });
}

TEST_CASE("dim 0 not divisible by the group size is a ShapeError before any send") {
  for (int world = 1; world <= 4; ++world) {
    run_world(world, [](int) {
      auto pg = world_group();
      const int n = pg->size();
      pg->recorder().clear();
      if (n > 1) {
        const Tensor bad = Tensor::full({n + 1, 2}, 1.0f);
        const std::string extent = "dim 0 extent " + std::to_string(n + 1);
        const std::string size = "group size " + std::to_string(n);
        expect_shape_error([&] { (void)ring_reduce_scatter(*pg, bad, "x"); },
                           {"ring_reduce_scatter", extent, size, "[" + std::to_string(n + 1) + ", 2]"},
                           "ring_reduce_scatter");
        Tensor bad2 = bad.clone();
        expect_shape_error([&] { ring_all_reduce(*pg, bad2, "x"); }, {"ring_all_reduce", extent, size},
                           "ring_all_reduce");
        expect_values(
            bad2, {n + 1, 2}, [](int64_t) { return 1; }, "refused all-reduce left t unchanged");
      }
      // A tensor without a dim 0 (a scalar) is refused at every world size, n == 1 included.
      Tensor scalar = Tensor::full({}, 1.0f);
      expect_shape_error([&] { (void)ring_reduce_scatter(*pg, scalar, "x"); }, {"ring_reduce_scatter", "[]"},
                         "scalar RS");
      expect_shape_error([&] { (void)ring_all_gather(*pg, scalar, "x"); }, {"ring_all_gather", "[]"},
                         "scalar AG");
      expect_shape_error([&] { ring_all_reduce(*pg, scalar, "x"); }, {"ring_all_reduce", "[]"}, "scalar AR");
      expect(pg->recorder().size() == 0,
             "a refused ring call communicated: " + std::to_string(pg->recorder().size()) + " records");

      // Nothing half-sent: the ring still works afterwards on every rank.
      Tensor ok = make({2 * n}, [&](int64_t i) { return i; });
      ring_all_reduce(*pg, ok, "after");
      expect_values(
          ok, {2 * n}, [&](int64_t i) { return n * i; }, "all-reduce after the refused calls");
    });
  }
}

TEST_CASE("ring collectives on empty tensors") {
  for (int world = 1; world <= 4; ++world) {
    run_world(world, [](int) {
      auto pg = world_group();
      const int n = pg->size();
      const Tensor in(Shape{0, 4});
      expect_values(
          ring_reduce_scatter(*pg, in, "e.rs"), {0, 4}, [](int64_t) { return 0; }, "empty RS");
      expect_values(
          ring_all_gather(*pg, in, "e.ag"), {0, 4}, [](int64_t) { return 0; }, "empty AG");
      Tensor t(Shape{2 * n, 0});
      ring_all_reduce(*pg, t, "e.ar");
      expect(t.shape() == Shape{2 * n, 0}, "empty AR shape");
      Tensor ok = Tensor::full({n}, 1.0f);
      ring_all_reduce(*pg, ok, "after");
      expect_values(
          ok, {n}, [&](int64_t) { return n; }, "all-reduce after the empty calls");
    });
  }
}
