// Each CUDA op against its CPU op on small random inputs (engine/ops/*.h, dispatched by device).
// Tolerances, f32 (docs/tolerances.md): the CPU and the GPU sum in different orders, so a sum of k
// products of magnitude ≤ 1 differs by about k·2⁻²⁴ ≈ 4e-6 at k = 64 (GEMMs, attention: 1e-5
// absolute and relative); GELU's tanh is the CPU's rational (≤ 3.6e-7 from tanhf) against tanhf;
// softmax's exp is a polynomial within 1 ulp of expf against expf (1e-6); reductions the CPU and
// GPU both do in double and round once (LayerNorm statistics, bias and LayerNorm parameter
// gradients, cross entropy, RMSNorm's statistics and gradients) differ by at most an ulp or two (1e-6
// relative). Ops that add the same floats in the same order (embedding, element-wise adds, AdamW's IEEE
// sequence, RMSNorm's dweight from the same rstd) are bit-identical.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/ops/ops.h"
#include "engine/ops/rmsnorm.h"
#include "tests/gpu/gpu_test.h"

using namespace tpsp;
using gpu_test::expect_close;
using gpu_test::expect_identical;
using gpu_test::rand_cpu;

namespace {
Tensor dev(const Tensor& t) {
  return t.to(Device::cuda);
}
}  // namespace

TEST_CASE("ops: matmul forward, dgrad, wgrad (β = 1 accumulation) and backward, f32") {
  gpu_test::require_gpu();
  const Tensor x = rand_cpu({7, 3, 64}, 1), w = rand_cpu({40, 64}, 2), dy = rand_cpu({7, 3, 40}, 3);
  expect_close(ops::matmul_forward(dev(x), dev(w)), ops::matmul_forward(x, w), 1e-5, 1e-5, "forward");
  expect_close(ops::matmul_dgrad(dev(dy), dev(w)), ops::matmul_dgrad(dy, w), 1e-5, 1e-5, "dgrad");
  Tensor dw_cpu = rand_cpu({40, 64}, 4);  // a gradient buffer that already holds a micro-batch's sum
  Tensor dw_dev = dev(dw_cpu);
  ops::matmul_wgrad(dy, x, dw_cpu);
  ops::matmul_wgrad(dev(dy), dev(x), dw_dev);
  expect_close(dw_dev, dw_cpu, 1e-5, 1e-5, "wgrad accumulates");
  const ops::MatmulGrads g = ops::matmul_backward(dev(dy), dev(x), dev(w));
  const ops::MatmulGrads want = ops::matmul_backward(dy, x, w);
  expect_close(g.dx, want.dx, 1e-5, 1e-5, "backward dx");
  expect_close(g.dw, want.dw, 1e-5, 1e-5, "backward dw");
  CHECK_FALSE(ops::matmul_backward(dev(dy), dev(x), dev(w), false, true).dx.defined());
  CHECK_THROWS_AS(ops::matmul_forward(dev(x), w), ShapeError);  // one input on each device
}

TEST_CASE("ops: matmul with bf16 operands (cublasGemmEx, f32 accumulation) equals the CPU's bf16 matmul") {
  gpu_test::require_gpu();
  const Tensor x = rand_cpu({12, 48}, 5).to(DType::bf16), w = rand_cpu({24, 48}, 6).to(DType::bf16);
  const Tensor y = ops::matmul_forward(dev(x), dev(w));
  CHECK(y.dtype() == DType::bf16);
  // Both accumulate the exact bf16 products in f32 and round once to bf16: one bf16 ulp (2⁻⁷ relative)
  // where the f32 sums straddle a rounding boundary.
  expect_close(y, ops::matmul_forward(x, w), 1e-5, 1.0 / 128, "bf16 forward");
  Tensor dw_cpu({24, 48}), dw_dev({24, 48}, DType::f32, Device::cuda);
  const Tensor dy = rand_cpu({12, 24}, 7).to(DType::bf16);
  ops::matmul_wgrad(dy, x, dw_cpu);
  ops::matmul_wgrad(dev(dy), dev(x), dw_dev);
  expect_close(dw_dev, dw_cpu, 1e-5, 1e-5, "bf16 wgrad into an f32 buffer");
}

TEST_CASE("ops: bias, add, scale and GELU") {
  gpu_test::require_gpu();
  const Tensor y0 = rand_cpu({5, 4, 33}, 8), b = rand_cpu({33}, 9);
  Tensor y_cpu = y0.clone(), y_dev = dev(y0);
  ops::bias_add_forward(y_cpu, b);
  ops::bias_add_forward(y_dev, dev(b));
  expect_identical(y_dev, y_cpu, "bias_add_forward");
  expect_close(ops::bias_add_backward(dev(y0)), ops::bias_add_backward(y0), 1e-6, 1e-6, "bias_add_backward");
  expect_identical(ops::add(dev(y0), dev(y_cpu)), ops::add(y0, y_cpu), "add");
  Tensor a_cpu = y0.clone(), a_dev = dev(y0);
  ops::add_(a_cpu, y_cpu);
  ops::add_(a_dev, dev(y_cpu));
  ops::scale_(a_cpu, 0.37f);
  ops::scale_(a_dev, 0.37f);
  expect_identical(a_dev, a_cpu, "add_ then scale_");
  const Tensor x = rand_cpu({9, 50}, 10, -4.f, 4.f), dy = rand_cpu({9, 50}, 11);
  expect_close(ops::gelu_forward(dev(x)), ops::gelu_forward(x), 2e-6, 1e-6, "gelu_forward");
  expect_close(ops::gelu_backward(dev(dy), dev(x)), ops::gelu_backward(dy, x), 5e-6, 1e-6, "gelu_backward");
  // A bf16 input is widened on the device and the result rounded once, as on the CPU.
  expect_close(ops::gelu_forward(dev(x.to(DType::bf16))), ops::gelu_forward(x.to(DType::bf16)), 1e-5,
               1.0 / 128, "gelu_forward bf16");
}

TEST_CASE("ops: LayerNorm forward and backward") {
  gpu_test::require_gpu();
  const Tensor x = rand_cpu({6, 2, 96}, 12, -2.f, 3.f), g = rand_cpu({96}, 13), b = rand_cpu({96}, 14);
  const Tensor dy = rand_cpu({6, 2, 96}, 15);
  const ops::LayerNormOut o = ops::layernorm_forward(dev(x), dev(g), dev(b));
  const ops::LayerNormOut want = ops::layernorm_forward(x, g, b);
  expect_close(o.y, want.y, 1e-5, 1e-5, "y");
  expect_close(o.mean, want.mean, 1e-7, 1e-6, "mean");
  expect_close(o.rstd, want.rstd, 1e-7, 1e-6, "rstd");
  const ops::LayerNormGrads gr = ops::layernorm_backward(dev(dy), dev(x), dev(g), o.mean, o.rstd);
  const ops::LayerNormGrads wg = ops::layernorm_backward(dy, x, g, want.mean, want.rstd);
  expect_close(gr.dx, wg.dx, 1e-5, 1e-5, "dx");
  expect_close(gr.dgamma, wg.dgamma, 1e-5, 1e-6, "dgamma");
  expect_close(gr.dbeta, wg.dbeta, 1e-5, 1e-6, "dbeta");
}

TEST_CASE("ops: RMSNorm forward and backward (dweight accumulates into its buffer)") {
  gpu_test::require_gpu();
  const Tensor x = rand_cpu({6, 2, 80}, 30, -2.f, 3.f), w = rand_cpu({80}, 31, 0.5f, 1.5f);
  const Tensor dy = rand_cpu({6, 2, 80}, 32), dw0 = rand_cpu({80}, 33);
  const ops::RMSNormOut o = ops::rmsnorm_forward(dev(x), dev(w), 1e-5f);
  const ops::RMSNormOut want = ops::rmsnorm_forward(x, w, 1e-5f);
  // rstd: the squares summed in double on both (in another order), rounded once: ≤ 1 ulp. y = x·rstd·w
  // is two products on both (nothing to contract): ≤ 3 ulp.
  expect_close(o.y, want.y, 1e-6, 1e-6, "y");
  expect_close(o.rstd, want.rstd, 1e-7, 1e-6, "rstd");
  Tensor dw_cpu = dw0.clone(), dw_dev = dev(dw0);  // buffers that already hold a micro-batch's sum
  const Tensor dx = ops::rmsnorm_backward(dev(dy), dev(x), dev(w), o.rstd, dw_dev);
  const Tensor dx_want = ops::rmsnorm_backward(dy, x, w, want.rstd, dw_cpu);
  // dx = rstd·(dx̂ − x̂·m): rstd and m ≤ 1 ulp apart, the rest the CPU's roundings (no FMA); atol where
  // the difference cancels. dweight: double column sums of x̂ that are ≤ 1 ulp apart.
  expect_close(dx, dx_want, 1e-6, 1e-6, "dx");
  expect_close(dw_dev, dw_cpu, 1e-6, 1e-6, "dweight accumulates");
  // From the same rstd, dweight sums the same f32 terms in the same (row) order: the same bits.
  Tensor same_cpu = dw0.clone(), same_dev = dev(dw0);
  ops::rmsnorm_backward(dy, x, w, want.rstd, same_cpu);
  ops::rmsnorm_backward(dev(dy), dev(x), dev(w), dev(want.rstd), same_dev);
  expect_identical(same_dev, same_cpu, "dweight from the CPU's rstd");
  const Tensor empty = ops::rmsnorm_forward(dev(Tensor({0, 80})), dev(w)).y;  // no launch for zero rows
  CHECK(empty.shape() == Shape{0, 80});
}

TEST_CASE("ops: softmax forward and backward, with an all -inf row") {
  gpu_test::require_gpu();
  Tensor x = rand_cpu({4, 3, 70}, 16, -5.f, 5.f);
  for (int64_t j = 0; j < 70; ++j) x.at({1, 2, j}) = -std::numeric_limits<float>::infinity();
  const Tensor y = ops::softmax_forward(dev(x)), want = ops::softmax_forward(x);
  expect_close(y, want, 1e-6, 1e-5, "softmax_forward");
  const Tensor dy = rand_cpu({4, 3, 70}, 17);
  expect_close(ops::softmax_backward(dev(dy), y), ops::softmax_backward(dy, want), 1e-6, 1e-5,
               "softmax_backward");
}

TEST_CASE("ops: token and position embeddings, vocab-parallel slice, forward and backward") {
  gpu_test::require_gpu();
  TokenBatch ids{3, 5, {0, 4, 9, 2, 2, 7, 1, 8, 8, 3, 5, 6, 0, 9, 4}};
  const Tensor wte = rand_cpu({5, 16}, 18);  // rows [5, 10) of a vocabulary of 10
  expect_identical(ops::embedding_forward(ids, dev(wte), 5), ops::embedding_forward(ids, wte, 5), "forward");
  const Tensor dout = rand_cpu({5, 3, 16}, 19);
  expect_identical(ops::embedding_backward(dev(dout), ids, 5, 5), ops::embedding_backward(dout, ids, 5, 5),
                   "backward");
  const Tensor wpe = rand_cpu({12, 16}, 20);
  Tensor x_cpu = dout.clone(), x_dev = dev(dout);
  ops::position_embedding_add(x_cpu, wpe, 4);
  ops::position_embedding_add(x_dev, dev(wpe), 4);
  expect_identical(x_dev, x_cpu, "position_embedding_add");
  expect_identical(ops::position_embedding_backward(dev(dout), 12, 4),
                   ops::position_embedding_backward(dout, 12, 4), "position_embedding_backward");
}

TEST_CASE(
    "ops: cross entropy with label smoothing and ignored rows, and a NaN logit named by row and column") {
  gpu_test::require_gpu();
  const Tensor logits = rand_cpu({6, 37}, 21, -6.f, 6.f);
  const std::vector<int64_t> targets{3, kIgnoreIndex, 36, 0, 17, kIgnoreIndex};
  for (const float alpha : {0.f, 0.1f}) {
    const ops::CrossEntropyOut o = ops::cross_entropy_forward(dev(logits), targets, alpha);
    const ops::CrossEntropyOut want = ops::cross_entropy_forward(logits, targets, alpha);
    CHECK(o.n_valid == want.n_valid);
    CHECK(o.loss == doctest::Approx(want.loss).epsilon(1e-6));
    expect_close(o.losses, want.losses, 1e-7, 1e-6, "losses");
    expect_close(ops::cross_entropy_backward(dev(logits), targets, 2.f, alpha),
                 ops::cross_entropy_backward(logits, targets, 2.f, alpha), 1e-7, 1e-6, "dlogits");
  }
  Tensor bad = logits.clone();
  bad.at({4, 11}) = std::numeric_limits<float>::quiet_NaN();
  std::string cpu_msg, gpu_msg;
  try {
    ops::cross_entropy_forward(bad, targets);
  } catch (const NumericError& e) {
    cpu_msg = e.what();
  }
  try {
    ops::cross_entropy_forward(dev(bad), targets);
  } catch (const NumericError& e) {
    gpu_msg = e.what();
  }
  CHECK(cpu_msg.find("at row 4, column 11 is not a finite number") != std::string::npos);
  CHECK(gpu_msg == cpu_msg);
  CHECK_THROWS_AS(ops::cross_entropy_forward(dev(logits), {3, 1, 37, 0, 1, 1}), ShapeError);  // target 37 ≥ V
}

TEST_CASE("ops: AdamW steps are bit-identical to the CPU's (the same IEEE operations in the same order)") {
  gpu_test::require_gpu();
  const Tensor p0 = rand_cpu({1003}, 22);
  Tensor p_cpu = p0.clone(), p_dev = dev(p0);
  ops::AdamWState s_cpu, s_dev;
  const ops::AdamWConfig cfg{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  for (int64_t t = 1; t <= 5; ++t) {
    const Tensor g = rand_cpu({1003}, 100 + static_cast<uint32_t>(t), -2.f, 2.f);
    ops::adamw_step(p_cpu, g, s_cpu, t, cfg);
    ops::adamw_step(p_dev, dev(g), s_dev, t, cfg);
  }
  CHECK(s_dev.m.device() == Device::cuda);
  expect_identical(p_dev, p_cpu, "param");
  expect_identical(s_dev.m, s_cpu.m, "m");
  expect_identical(s_dev.v, s_cpu.v, "v");
}

TEST_CASE("ops: swiglu and rope against the CPU (rope's rotation bit for bit: the host's cos/sin table)") {
  gpu_test::require_gpu();
  const Tensor x = rand_cpu({7, 3, 2 * 40}, 61), dy = rand_cpu({7, 3, 40}, 62);
  // σ through expf on both devices (the GPU's within 2 ulp of glibc's): a few ulp of |y| ≤ 1.
  expect_close(ops::swiglu_forward(dev(x)), ops::swiglu_forward(x), 1e-6, 1e-6, "swiglu forward");
  expect_close(ops::swiglu_backward(dev(dy), dev(x)), ops::swiglu_backward(dy, x), 1e-6, 1e-6,
               "swiglu backward");
  const std::vector<int64_t> positions{3, 4, 5, 6, 0, 1, 2};  // a shard at offset 3, then a packed restart
  expect_identical(ops::rope_forward(dev(x), positions, 16), ops::rope_forward(x, positions, 16),
                   "rope forward");
  expect_identical(ops::rope_backward(dev(x), positions, 16), ops::rope_backward(x, positions, 16),
                   "rope backward");
}
