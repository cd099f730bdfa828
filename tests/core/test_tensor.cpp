#include <doctest/doctest.h>

#include <string>

#include "engine/error.h"
#include "engine/tensor.h"

using namespace tpsp;

TEST_CASE("slice0 is a view sharing storage") {
  Tensor t = Tensor::from({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  Tensor v = t.slice0(1, 3);
  CHECK(v.shape() == Shape{2, 2});
  CHECK(v.shares_storage_with(t));
  CHECK(v.at(0) == 2.f);
  v.at(0) = 42.f;
  CHECK(t.at({1, 0}) == 42.f);
}

TEST_CASE("shape errors name both shapes") {
  Tensor a({2, 3}), b({3, 2});
  try {
    check_same_shape(a, b, "add");
    FAIL("no error");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()) == "add: shapes [2, 3] and [3, 2] differ");
  }
  CHECK_THROWS_AS(a.slice0(1, 3), ShapeError);
  CHECK_THROWS_AS(a.reshape({5}), ShapeError);
  CHECK_THROWS_AS(Tensor({2}, DType::f16), ShapeError);
  CHECK_THROWS_AS(Tensor({2}, DType::f32, Device::cuda), ShapeError);
}

TEST_CASE(
    "without a registered GPU backend, cuda storage and ops are refused naming the device and the rule") {
  // test_core never links the GPU backend (tpsp_cuda), so this holds in every build.
  const std::string rule =
      "tensor storage on cuda is not available in this process (no cuda backend is registered: a build "
      "without "
      "the GPU backend, or tpsp::cuda::register_backend() was not called)";
  try {
    Tensor t({2}, DType::f32, Device::cuda);
    FAIL("a cuda tensor was created");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()) == "Tensor: " + rule);
  }
  try {
    (void)Tensor::from({2}, {1.f, 2.f}).to(Device::cuda);
    FAIL("a cpu tensor was moved to cuda");
  } catch (const ShapeError& e) {
    CHECK(std::string(e.what()) == "Tensor: " + rule);
  }
  CHECK_THROWS_AS(Tensor::empty({3}, DType::bf16, Device::cuda), ShapeError);
  const Tensor cpu = Tensor::from({2}, {1.f, 2.f});
  CHECK(cpu.to(Device::cpu).shares_storage_with(cpu));  // to(its own device) is the same handle
}

TEST_CASE("cat and narrow_copy along the last dim are inverse") {
  Tensor t = Tensor::from({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor a = t.narrow_copy(1, 0, 1), b = t.narrow_copy(1, 1, 2);
  CHECK(a.shape() == Shape{2, 1});
  CHECK(b.at({1, 1}) == 5.f);
  Tensor c = cat({a, b}, 1);
  for (int64_t i = 0; i < 6; ++i) CHECK(c.at(i) == t.at(i));
  Tensor r = cat({t.slice0(1, 2), t.slice0(0, 1)}, 0);
  CHECK(r.at(0) == 3.f);
  CHECK(r.at(3) == 0.f);
}
