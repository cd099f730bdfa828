// lab04's rings (engine/tensor_parallel/ring_exchange.h) against the collectives they replace, at
// tp=3 (where a wrong direction or chunk order shows): values equal to gemm(all_gather(x)) and
// reduce_scatter(gemm(x)) exactly on integer inputs (every sum is exact in float32), and the record
// holds tp−1 sends to rank r+1 and tp−1 recvs from rank r−1 of one chunk each, nothing else.
#include <doctest/doctest.h>

#include "engine/comm/process_group.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/matmul.h"
#include "engine/tensor_parallel/ring_exchange.h"
#include "tests/tp/tp_util.h"

using namespace tpsp;
using namespace tpsp::testing;

namespace {

/// A tensor of `shape` holding small integers in [−2, 2] that depend on `salt`.
Tensor ints(const Shape& shape, int salt) {
  Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.at(i) = static_cast<float>((i * 7 + salt) % 5) - 2;
  return t;
}

/// Each call: tp−1 sends to r+1 and tp−1 recvs from r−1, each of `bytes`; nothing else.
void expect_ring(trace::Recorder& rec, int r, int n, uint64_t bytes) {
  int sends = 0, recvs = 0;
  for (const trace::CommRecord& c : rec.records()) {
    expect(c.op == comm::OpKind::send || c.op == comm::OpKind::recv, "a call other than send/recv");
    expect(c.tensor_bytes == bytes, "a chunk of " + std::to_string(c.tensor_bytes) + " bytes");
    if (c.op == comm::OpKind::send) ++sends, expect(c.peer == (r + 1) % n, "send not to rank r+1");
    if (c.op == comm::OpKind::recv) ++recvs, expect(c.peer == (r + n - 1) % n, "recv not from rank r-1");
  }
  expect(sends == n - 1 && recvs == n - 1, "not tp-1 sends and tp-1 recvs");
}

}  // namespace

TEST_CASE(
    "ring: all_gather_matmul at tp=3 equals the GEMM of the gathered input, with tp-1 send/recv pairs") {
  auto fn = [](int) {
    auto tp = comm::init_from_env();
    const int n = tp->size(), r = tp->rank();
    const Tensor x = ints({6, 2, 4}, 1), w = ints({5, 4}, 2);
    const Tensor shard = x.slice0(r * 2, (r + 1) * 2).clone();
    tp->recorder().clear();
    const auto got = tensor_parallel::all_gather_matmul(
        shard, [&](const Tensor& rows) { return ops::matmul_forward(rows, w); }, *tp, "t", true);
    expect_close(got.out, ops::matmul_forward(x, w), 0, 0, "out");
    expect_close(got.gathered, x, 0, 0, "gathered");
    expect_ring(tp->recorder(), r, n, 2 * 2 * 4 * 4);
  };
  const std::string f = failures(run_ranks(3, fn, 60));
  CHECK_MESSAGE(f.empty(), f);
}

TEST_CASE(
    "ring: matmul_reduce_scatter at tp=3 equals reduce_scatter of the GEMM, with tp-1 send/recv pairs") {
  auto fn = [](int) {
    auto tp = comm::init_from_env();
    const int n = tp->size(), r = tp->rank();
    const Tensor w = ints({5, 4}, 3);
    const Tensor x = ints({6, 2, 4}, 10 + r);  // each rank's own partial input
    Tensor want({6, 2, 5});
    for (int k = 0; k < n; ++k) ops::add_(want, ops::matmul_forward(ints({6, 2, 4}, 10 + k), w));
    tp->recorder().clear();
    const Tensor got = tensor_parallel::matmul_reduce_scatter(
        x, [&](const Tensor& rows) { return ops::matmul_forward(rows, w); }, *tp, "t");
    expect_close(got, want.slice0(r * 2, (r + 1) * 2).clone(), 0, 0, "this rank's chunk of the sum");
    expect_ring(tp->recorder(), r, n, 2 * 2 * 5 * 4);
  };
  const std::string f = failures(run_ranks(3, fn, 60));
  CHECK_MESSAGE(f.empty(), f);
}

TEST_CASE("ring: matmul_reduce_scatter refuses s=3 at tp=2 before any communication") {
  auto fn = [](int) {
    auto tp = comm::init_from_env();
    std::string msg = "no error";
    try {
      tensor_parallel::matmul_reduce_scatter(
          Tensor({3, 1, 4}), [](const Tensor& t) { return t; }, *tp, "fc2.rs");
    } catch (const std::exception& e) {
      msg = e.what();
    }
    expect(msg.find("fc2.rs: s=3 is not divisible by tp=2") != std::string::npos, "message: " + msg);
    expect(tp->recorder().size() == 0, "a call was made before the error");
  };
  const std::string f = failures(run_ranks(2, fn, 60));
  CHECK_MESSAGE(f.empty(), f);
}
