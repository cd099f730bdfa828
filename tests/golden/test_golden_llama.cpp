// Golden tests of the Llama block's ops against PyTorch's float64 oracle written apart from the engine
// (tools/goldens_llama.py): SwiGLU (F.silu(gate)·up), rotary embedding (a complex multiplication, not
// rotate_half) and grouped-query attention (keys and values through repeat_interleave). RMSNorm's golden is
// in test_golden_dense.cpp. Tolerances: docs/tolerances.md.
#include <doctest/doctest.h>

#include <string>

#include "engine/ops/attention.h"
#include "engine/ops/rope.h"
#include "engine/ops/swiglu.h"
#include "tests/golden/golden_util.h"

using namespace tpsp;
using golden::case_params;
using golden::check_close;
using golden::load;
using golden::Tol;

TEST_CASE("golden: swiglu forward+backward") {
  const std::string c = "swiglu";
  // y = g·σ(g)·u: σ within 1 ulp (expf, a division), two products: ≤ 4 roundings of |y| (≤ 81).
  // dx's gate half: σ·(1 + g·(1 − σ)), 1 − σ cancels for g ≫ 0 (an absolute ½ ulp of 1 times |g| ≤ 20).
  const Tensor x = load(c, "x"), dy = load(c, "dy");
  check_close(c + "/y", ops::swiglu_forward(x), load(c, "y"), Tol{2e-6, 1e-6});
  check_close(c + "/dx", ops::swiglu_backward(dy, x), load(c, "dx"), Tol{2e-6, 5e-6});
}

TEST_CASE("golden: rope forward+backward at SP offsets and packed positions") {
  // Each output is x_i·c − x_j·s with c, s rounded once from double: 2 products and a difference, each
  // ½ ulp, plus the table's ½ ulp times |x| (≤ 8): ≤ 2e-6 absolute.
  for (const std::string c : {"rope", "rope_packed"}) {
    CAPTURE(c);
    const auto& p = case_params(c);
    const int64_t d = p.at("d").get<int64_t>();
    const float base = p.at("base").get<float>();
    const std::vector<int64_t> positions = p.at("positions").get<std::vector<int64_t>>();
    const Tol tol{1e-6, 2e-6};
    check_close(c + "/y", ops::rope_forward(load(c, "x"), positions, d, base), load(c, "y"), tol);
    check_close(c + "/dx", ops::rope_backward(load(c, "dy"), positions, d, base), load(c, "dx"), tol);
  }
}

TEST_CASE("golden: grouped-query and multi-query attention forward+backward") {
  for (const std::string c : {"attention_gqa", "attention_mqa"}) {
    CAPTURE(c);
    ops::AttentionOptions opt;
    opt.heads = case_params(c).at("heads").get<int64_t>();
    opt.query_groups = case_params(c).at("query_groups").get<int64_t>();
    if (c == "attention_gqa") opt.key_padding_mask = load(c, "key_padding_mask");
    const Tensor qkv = load(c, "qkv");
    const ops::AttentionOut f = ops::attention_forward(qkv, opt);
    // As MHA's golden (q·k over d ≤ 5, softmax and p·v over ≤ 6 keys); a group's dk, dv add ≤ 3 heads.
    const Tol tol{1e-5, 1e-6};
    check_close(c + "/out", f.out, load(c, "out"), tol);
    check_close(c + "/probs", f.probs, load(c, "probs"), tol);
    check_close(c + "/dqkv", ops::attention_backward(load(c, "dout"), qkv, f.probs, opt), load(c, "dqkv"),
                tol);
  }
}
