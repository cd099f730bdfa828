// Tensor storage on the GPU: round trips, conversions and copies on the device equal the host's bit
// for bit; host element access to a cuda tensor is refused.
#include <doctest/doctest.h>

#include <string>

#include "engine/bf16.h"
#include "engine/error.h"
#include "tests/gpu/gpu_test.h"

using namespace tpsp;
using gpu_test::expect_identical;
using gpu_test::rand_cpu;

TEST_CASE("tensor: cpu -> cuda -> cpu round trip, f32 and bf16, views and clones") {
  gpu_test::require_gpu();
  const Tensor host = rand_cpu({6, 5, 7}, 1, -3.f, 3.f);
  const Tensor dev = host.to(Device::cuda);
  CHECK(dev.device() == Device::cuda);
  CHECK(dev.to(Device::cuda).shares_storage_with(dev));  // same device: the same handle
  expect_identical(dev.to(Device::cpu), host, "f32 round trip");
  expect_identical(dev.clone(), host, "clone on the device");
  expect_identical(dev.slice0(2, 5), host.slice0(2, 5), "slice0 view");
  expect_identical(dev.reshape({30, 7}), host.reshape({30, 7}), "reshape view");
  // Conversions on the device round like the host's (nearest even), and widen exactly.
  expect_identical(dev.to(DType::bf16), host.to(DType::bf16), "f32 -> bf16 on the device");
  expect_identical(host.to(DType::bf16).to(Device::cuda).to(DType::f32), host.to(DType::bf16).to(DType::f32),
                   "bf16 -> f32 on the device");
  // copy_from across devices with a dtype change.
  Tensor into(host.shape(), DType::bf16, Device::cuda);
  into.copy_from(host);
  expect_identical(into, host.to(DType::bf16), "copy_from cpu f32 into cuda bf16");
  Tensor back(host.shape());
  back.copy_from(dev);
  expect_identical(back, host, "copy_from cuda into cpu");
}

TEST_CASE("tensor: zeros, fill, empty, narrow_copy and cat on the device equal the host's") {
  gpu_test::require_gpu();
  expect_identical(Tensor({4, 3}, DType::f32, Device::cuda), Tensor({4, 3}), "zero-filled constructor");
  Tensor f({9}, DType::bf16, Device::cuda);
  f.fill(1.3f);
  Tensor hf({9}, DType::bf16);
  hf.fill(1.3f);
  expect_identical(f, hf, "fill bf16");
  CHECK(Tensor::empty({3, 2}, DType::f32, Device::cuda).device() == Device::cuda);
  const Tensor host = rand_cpu({3, 8, 5}, 2);
  const Tensor dev = host.to(Device::cuda);
  expect_identical(dev.narrow_copy(1, 2, 4), host.narrow_copy(1, 2, 4), "narrow_copy dim 1");
  expect_identical(dev.narrow_copy(2, 1, 3), host.narrow_copy(2, 1, 3), "narrow_copy dim 2");
  const Tensor other = rand_cpu({3, 2, 5}, 3);
  expect_identical(cat({dev, other.to(Device::cuda)}, 1), cat({host, other}, 1), "cat dim 1");
  CHECK_THROWS_AS(cat({dev, host}, 0), ShapeError);  // parts on two devices
}

TEST_CASE("tensor: host element access to a cuda tensor is refused with the rule") {
  gpu_test::require_gpu();
  Tensor dev({2, 3}, DType::f32, Device::cuda);
  try {
    (void)dev.data();
    FAIL("data() on a cuda tensor did not throw");
  } catch (const ShapeError& e) {
    CHECK(
        std::string(e.what()) ==
        "data(): the tensor [2, 3] is on cuda; its elements cannot be read or written from the host (copy it "
        "with to(Device::cpu))");
  }
  CHECK_THROWS_AS((void)dev.at(0), ShapeError);
  const Tensor bf = dev.to(DType::bf16);
  CHECK_THROWS_AS((void)bf.at(1), ShapeError);
  CHECK(dev.raw_data() != nullptr);  // the device pointer, for kernels and transports
}
