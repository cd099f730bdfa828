// gpt_step in the grader: the same step of reference::GPT (one process, no communication), each
// tensor placed as the TP GPT shards it (engine/model/sharding.h), vocabulary rows padded.
#include "checkers/gpt_step/gpt_step.h"
#include "checkers/scenario.h"
#include "engine/model/sharding.h"
#include "reference/gpt.h"

namespace tpsp::checkers {

namespace {

using namespace gpt_step;

ExpectedOutputs expected_gpt_step(uint64_t seed, int tp, bool sp) {
  reference::GPT gpt(config(), model_seed_of(seed));
  const float loss = gpt.forward(ids(seed), targets(seed), kIteration);
  gpt.backward();
  const reference::ParamMap grads = gpt.grads();
  gpt.step(adamw());
  ExpectedOutputs out{{"loss", {Tensor::from({1}, {loss})}}};
  for (const auto& [name, spec] : model::gpt_shard_specs(config(), tp, sp)) {
    const bool vocab =
        spec.placement == Placement::Shard(0) && spec.global_shape[0] != grads.at(name).size(0);
    const Placement p = spec.placement;
    const int64_t rows = spec.global_shape[0];
    auto whole = [&](const Tensor& t) { return vocab ? pad_dim(t, 0, rows) : t; };
    out["grad." + name] = {.whole = whole(grads.at(name)), .placement = p, .real_rows = vocab ? kVocab : -1};
    out["param_after_step." + name] = {.whole = whole(gpt.params().at(name)),
                                       .placement = p,
                                       .real_rows = vocab ? kVocab : -1,
                                       .atol = 1e-5};
  }
  return out;
}

}  // namespace

Scenario gpt_step_scenario(const std::string& lab, SpRuns sp) {
  return {.lab = lab,
          .name = "gpt_step",
          .summary =
              "one training step of the 2-layer TP GPT with your code inside (loss, every gradient, AdamW)",
          .sp_variants = sp == SpRuns::off_and_on,
          .sp_only = sp == SpRuns::on_only,
          .budget_s = 20,
          .expected = expected_gpt_step};
}

}  // namespace tpsp::checkers
