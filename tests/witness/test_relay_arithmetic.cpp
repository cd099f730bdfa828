// The relay's collectives as arithmetic (launch/relay_arithmetic.h) against the tests' threads backend
// (tests/support/local_backend.h), an independent implementation of the same transport contract: for
// n = 1..4 ranks and every collective, each rank's bytes from carry_collective equal what that rank's
// ProcessGroup call returned on the same inputs, exactly (inputs are multiples of 1/4 in [-8, 8], so
// sums are exact in any order). Then the errors it names for inputs it cannot carry.
#include <doctest/doctest.h>

#include <cstring>
#include <mutex>
#include <random>

#include "engine/comm/process_group.h"
#include "launch/relay_arithmetic.h"
#include "tests/support/local_backend.h"

using namespace tpsp;
using namespace tpsp::run;
using comm::OpKind;
using comm::ReduceOp;

namespace {

/// Rank r's input: 4·n float32 values, multiples of 1/4 drawn from (r, salt).
Tensor input_of(int r, int n, int salt) {
  std::mt19937 gen(static_cast<unsigned>(1000 * salt + r));
  std::uniform_int_distribution<int> q(-32, 32);
  Tensor t({4 * static_cast<int64_t>(n)});
  for (int64_t i = 0; i < t.numel(); ++i) t.at(i) = static_cast<float>(q(gen)) / 4.f;
  return t;
}

Bytes bytes_of(const Tensor& t) {
  Bytes b(static_cast<std::size_t>(t.numel()) * 4);
  std::memcpy(b.data(), t.data(), b.size());
  return b;
}

/// What each rank's ProcessGroup call returned under the threads backend, as bytes.
std::vector<Bytes> through_local_backend(OpKind op, ReduceOp reduce, int root, int n, int salt) {
  std::vector<Bytes> out(static_cast<std::size_t>(n));
  std::mutex m;
  testing::run_local_ranks(n, [&](comm::ProcessGroup& pg) {
    const int r = pg.rank();
    Tensor t = input_of(r, n, salt), got;
    switch (op) {
      case OpKind::all_reduce:
        pg.all_reduce(t, reduce);
        got = t;
        break;
      case OpKind::reduce_scatter:
        got = pg.reduce_scatter(t, 0, reduce);
        break;
      case OpKind::all_gather:
        got = pg.all_gather(t, 0);
        break;
      case OpKind::all_to_all:
        got = pg.all_to_all(t);
        break;
      default:
        pg.broadcast(t, root);
        got = t;
    }
    const std::lock_guard<std::mutex> lock(m);
    out[static_cast<std::size_t>(r)] = bytes_of(got);
  });
  return out;
}

}  // namespace

TEST_CASE("relay arithmetic: every collective equals the threads backend's, n = 1..4") {
  const std::vector<std::pair<OpKind, ReduceOp>> calls{
      {OpKind::all_reduce, ReduceOp::sum},     {OpKind::all_reduce, ReduceOp::max},
      {OpKind::reduce_scatter, ReduceOp::sum}, {OpKind::reduce_scatter, ReduceOp::max},
      {OpKind::all_gather, ReduceOp::sum},     {OpKind::all_to_all, ReduceOp::sum},
      {OpKind::broadcast, ReduceOp::sum}};
  int salt = 0;
  for (int n = 1; n <= 4; ++n)
    for (const auto& [op, reduce] : calls) {
      const int root = op == OpKind::broadcast ? n - 1 : -1;
      CAPTURE(n);
      CAPTURE(comm::op_name(op));
      CAPTURE(comm::reduce_op_name(reduce));
      ++salt;
      std::vector<Bytes> inputs;
      for (int r = 0; r < n; ++r) inputs.push_back(bytes_of(input_of(r, n, salt)));
      std::vector<const Bytes*> ptrs;
      for (const Bytes& b : inputs) ptrs.push_back(&b);
      const CollectiveResult got = carry_collective(op, reduce, root, ptrs);
      REQUIRE(got.error.empty());
      const std::vector<Bytes> want = through_local_backend(op, reduce, root, n, salt);
      REQUIRE(got.out.size() == want.size());
      for (int r = 0; r < n; ++r) {
        CAPTURE(r);
        CHECK(*got.out[static_cast<std::size_t>(r)] == want[static_cast<std::size_t>(r)]);
      }
    }
}

TEST_CASE("relay arithmetic: inputs it cannot carry are named, not carried") {
  const Bytes six(6), twelve(12);
  CHECK(carry_collective(OpKind::all_reduce, ReduceOp::sum, -1, {&six, &six}).error ==
        "a float32 buffer of a byte count not divisible by 4");
  CHECK(carry_collective(OpKind::reduce_scatter, ReduceOp::sum, -1, {&twelve, &twelve}).error ==
        "an input not divisible into float32 chunks, one per rank");
  CHECK(carry_collective(OpKind::all_to_all, ReduceOp::sum, -1, {&six, &six, &six, &six}).error ==
        "an input not divisible into one chunk per rank");
  CHECK(carry_collective(OpKind::broadcast, ReduceOp::sum, 2, {&six, &six}).error ==
        "a root outside the group");
  CHECK(carry_collective(OpKind::send, ReduceOp::sum, -1, {&six}).error == "not a collective");
  CHECK(carry_collective(OpKind::barrier, ReduceOp::sum, -1, {}).error == "no inputs");
  const CollectiveResult barrier = carry_collective(OpKind::barrier, ReduceOp::sum, -1, {&six, &twelve});
  CHECK(barrier.error.empty());
  CHECK(barrier.out.size() == 2);
  CHECK(barrier.out[1]->empty());
}
