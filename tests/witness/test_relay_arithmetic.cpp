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
#include "tests/support/all_to_all_cases.h"
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

/// An all_to_all payload as a RelayBackend sends it: the split header (comm/relay/protocol.h), then data.
Bytes with_header(const std::vector<uint64_t>& send, const std::vector<uint64_t>& recv, const Bytes& data) {
  std::vector<uint64_t> head(send);
  head.insert(head.end(), recv.begin(), recv.end());
  Bytes b(head.size() * 8);
  std::memcpy(b.data(), head.data(), b.size());
  b.insert(b.end(), data.begin(), data.end());
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
      for (int r = 0; r < n; ++r) {
        inputs.push_back(bytes_of(input_of(r, n, salt)));
        const std::vector<uint64_t> each(static_cast<std::size_t>(n), 16);  // 4 floats to every rank
        if (op == OpKind::all_to_all) inputs.back() = with_header(each, each, inputs.back());
      }
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

TEST_CASE("relay arithmetic: all_to_all with split sizes equals the threads backend's, n = 1..4") {
  for (int n = 1; n <= 4; ++n) {
    CAPTURE(n);
    // Rank r sends rank j rows_between(r, j, n) rows of 3 floats, each row's values naming (r, j, row).
    auto data_of = [&](int r) {
      std::vector<float> v;
      for (int j = 0; j < n; ++j)
        for (int64_t k = 0; k < testing::rows_between(r, j, n); ++k)
          for (int c = 0; c < 3; ++c) v.push_back(static_cast<float>(1000 * r + 100 * j + 10 * k + c));
      return v;
    };
    std::vector<Bytes> inputs;
    for (int r = 0; r < n; ++r) {
      std::vector<uint64_t> send, recv;
      for (int j = 0; j < n; ++j) {
        send.push_back(static_cast<uint64_t>(testing::rows_between(r, j, n)) * 12);
        recv.push_back(static_cast<uint64_t>(testing::rows_between(j, r, n)) * 12);
      }
      const std::vector<float> v = data_of(r);
      Bytes data(v.size() * 4);
      if (!v.empty()) std::memcpy(data.data(), v.data(), data.size());
      inputs.push_back(with_header(send, recv, data));
    }
    std::vector<const Bytes*> ptrs;
    for (const Bytes& b : inputs) ptrs.push_back(&b);
    const CollectiveResult got = carry_collective(OpKind::all_to_all, ReduceOp::sum, -1, ptrs);
    REQUIRE(got.error.empty());
    std::mutex m;
    std::vector<Bytes> want(static_cast<std::size_t>(n));
    testing::run_local_ranks(n, [&](comm::ProcessGroup& pg) {
      const int r = pg.rank();
      std::vector<int64_t> in_splits, out_splits;
      for (int j = 0; j < n; ++j) {
        in_splits.push_back(testing::rows_between(r, j, n));
        out_splits.push_back(testing::rows_between(j, r, n));
      }
      std::vector<float> v = data_of(r);
      Tensor in({static_cast<int64_t>(v.size() / 3), 3});
      std::copy(v.begin(), v.end(), in.data());
      const Tensor out = pg.all_to_all(in, out_splits, in_splits);
      const std::lock_guard<std::mutex> lock(m);
      want[static_cast<std::size_t>(r)] = bytes_of(out);
    });
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
  CHECK(carry_collective(OpKind::all_to_all, ReduceOp::sum, -1, {&six, &six}).error ==
        "rank 0's split header: a payload of 6 bytes cannot hold the 32 bytes of a split header for 2 ranks");
  const Bytes short_data = with_header({4, 4}, {4, 4}, Bytes(4));
  const Bytes fits = with_header({4, 4}, {4, 4}, Bytes(8));
  const Bytes expects_less = with_header({4, 4}, {2, 4}, Bytes(8));
  const Bytes huge = with_header({uint64_t{1} << 40, 0}, {4, 4}, Bytes(0));
  CHECK(carry_collective(OpKind::all_to_all, ReduceOp::sum, -1, {&fits, &short_data}).error ==
        "rank 1's split header: the counts add up to 8 bytes, the payload carries 4");
  CHECK(carry_collective(OpKind::all_to_all, ReduceOp::sum, -1, {&huge, &fits}).error ==
        "rank 0's split header: a count larger than a frame's payload");
  CHECK(carry_collective(OpKind::all_to_all, ReduceOp::sum, -1, {&fits, &expects_less}).error ==
        "rank 0 sends 4 bytes to rank 1, which expects 2 bytes from rank 0");
  CHECK(carry_collective(OpKind::all_to_all, ReduceOp::sum, -1, {&fits, &fits}).out.size() == 2);
  // A result a reply frame cannot carry is named before anything is built: 2 × 40 MiB to rank 0.
  const uint64_t mib40 = uint64_t{40} << 20;
  const Bytes to_zero = with_header({mib40, 0}, {mib40, mib40}, Bytes(mib40));
  const Bytes from_one = with_header({mib40, 0}, {0, 0}, Bytes(mib40));
  CHECK(carry_collective(OpKind::all_to_all, ReduceOp::sum, -1, {&to_zero, &from_one}).error ==
        "rank 0 would receive 83886080 bytes, more than one relay frame carries (67108864 bytes)");
  const Bytes shard(mib40);
  CHECK(carry_collective(OpKind::all_gather, ReduceOp::sum, -1, {&shard, &shard}).error ==
        "rank 0 would receive 83886080 bytes, more than one relay frame carries (67108864 bytes)");
  CHECK(carry_collective(OpKind::broadcast, ReduceOp::sum, 2, {&six, &six}).error ==
        "a root outside the group");
  CHECK(carry_collective(OpKind::send, ReduceOp::sum, -1, {&six}).error == "not a collective");
  CHECK(carry_collective(OpKind::barrier, ReduceOp::sum, -1, {}).error == "no inputs");
  const CollectiveResult barrier = carry_collective(OpKind::barrier, ReduceOp::sum, -1, {&six, &twelve});
  CHECK(barrier.error.empty());
  CHECK(barrier.out.size() == 2);
  CHECK(barrier.out[1]->empty());
}
