// The reference Llama layer (reference/llama_layer.h: unfused q/k/v and gate/up, GQA by copying keys and
// values to their heads) against PyTorch's float64 Llama layer (tools/goldens_llama.py: rms_norm as its
// own formula, RoPE through complex numbers, repeat_interleave, F.silu) — y, dx and every parameter's
// gradient, with grouped-query attention at positions 0..s−1, and with qk_layernorm on two packed
// sequences whose positions restart. Tolerances: docs/tolerances.md ("llama_layer").
#include <doctest/doctest.h>

#include <string>

#include "engine/error.h"
#include "reference/llama_layer.h"
#include "tests/golden/golden_util.h"

using namespace tpsp;
using golden::case_params;
using golden::check_close;
using golden::load;
using golden::Tol;

TEST_CASE("golden: the reference Llama layer forward+backward (GQA; qk_layernorm on packed sequences)") {
  for (const std::string c : {"llama_layer", "llama_layer_qknorm_packed"}) {
    CAPTURE(c);
    const auto& p = case_params(c);
    reference::LlamaLayerSpec spec;
    const Tensor x = load(c, "x");
    spec.hidden = x.size(2);
    spec.heads = p.at("heads").get<int64_t>();
    spec.query_groups = p.at("query_groups").get<int64_t>();
    spec.ffn = p.at("ffn").get<int64_t>();
    spec.norm_eps = p.at("eps").get<float>();
    spec.rotary_base = p.at("rotary_base").get<float>();
    spec.positions = p.at("positions").get<std::vector<int64_t>>();
    spec.qk_layernorm = p.at("qk_layernorm").get<bool>();
    spec.cu_seqlens = p.at("cu_seqlens").get<std::vector<int64_t>>();
    reference::ParamMap params, grads;
    for (const auto& [name, shape] : reference::llama_layer_parameter_shapes(spec, "")) {
      params[name] = load(c, "w." + name);
      REQUIRE(params[name].shape() == shape);
      grads[name] = Tensor(shape);
    }
    reference::LlamaLayerActs acts;
    // Sums of ≤ 24 O(1) products per GEMM, 16-term norms in double, softmax over ≤ 6 keys, two residuals:
    // the float32 layer is within a few 1e-7 of the float64 one (measured ≤ 30% of these).
    const Tol tol{1e-5, 2e-6};
    check_close(c + "/y", reference::llama_layer_forward(x, params, "", spec, acts), load(c, "y"), tol);
    check_close(c + "/dx", reference::llama_layer_backward(load(c, "dy"), params, "", spec, acts, grads),
                load(c, "dx"), tol);
    for (const auto& [name, g] : grads) check_close(c + "/g." + name, g, load(c, "g." + name), tol);
  }
}

TEST_CASE("reference Llama layer refuses a bad spec naming the rule and the values") {
  reference::LlamaLayerSpec spec;
  spec.hidden = 12;
  spec.heads = 3;
  spec.query_groups = 2;
  spec.ffn = 8;
  CHECK_THROWS_WITH_AS(spec.validate(4), doctest::Contains("heads=3 is not divisible by query_groups=2"),
                       ShapeError);
  spec.query_groups = 1;
  spec.hidden = 18;  // d = 6 ok; 9 would be odd
  CHECK_NOTHROW(spec.validate(4));
  spec.hidden = 9;
  CHECK_THROWS_WITH_AS(spec.validate(4), doctest::Contains("head_dim=3 is odd"), ShapeError);
  spec.hidden = 12;
  spec.positions = {0, 1, 2};
  CHECK_THROWS_WITH_AS(spec.validate(4), doctest::Contains("3 positions for s=4 tokens"), ShapeError);
}
