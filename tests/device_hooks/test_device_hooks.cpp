// Tensor's device paths and the ops' device routing, on every machine: a fake "cuda" device whose
// hooks keep the bytes in host memory (malloc, memcpy) is registered, so the engine code a GPU
// build runs (allocation, zero fill, poison, to(Device), copy_from across devices with a dtype
// change, clone, narrow_copy and cat through copy_2d, the refusal of host element access, and the
// dispatcher's device checks) is exercised in CI without a GPU. A binary of its own: the
// registration is process-wide, and test_core checks the refusal without it.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/bf16.h"
#include "engine/device_hooks.h"
#include "engine/error.h"
#include "engine/ops/ops.h"

using namespace tpsp;

namespace {

int g_allocs = 0, g_frees = 0, g_copies_2d = 0;

void* fake_alloc(std::size_t bytes) {
  ++g_allocs;
  return std::malloc(bytes);
}
void fake_free(void* p) noexcept {
  ++g_frees;
  std::free(p);
}
void fake_copy(void* dst, bool, const void* src, bool, std::size_t bytes) {
  std::memmove(dst, src, bytes);
}
void fake_copy_2d(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
                  std::size_t height) {
  ++g_copies_2d;
  for (std::size_t r = 0; r < height; ++r)
    std::memcpy(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
}
void fake_fill(void* dst, DType dt, float value, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (dt == DType::f32)
      static_cast<float*>(dst)[i] = value;
    else
      static_cast<uint16_t*>(dst)[i] = f32_to_bf16(value);
  }
}
void fake_convert(void* dst, DType dst_dt, const void* src, DType src_dt, std::size_t n) {
  REQUIRE(dst_dt != src_dt);
  for (std::size_t i = 0; i < n; ++i) {
    if (dst_dt == DType::bf16)
      static_cast<uint16_t*>(dst)[i] = f32_to_bf16(static_cast<const float*>(src)[i]);
    else
      static_cast<float*>(dst)[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
  }
}

void register_fake_cuda() {
  DeviceHooks h;
  h.alloc = fake_alloc;
  h.free = fake_free;
  h.copy = fake_copy;
  h.copy_2d = fake_copy_2d;
  h.fill = fake_fill;
  h.convert = fake_convert;
  register_device_hooks(Device::cuda, h);
}

/// The elements of a fake-device tensor, through a copy to the CPU.
std::vector<float> values(const Tensor& t) {
  const Tensor c = t.to(Device::cpu).to(DType::f32);
  return std::vector<float>(c.data(), c.data() + c.numel());
}

}  // namespace

TEST_CASE("device tensors: storage, copies across devices and dtypes, views, narrow_copy and cat") {
  register_fake_cuda();
  const Tensor host = Tensor::from({2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12.3f});
  const int allocs = g_allocs;
  Tensor dev = host.to(Device::cuda);
  CHECK(g_allocs == allocs + 1);
  CHECK(dev.device() == Device::cuda);
  CHECK(values(dev) == values(host));
  CHECK(values(Tensor({2, 2}, DType::f32, Device::cuda)) == std::vector<float>(4, 0.f));  // zero-filled
  CHECK(values(dev.slice0(1, 2)) == values(host.slice0(1, 2)));
  CHECK(values(dev.clone()) == values(host));
  CHECK(dev.clone().device() == Device::cuda);
  // f32 → bf16 on the device rounds like the host; a cpu f32 copied into a cuda bf16 tensor too.
  CHECK(values(dev.to(DType::bf16)) == values(host.to(DType::bf16)));
  Tensor into({2, 3, 2}, DType::bf16, Device::cuda);
  into.copy_from(host);
  CHECK(values(into) == values(host.to(DType::bf16)));
  Tensor back({2, 3, 2});
  back.copy_from(into);  // cuda bf16 → cpu f32
  CHECK(values(back) == values(host.to(DType::bf16)));
  const int copies = g_copies_2d;
  CHECK(values(dev.narrow_copy(1, 1, 2)) == values(host.narrow_copy(1, 1, 2)));
  CHECK(values(cat({dev, dev.narrow_copy(1, 0, 1)}, 1)) == values(cat({host, host.narrow_copy(1, 0, 1)}, 1)));
  CHECK(g_copies_2d == copies + 4);  // 2 narrow_copy + 2 parts of cat: device rows move through copy_2d
  Tensor f({3}, DType::bf16, Device::cuda);
  f.fill(0.1f);
  CHECK(values(f) == std::vector<float>(3, bf16_to_f32(f32_to_bf16(0.1f))));
  CHECK_THROWS_AS(cat({dev, host}, 0), ShapeError);
}

TEST_CASE("device tensors: host element access is refused naming the device and the rule") {
  register_fake_cuda();
  Tensor dev({2, 3}, DType::f32, Device::cuda);
  try {
    (void)dev.data();
    FAIL("data() on a cuda tensor did not throw");
  } catch (const ShapeError& e) {
    CHECK(
        std::string(e.what()) ==
        "data(): the tensor [2, 3] is on cuda; its elements cannot be read or written from the host (compute "
        "with the ops, which run on their inputs' device; to(Device::cpu) copies it to the host, at the cost "
        "of "
        "a transfer)");
  }
  CHECK_THROWS_AS((void)dev.at(0), ShapeError);
  CHECK_THROWS_AS((void)dev.to(DType::bf16).at(0), ShapeError);
  CHECK_THROWS_AS((void)dev.data_bf16(), ShapeError);
}

TEST_CASE("device tensors: an op refuses inputs on two devices, and a device without registered ops") {
  register_fake_cuda();
  const Tensor a = Tensor::full({2, 2}, 1.f);
  try {
    (void)ops::add(a, a.to(Device::cuda));
    FAIL("add across devices did not throw");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()) ==
          "add: inputs on cpu and cuda; every tensor of an op must be on one device");
  }
  try {
    (void)ops::gelu_forward(a.to(Device::cuda));
    FAIL("gelu on a device without ops did not throw");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()) ==
          "gelu_forward: a cuda tensor, but no cuda ops are registered in this process (a build without the "
          "GPU "
          "backend, or tpsp::cuda::register_backend() was not called)");
  }
}
