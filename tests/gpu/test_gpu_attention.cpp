// Causal attention and dropout on the GPU against the CPU ops. Dropout masks are drawn by one
// __host__ __device__ function (engine/random/philox_core.h) on both devices, so they are checked
// bit for bit, whole and as a TP/SP shard of a global key. Attention: strided batched cuBLAS GEMMs
// and a softmax with expf against the CPU's per-head sgemm and polynomial exp; sums of s ≤ 24 and
// d = 16 products: 1e-5 absolute and relative (docs/tolerances.md, f32).
#include <doctest/doctest.h>

#include <vector>

#include "engine/ops/ops.h"
#include "tests/gpu/gpu_test.h"

using namespace tpsp;
using gpu_test::expect_close;
using gpu_test::expect_identical;
using gpu_test::rand_cpu;

namespace {

Tensor dev(const Tensor& t) {
  return t.to(Device::cuda);
}

/// Forward and backward of one configuration on both devices, compared.
void compare_attention(const Tensor& qkv, const ops::AttentionOptions& opt, const char* what) {
  const ops::AttentionOut o = ops::attention_forward(dev(qkv), opt);
  const ops::AttentionOut want = ops::attention_forward(qkv, opt);
  expect_close(o.probs, want.probs, 1e-6, 1e-5, what);
  expect_close(o.out, want.out, 1e-5, 1e-5, what);
  const Tensor dout = rand_cpu(want.out.shape(), 31);
  expect_close(ops::attention_backward(dev(dout), dev(qkv), o.probs, opt),
               ops::attention_backward(dout, qkv, want.probs, opt), 1e-5, 1e-5, what);
}

}  // namespace

TEST_CASE("attention: causal, with a key padding mask, with packed sequences, with dropout") {
  gpu_test::require_gpu();
  const int64_t s = 12, b = 2, heads = 3, d = 16;
  const Tensor qkv = rand_cpu({s, b, heads * 3 * d}, 30, -2.f, 2.f);
  ops::AttentionOptions opt;
  opt.heads = heads;
  compare_attention(qkv, opt, "causal");

  Tensor mask = Tensor::full({b, s}, 1.f);
  mask.at({1, 0}) = 0.f;  // row 1's first key is padding: query 0 of that row sees nothing
  mask.at({1, 7}) = 0.f;
  opt.key_padding_mask = mask;
  compare_attention(qkv, opt, "key padding mask (cpu mask)");
  opt.key_padding_mask = dev(mask);  // the mask may live on the device too
  const ops::AttentionOut on_dev = ops::attention_forward(dev(qkv), opt);
  opt.key_padding_mask = mask;
  expect_identical(on_dev.out, ops::attention_forward(dev(qkv), opt).out, "padding mask on either device");
  opt.key_padding_mask = Tensor();

  const Tensor packed = rand_cpu({s, 1, heads * 3 * d}, 32, -2.f, 2.f);
  opt.cu_seqlens = {0, 5, 6, 12};
  compare_attention(packed, opt, "packed sequences (cu_seqlens)");
  opt.cu_seqlens.clear();

  opt.dropout_p = 0.25f;
  opt.dropout_key = ops::DropoutKey{7, 11, {b, 2 * heads, s, s}, {0, heads, 0, 0}};  // TP rank 1 of 2
  compare_attention(qkv, opt, "attention-probability dropout on a head shard");
}

TEST_CASE(
    "attention: grouped-query (4 query heads on 2 and on 1 key/value groups), with padding and dropout") {
  gpu_test::require_gpu();
  const int64_t s = 12, b = 2, heads = 4, d = 16;
  for (const int64_t groups : {2, 1}) {
    CAPTURE(groups);
    const Tensor qkv = rand_cpu({s, b, groups * (heads / groups + 2) * d}, 33, -2.f, 2.f);
    ops::AttentionOptions opt;
    opt.heads = heads;
    opt.query_groups = groups;
    compare_attention(qkv, opt, "grouped-query");
    Tensor mask = Tensor::full({b, s}, 1.f);
    mask.at({0, 3}) = 0.f;
    opt.key_padding_mask = mask;
    opt.dropout_p = 0.2f;
    opt.dropout_key = ops::DropoutKey{5, 13, {}, {}};
    compare_attention(qkv, opt, "grouped-query, key padding and dropout");
  }
}

TEST_CASE("dropout: the CUDA mask is the CPU mask bit for bit, whole and as a shard of a global key") {
  gpu_test::require_gpu();
  const Tensor ones = Tensor::full({6, 3, 40}, 1.f);
  const ops::DropoutKey whole{1234, ops::dropout_stream("layers.0.hidden_after_attn", 3), {}, {}};
  expect_identical(ops::dropout_forward(dev(ones), 0.3f, whole), ops::dropout_mask({6, 3, 40}, 0.3f, whole),
                   "whole-tensor mask");
  // Sequence shard 2 of 3 of a global [18, 3, 40] activation: the rows the reference draws there.
  const ops::DropoutKey shard{1234, 99, {18, 3, 40}, {12, 0, 0}};
  const Tensor global = ops::dropout_mask({18, 3, 40}, 0.1f, ops::DropoutKey{1234, 99, {}, {}});
  expect_identical(ops::dropout_forward(dev(ones), 0.1f, shard), global.slice0(12, 18), "sequence shard");
  const Tensor x = rand_cpu({6, 3, 40}, 33);
  expect_identical(ops::dropout_forward(dev(x), 0.5f, shard), ops::dropout_forward(x, 0.5f, shard),
                   "forward");
  expect_identical(ops::dropout_backward(dev(x), 0.5f, shard), ops::dropout_backward(x, 0.5f, shard),
                   "backward");
  expect_identical(ops::dropout_forward(dev(x), 0.f, shard), x, "p = 0 is a copy");
}
