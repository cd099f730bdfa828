// Golden test of the reference GPT (reference/gpt.h) against a float64 PyTorch model of the same
// architecture (tools/make_goldens.py): loss, logits, every parameter gradient, and 3 AdamW steps
// on one batch. Tolerances and their reasons: docs/tolerances.md.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>

#include "reference/gpt.h"
#include "tests/golden/golden_util.h"

using namespace tpsp;
using golden::check_close;
using golden::load;
using golden::Tol;

namespace {

// See docs/tolerances.md, "Whole GPT step".
constexpr Tol kLossTol{1e-6, 0};
constexpr Tol kLogitsTol{1e-5, 0, 1e-6};
constexpr Tol kGradTol{1e-5, 0, 2e-6};
constexpr Tol kParamTol{1e-6, 1e-8};

/// Per-element allowance for parameters after `steps` AdamW steps: the gradient tolerance
/// δ = atol_rel·max|g| + rtol·|g| propagated to first order through the update
/// lr·m̂/(√v̂ + ε), whose sensitivity to g is at most ~2/(|g| + ε) and whose size is at most ~2·lr:
///   allowance = steps · lr · min(2, 2·δ / (|g| + ε)),   g = the golden step-1 gradient.
/// Large for gradients that are zero in exact arithmetic (the K part of linear_qkv.bias, whose
/// gradient is f32 rounding noise that Adam normalises to O(lr)), negligible where |g| ≫ δ.
Tensor adam_allowance(const Tensor& g, int64_t steps, const ops::AdamWConfig& opt) {
  double gmax = 0;
  for (int64_t i = 0; i < g.numel(); ++i) gmax = std::fmax(gmax, std::fabs(g.data()[i]));
  Tensor a(g.shape());
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double gi = std::fabs(g.data()[i]);
    const double delta = kGradTol.atol_rel * gmax + kGradTol.rtol * gi;
    a.data()[i] = static_cast<float>(steps * opt.lr * std::fmin(2.0, 2.0 * delta / (gi + opt.eps)));
  }
  return a;
}

/// The GPTConfig written in the case's manifest entry.
GPTConfig config_of(const std::string& c) {
  const auto& p = golden::case_params(c);
  return {.vocab = p.at("vocab").get<int64_t>(),
          .seq = p.at("seq").get<int64_t>(),
          .hidden = p.at("hidden").get<int64_t>(),
          .heads = p.at("heads").get<int64_t>(),
          .layers = p.at("layers").get<int64_t>(),
          .ffn = p.at("ffn").get<int64_t>(),
          .dropout = p.at("dropout").get<float>(),
          .tied = p.at("tied").get<bool>(),
          .ln_eps = p.at("ln_eps").get<float>(),
          .label_smoothing = p.at("label_smoothing").get<float>(),
          .init_std = p.at("init_std").get<float>()};
}

ops::AdamWConfig adamw_of(const std::string& c) {
  const auto& p = golden::case_params(c).at("adamw");
  ops::AdamWConfig a;
  a.lr = p.at("lr").get<float>();
  a.beta1 = p.at("beta1").get<float>();
  a.beta2 = p.at("beta2").get<float>();
  a.eps = p.at("eps").get<float>();
  a.weight_decay = p.at("weight_decay").get<float>();
  return a;
}

/// Loads the golden initial parameters into a reference GPT of the case's config, after checking
/// that both sides have exactly the same parameter names and shapes; then runs forward, backward
/// and the AdamW steps, comparing loss, logits, gradients and final parameters.
void run_gpt_case(const std::string& c) {
  const GPTConfig cfg = config_of(c);
  const int64_t steps = golden::case_params(c).at("steps").get<int64_t>();
  reference::GPT gpt(cfg, /*seed=*/7);  // the seed is irrelevant: every parameter is overwritten

  std::set<std::string> golden_names;
  for (const auto& [key, _] : golden::manifest().at("cases").at(c).at("tensors").items()) {
    if (key.rfind("param/", 0) == 0) golden_names.insert(key.substr(6));
  }
  std::set<std::string> ours;
  for (const auto& [name, t] : gpt.params()) ours.insert(name);
  CHECK(ours == golden_names);
  for (const auto& [name, shape] : reference::gpt_parameter_shapes(cfg)) {
    CAPTURE(name);
    REQUIRE(gpt.params().count(name) == 1);
    REQUIRE(golden_names.count(name) == 1);
    const Tensor init = load(c, "param/" + name);
    CHECK(init.shape() == shape);
    gpt.params()[name].copy_from(init);
  }

  const TokenBatch ids = golden::load_tokens(c, "ids"), targets = golden::load_tokens(c, "targets");
  const Tensor losses = load(c, "losses");  // steps 1..steps, then one forward after the last step
  for (int64_t t = 1; t <= steps; ++t) {
    const float loss = gpt.forward(ids, targets, t - 1);
    check_close(c + "/loss [step " + std::to_string(t) + "]", loss, losses.data()[t - 1], kLossTol);
    gpt.backward();
    if (t == 1) {
      check_close(c + "/logits", gpt.logits(), load(c, "logits"), kLogitsTol);
      for (const auto& [name, g] : gpt.grads())
        check_close(c + "/grad/" + name, g, load(c, "grad/" + name), kGradTol);
    }
    gpt.step(adamw_of(c));
  }
  check_close(c + "/loss [after step " + std::to_string(steps) + "]", gpt.forward(ids, targets, steps),
              losses.data()[steps], kLossTol);
  for (const auto& [name, p] : gpt.params()) {
    check_close(c + "/param_after/" + name, p, load(c, "param_after/" + name), kParamTol,
                adam_allowance(load(c, "grad/" + name), steps, adamw_of(c)));
  }
}

}  // namespace

TEST_CASE("golden: gpt tied forward+backward+3 adamw steps") {
  run_gpt_case("gpt_tied");
}

TEST_CASE("golden: gpt untied label smoothing forward+backward+3 adamw steps") {
  run_gpt_case("gpt_untied_smooth");
}
