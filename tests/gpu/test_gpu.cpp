// GPU backend tests: run where a CUDA device exists, skip with one clear line where none does. In a
// build without the GPU backend only this file is compiled, and its one test says so and skips.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

#ifdef TPSP_HAVE_CUDA
#include "engine/ops/matmul.h"
#include "engine/random/init.h"
#include "tests/gpu/gpu_test.h"
#endif

TEST_CASE("cuBLAS linear equals the CPU linear") {
#ifndef TPSP_HAVE_CUDA
  std::puts(
      "SKIPPED: this build has no GPU backend (nvcc was not found at configure time, or TPSP_WITH_CUDA=OFF)");
  std::fflush(stdout);
  std::_Exit(77);  // ctest: SKIP_RETURN_CODE
#else
  tpsp::gpu_test::require_gpu();
  tpsp::Tensor x({5, 3, 24}), w({36, 24}), b({36});
  tpsp::random::init_normal(x, 1, "x", 1.f);
  tpsp::random::init_normal(w, 1, "w", 0.2f);
  tpsp::random::init_normal(b, 1, "b", 1.f);
  tpsp::Tensor want = tpsp::ops::matmul_forward(x, w);
  tpsp::ops::bias_add_forward(want, b);
  const tpsp::Tensor got = tpsp::cuda::linear_forward(x, w, b);
  // f32 sums of 24 products in another order (no TF32: CUBLAS_COMPUTE_32F): 1e-5 relative.
  tpsp::gpu_test::expect_close(got, want, 1e-5, 1e-5, "linear");
#endif
}
