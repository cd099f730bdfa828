// "CUDA tensors over Gloo" (engine/comm/cuda/host_staged_backend.h): two ranks, threads of this
// process sharing the one GPU, each with a real Gloo tcp world (in-process HashStore), wrapped in
// the host-staged backend under the usual ProcessGroup. Every collective on cuda tensors must give
// the bits the same collective gives on the host: with two ranks, a sum is a + b in either order.
#include <doctest/doctest.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>

#include <exception>
#include <functional>
#include <thread>
#include <vector>

#include "engine/comm/cuda/host_staged_backend.h"
#include "engine/comm/gloo/gloo_backend.h"
#ifdef TPSP_HAVE_NCCL
#include "engine/comm/nccl/nccl_backend.h"
#endif
#include "engine/comm/process_group.h"
#include "engine/error.h"
#include "tests/gpu/gpu_test.h"
#include "tests/support/all_to_all_cases.h"

using namespace tpsp;
using gpu_test::expect_identical;
using gpu_test::rand_cpu;

namespace {

/// Runs body(world) on two threads, each a rank of a host-staged Gloo world; rethrows a rank's error.
void run_two_staged_ranks(const std::function<void(comm::ProcessGroup&)>& body,
                          const comm::GroupOptions& options) {
  auto store = std::make_shared<gloo::rendezvous::HashStore>();
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  std::vector<std::exception_ptr> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        auto gloo = comm::GlooBackend::connect_world(r, 2, store, gloo::transport::tcp::CreateDevice(attr),
                                                     "gputest", options.timeout);
        auto world = comm::ProcessGroup::create_world(cuda::host_staged(std::move(gloo)), options);
        body(*world);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

TEST_CASE("comm: host-staged collectives on cuda tensors equal the host results") {
  gpu_test::require_gpu();
  const Tensor in0 = rand_cpu({4, 6}, 40), in1 = rand_cpu({4, 6}, 41);
  comm::GroupOptions options;
  options.timeout = std::chrono::milliseconds(30000);
  options.check_buffers = true;  // as ./check runs: async outputs read NaN until wait(), inputs guarded
  run_two_staged_ranks(
      [&](comm::ProcessGroup& world) {
        const int r = world.rank();
        const Tensor mine = r == 0 ? in0 : in1;
        CHECK(std::string(world.backend().name()) == "cuda-over-gloo");

        Tensor t = mine.to(Device::cuda);
        world.all_reduce(t);
        Tensor want = in0.clone();
        for (int64_t i = 0; i < want.numel(); ++i) want.data()[i] += in1.data()[i];
        expect_identical(t, want, "all_reduce f32");

        Tensor tb = mine.to(DType::bf16).to(Device::cuda);
        world.all_reduce(tb);  // widened to f32 on the device, reduced, rounded once
        Tensor wb = in0.to(DType::bf16).to(DType::f32);
        const Tensor w1 = in1.to(DType::bf16).to(DType::f32);
        for (int64_t i = 0; i < wb.numel(); ++i) wb.data()[i] += w1.data()[i];
        expect_identical(tb, wb.to(DType::bf16), "all_reduce bf16");

        expect_identical(world.all_gather(mine.to(Device::cuda), 0), cat({in0, in1}, 0), "all_gather dim 0");
        expect_identical(world.all_gather(mine.to(Device::cuda), 1), cat({in0, in1}, 1), "all_gather dim 1");
        Tensor out;
        world.all_gather_async(mine.to(Device::cuda), out, 0)->wait();  // staged output, delivered at wait()
        CHECK(out.device() == Device::cuda);
        expect_identical(out, cat({in0, in1}, 0), "all_gather_async");

        const Tensor sum = want;
        expect_identical(world.reduce_scatter(mine.to(Device::cuda), 0), sum.slice0(2 * r, 2 * r + 2),
                         "reduce_scatter dim 0");
        expect_identical(world.reduce_scatter(mine.to(Device::cuda), 1), sum.narrow_copy(1, 3 * r, 3),
                         "reduce_scatter dim 1");

        Tensor bc = mine.to(Device::cuda);
        world.broadcast(bc, 1);
        expect_identical(bc, in1, "broadcast from rank 1");

        const Tensor a2a = world.all_to_all(mine.to(Device::cuda));
        expect_identical(a2a, cat({in0.slice0(2 * r, 2 * r + 2), in1.slice0(2 * r, 2 * r + 2)}, 0),
                         "all_to_all");
        testing::check_uneven_all_to_all(world, Device::cuda);  // split sizes, pairs with no rows

        Tensor got({4, 6}, DType::f32, Device::cuda);
        if (r == 0) world.send(mine.to(Device::cuda), 1);
        if (r == 1) {
          world.recv(got, 0);
          expect_identical(got, in0, "send/recv");
        }
        world.barrier();
      },
      options);
}

#ifdef TPSP_HAVE_NCCL
TEST_CASE("comm: NCCL at world 1: every call moves the bytes, host buffers are staged, new_group splits") {
  gpu_test::require_gpu();
  const std::chrono::milliseconds timeout(30000);
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto bootstrap =
      comm::GlooBackend::connect_world(0, 1, std::make_shared<gloo::rendezvous::HashStore>(),
                                       gloo::transport::tcp::CreateDevice(attr), "nccl1", timeout);
  std::unique_ptr<comm::Backend> nccl = cuda::nccl_world(*bootstrap, timeout);
  CHECK(std::string(nccl->name()) == "nccl");
  CHECK(nccl->accepts(Device::cuda));
  CHECK_FALSE(nccl->accepts(Device::cpu));
  const comm::TransportCall call{0, timeout};
  const Tensor host = rand_cpu({3, 8}, 50);
  // At world 1 a sum, a gather, an exchange and a broadcast leave the bytes as they were: this checks
  // that each NCCL call is enqueued, ordered after the compute stream and completed.
  Tensor t = host.to(Device::cuda);
  nccl->all_reduce(static_cast<float*>(t.raw_data()), 24, comm::ReduceOp::sum, call);
  expect_identical(t, host, "all_reduce at world 1");
  Tensor out({3, 8}, DType::f32, Device::cuda);
  nccl->all_gather(t.raw_data(), out.raw_data(), t.nbytes(), call);
  expect_identical(out, host, "all_gather at world 1");
  Tensor a2a({3, 8}, DType::f32, Device::cuda);
  nccl->all_to_all(t.raw_data(), a2a.raw_data(), t.nbytes(), call);
  expect_identical(a2a, host, "all_to_all at world 1");
  Tensor a2av({3, 8}, DType::f32, Device::cuda);
  nccl->all_to_all_v(t.raw_data(), {t.nbytes()}, a2av.raw_data(), {t.nbytes()}, call);
  expect_identical(a2av, host, "all_to_all with split sizes at world 1");
  nccl->all_to_all_v(t.raw_data(), {0}, a2av.raw_data(), {0}, call);  // nothing to move: no NCCL call
  Tensor rs({3, 8}, DType::f32, Device::cuda);
  nccl->reduce_scatter(static_cast<const float*>(t.raw_data()), static_cast<float*>(rs.raw_data()), 24,
                       comm::ReduceOp::max, call);
  expect_identical(rs, host, "reduce_scatter at world 1");
  // Host buffers (the protocol's fingerprints) go through device staging.
  float mine[2] = {1.5f, -2.f}, all[2] = {0.f, 0.f};
  nccl->all_gather(mine, all, sizeof(mine), call);
  CHECK(all[0] == 1.5f);
  CHECK(all[1] == -2.f);
  nccl->barrier(call);
  CHECK_THROWS_AS(nccl->send(t.raw_data(), t.nbytes(), 0), ShapeError);  // p2p: not on this backend yet
  // A subgroup is an ncclCommSplit; the group protocol runs over it like over Gloo.
  std::unique_ptr<comm::Backend> child = nccl->new_group({0}, "tp", timeout);
  REQUIRE(child != nullptr);
  CHECK(child->size() == 1);
  auto world = comm::ProcessGroup::create_world(std::move(nccl), comm::GroupOptions{});
  Tensor g = host.to(Device::cuda);
  expect_identical(world->reduce_scatter(g, 0), host, "ProcessGroup reduce_scatter over NCCL");
  const auto tp = world->new_group({0}, "tp");
  REQUIRE(tp != nullptr);
  expect_identical(tp->all_gather(g, 1), host, "all_gather in a subgroup");
}
#endif  // TPSP_HAVE_NCCL
