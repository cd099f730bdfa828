#include <doctest/doctest.h>
#include <chrono>
#include <iostream>
#include <limits>
#include "engine/comm/comm_error.h"
#include "engine/comm/env.h"
#include "engine/error.h"
#include "tests/support/fork_ranks.h"
#include "tests/support/local_backend.h"

using namespace tpsp;
using namespace tpsp::testing;
using comm::ProcessGroup;

namespace {
comm::GroupOptions opts(bool fp, int ms = 3000) {
  comm::GroupOptions o;
  o.timeout = std::chrono::milliseconds(ms);
  o.fingerprints = fp;
  return o;
}
void show(const char* name, const std::vector<RankResult>& res) {
  std::cout << "=== " << name << "\n" << summary(res) << std::endl;
}
LaunchOptions lo(double d = 20) { LaunchOptions l; l.deadline_s = d; return l; }
}  // namespace

TEST_CASE("ATTACK gloo fp off disagreeing splits") {
  auto res = run_ranks(2, [](int) {
    auto pg = comm::init_from_env(opts(false));
    const bool zero = pg->rank() == 0;
    Tensor out = pg->all_to_all(Tensor({zero ? 3 : 2, 4}), {1, 1}, {1, zero ? 2 : 1});
    throw std::runtime_error("returned silently with shape " + shape_str(out.shape()));
  }, lo());
  show("gloo fp off disagreeing splits", res);
}

TEST_CASE("ATTACK gloo fp off disagreeing splits, receiver expects more") {
  auto res = run_ranks(2, [](int) {
    auto pg = comm::init_from_env(opts(false));
    const bool zero = pg->rank() == 0;
    // rank 0 sends 1 row to 1; rank 1 expects 3 rows from 0
    Tensor out = pg->all_to_all(Tensor({2, 4}), {1, zero ? 1 : 3}, {1, 1});
    throw std::runtime_error("returned silently with shape " + shape_str(out.shape()));
  }, lo());
  show("gloo fp off receiver expects more", res);
}

TEST_CASE("ATTACK gloo fp off width mismatch") {
  auto res = run_ranks(2, [](int) {
    auto pg = comm::init_from_env(opts(false));
    const bool zero = pg->rank() == 0;
    Tensor out = pg->all_to_all(Tensor({2, zero ? 3 : 4}), {1, 1}, {1, 1});
    throw std::runtime_error("returned silently with shape " + shape_str(out.shape()));
  }, lo());
  show("gloo fp off width mismatch", res);
}

TEST_CASE("ATTACK gloo fp on width mismatch") {
  auto res = run_ranks(2, [](int) {
    auto pg = comm::init_from_env(opts(true));
    const bool zero = pg->rank() == 0;
    Tensor out = pg->all_to_all(Tensor({2, zero ? 3 : 4}), {1, 1}, {1, 1});
    throw std::runtime_error("returned silently with shape " + shape_str(out.shape()));
  }, lo());
  show("gloo fp on width mismatch", res);
}

TEST_CASE("ATTACK gloo fp on width mismatch where bytes coincide (2x6 vs 3x4 rows?)") {
  // rank 0 rows of width 6, sends 2 rows (48 B) to rank 1; rank 1 rows width 4, expects 3 rows (48 B)
  auto res = run_ranks(2, [](int) {
    auto pg = comm::init_from_env(opts(false));
    const bool zero = pg->rank() == 0;
    Tensor in = zero ? Tensor({3, 6}) : Tensor({1, 4});
    in.fill(zero ? 7.f : 9.f);
    Tensor out = zero ? pg->all_to_all(in, {1, 1}, {1, 2}) : pg->all_to_all(in, {3, 1}, {0, 1});
    throw std::runtime_error("returned silently with shape " + shape_str(out.shape()));
  }, lo());
  show("gloo fp off width mismatch bytes coincide", res);
}

TEST_CASE("ATTACK gloo fp on dtype mismatch") {
  auto res = run_ranks(2, [](int) {
    auto pg = comm::init_from_env(opts(true));
    const bool zero = pg->rank() == 0;
    Tensor out = pg->all_to_all(Tensor({2, 4}, zero ? DType::f32 : DType::bf16), {1, 1}, {1, 1});
    throw std::runtime_error("returned silently with shape " + shape_str(out.shape()));
  }, lo());
  show("gloo fp on dtype mismatch", res);
}

TEST_CASE("ATTACK gloo fp on edge shapes") {
  auto res = run_ranks(2, [](int) {
    auto pg = comm::init_from_env(opts(true));
    const int me = pg->rank();
    std::string log;
    auto tryit = [&](const char* what, auto f) {
      try { Tensor t = f(); log += std::string(what) + ": ok shape " + shape_str(t.shape()) + "\n"; }
      catch (const std::exception& e) { log += std::string(what) + ": THREW " + e.what() + "\n"; }
    };
    tryit("zero rows everywhere", [&] { return pg->all_to_all(Tensor({0, 3}), {0, 0}, {0, 0}); });
    tryit("rank1 sends nothing, receives", [&] {
      Tensor in = me == 0 ? Tensor({3, 2}) : Tensor({0, 2});
      if (me == 0) in.fill(5.f);
      Tensor o = me == 0 ? pg->all_to_all(in, {1, 0}, {1, 2}) : pg->all_to_all(in, {2, 0}, {0, 0});
      if (me == 1) for (int64_t i = 0; i < o.numel(); ++i) if (o.data()[i] != 5.f) throw std::runtime_error("bad value");
      return o; });
    tryit("bf16", [&] {
      Tensor in({3, 2}, DType::bf16); in.fill(1.5f + me);
      Tensor o = me == 0 ? pg->all_to_all(in, {1, 2}, {1, 2}) : pg->all_to_all(in, {2, 1}, {2, 1});
      Tensor f = o.to(DType::f32);
      std::string v; for (int64_t i = 0; i < f.numel(); ++i) v += std::to_string(f.data()[i]) + " ";
      log += "  bf16 values rank " + std::to_string(me) + ": " + v + "\n";
      return o; });
    tryit("1-D", [&] {
      Tensor in({3}); for (int i = 0; i < 3; ++i) in.data()[i] = 10 * me + i;
      Tensor o = me == 0 ? pg->all_to_all(in, {1, 2}, {1, 2}) : pg->all_to_all(in, {2, 1}, {2, 1});
      std::string v; for (int64_t i = 0; i < o.numel(); ++i) v += std::to_string(o.data()[i]) + " ";
      log += "  1-D values rank " + std::to_string(me) + ": " + v + "\n";
      return o; });
    tryit("zero trailing dim", [&] { return pg->all_to_all(Tensor({4, 0}), {2, 2}, {2, 2}); });
    tryit("zero trailing dim equal", [&] { return pg->all_to_all(Tensor({4, 0})); });
    tryit("0-D", [&] { return pg->all_to_all(Tensor(Shape{}), {0, 0}, {0, 0}); });
    tryit("still works after", [&] { return pg->all_to_all(Tensor({2, 2}), {1, 1}, {1, 1}); });
    throw std::runtime_error("\n" + log);
  }, lo());
  show("gloo fp on edge shapes", res);
}

TEST_CASE("ATTACK async wrong out shape / dtype") {
  run_local_ranks(2, [](ProcessGroup& pg) {
    std::string log;
    Tensor in({3, 2});
    const int me = pg.rank();
    auto outs = me == 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{2, 1};
    auto ins = me == 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{2, 1};
    try { Tensor out({4, 2}); pg.all_to_all_async(in, out, outs, ins)->wait(); log += "wrong rows: ok\n"; }
    catch (const std::exception& e) { log += std::string("wrong rows: ") + e.what() + "\n"; }
    try { Tensor out({3, 2}, DType::bf16); pg.all_to_all_async(in, out, outs, ins)->wait(); log += "wrong dtype: ok\n"; }
    catch (const std::exception& e) { log += std::string("wrong dtype: ") + e.what() + "\n"; }
    try { Tensor out = in; pg.all_to_all_async(in, out, outs, ins)->wait(); log += "aliased: ok\n"; }
    catch (const std::exception& e) { log += std::string("aliased: ") + e.what() + "\n"; }
    try { Tensor out({3, 2}); pg.all_to_all_async(in, out, outs, ins)->wait(); log += "right: ok\n"; }
    catch (const std::exception& e) { log += std::string("right: ") + e.what() + "\n"; }
    if (me == 0) std::cout << log;
  });
}

TEST_CASE("ATTACK world 1") {
  run_local_ranks(1, [](ProcessGroup& pg) {
    try { pg.all_to_all(Tensor({2, 2}), {3}, {2}); std::cout << "world1 disagree: ok\n"; }
    catch (const std::exception& e) { std::cout << "world1 disagree: " << e.what() << "\n"; }
    try { pg.all_to_all(Tensor({2, 2}), {2}, {3}); std::cout << "world1 bad sum: ok\n"; }
    catch (const std::exception& e) { std::cout << "world1 bad sum: " << e.what() << "\n"; }
  });
}
