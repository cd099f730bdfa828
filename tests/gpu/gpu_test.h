// Helpers of the GPU tests (built only when the GPU backend is, cmake/cuda.cmake): skip with one
// line and exit 77 (ctest's SKIP_RETURN_CODE) where no CUDA device exists, register the backend
// where one does, and compare a cuda result with the CPU op's result element by element.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "engine/ops/cuda/cuda_ops.h"
#include "engine/tensor.h"

namespace tpsp::gpu_test {

/// Exits 77 with "SKIPPED: no CUDA device (<why>)" when no device is visible; otherwise registers the
/// CUDA backend (device 0) so that cuda tensors and ops work.
inline void require_gpu() {
  std::string why;
  if (cuda::device_count(&why) == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n", why.c_str());
    std::fflush(stdout);
    std::_Exit(77);
  }
  cuda::register_backend(0);
}

/// A cpu tensor uniform in [lo, hi) from a fixed-seed mt19937.
inline Tensor rand_cpu(const Shape& shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = dist(gen);
  return t;
}

/// Checks |got − want| <= atol + rtol·|want| for every element (got may be a cuda tensor; both are
/// compared as f32), and the shapes; reports the worst element and its difference.
inline void expect_close(const Tensor& got_any, const Tensor& want_any, double atol, double rtol,
                         const char* what) {
  const Tensor got = got_any.to(Device::cpu).to(DType::f32), want = want_any.to(Device::cpu).to(DType::f32);
  REQUIRE_MESSAGE(got.shape() == want.shape(), what, ": shape ", shape_str(got.shape()), " vs ",
                  shape_str(want.shape()));
  int64_t worst = -1;
  double worst_excess = 0.0, worst_diff = 0.0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.at(i), w = want.at(i);
    const double diff = std::fabs(g - w), excess = diff - (atol + rtol * std::fabs(w));
    const bool both_nan = std::isnan(g) && std::isnan(w);
    if (!both_nan && (std::isnan(diff) || excess > worst_excess)) {
      worst = i;
      worst_excess = std::isnan(diff) ? INFINITY : excess;
      worst_diff = diff;
    }
  }
  CHECK_MESSAGE(worst < 0, what, ": element ", worst, " differs by ", worst_diff, " (cuda ",
                worst < 0 ? 0.0 : got.at(worst), ", cpu ", worst < 0 ? 0.0 : want.at(worst), "; atol ", atol,
                ", rtol ", rtol, ")");
}

/// Checks the two tensors have the same bits (f32 or bf16 storage compared byte for byte).
inline void expect_identical(const Tensor& got_any, const Tensor& want_any, const char* what) {
  const Tensor got = got_any.to(Device::cpu), want = want_any.to(Device::cpu);
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  int64_t first = -1;
  const auto* a = static_cast<const unsigned char*>(got.raw_data());
  const auto* b = static_cast<const unsigned char*>(want.raw_data());
  const std::size_t es = dtype_size(got.dtype());
  for (int64_t i = 0; i < got.numel() && first < 0; ++i)
    for (std::size_t k = 0; k < es; ++k)
      if (a[static_cast<std::size_t>(i) * es + k] != b[static_cast<std::size_t>(i) * es + k]) first = i;
  CHECK_MESSAGE(first < 0, what, ": element ", first, " differs (cuda ", first < 0 ? 0.f : got.value(first),
                ", cpu ", first < 0 ? 0.f : want.value(first), ")");
}

}  // namespace tpsp::gpu_test
