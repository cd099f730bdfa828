// GPU backend tests: run where a CUDA device exists, skip with one clear line where none does.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#ifdef TPSP_HAVE_CUDA
#include "engine/ops/cuda/cuda_ops.h"
#include "engine/ops/matmul.h"
#include "engine/random/init.h"
#endif

TEST_CASE("gpu: cuBLAS linear equals the CPU linear") {
#ifndef TPSP_HAVE_CUDA
  std::puts("SKIPPED: this build has no GPU backend (nvcc was not found at configure time)");
  std::fflush(stdout);
  std::_Exit(77);  // ctest: SKIP_RETURN_CODE
#else
  std::string why;
  if (tpsp::cuda::device_count(&why) == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n", why.c_str());
    std::fflush(stdout);
    std::_Exit(77);  // ctest: SKIP_RETURN_CODE
  }
  tpsp::Tensor x({5, 3, 24}), w({36, 24}), b({36});
  tpsp::random::init_normal(x, 1, "x", 1.f);
  tpsp::random::init_normal(w, 1, "w", 0.2f);
  tpsp::random::init_normal(b, 1, "b", 1.f);
  tpsp::Tensor want = tpsp::ops::matmul_forward(x, w);
  tpsp::ops::bias_add_forward(want, b);
  const tpsp::Tensor got = tpsp::cuda::linear_forward(x, w, b);
  REQUIRE(got.shape() == want.shape());
  // f32 sums of 24 products in another order (and TF32 is off for sgemm by default): 1e-5 relative.
  for (int64_t i = 0; i < got.numel(); ++i)
    CHECK(std::fabs(got.at(i) - want.at(i)) <= 1e-5 + 1e-5 * std::fabs(want.at(i)));
#endif
}
