// gpt_step on the ranks: one training step of ParallelGPT with the learner's files inside. Every layer
// class runs several times, as several instances, in forward and backward, so code that works for
// one call only (cached results, a global saved input, a reused output buffer, a weight changed in
// backward) fails here even when each piece passes on its own.
#include "checkers/gpt_step/gpt_step.h"
#include "checkers/run_context.h"
#include "engine/model/gpt.h"

namespace tpsp::checkers {

RankOutputs run_gpt_step(RunContext& ctx) {
  using namespace gpt_step;
  model::ParallelGPT gpt(config(), ctx.model_seed, *ctx.ps,
                         {.sequence_parallel = ctx.sp, .device = ctx.device});
  ctx.begin_phase("forward");
  const float loss = gpt.forward(ids(ctx.in), targets(ctx.in), kIteration);
  ctx.begin_phase("backward");
  gpt.backward();
  ctx.begin_phase("step");
  gpt.step(adamw());
  RankOutputs out{{"loss", ctx.on_device(Tensor::from({1}, {loss}))}};
  for (const auto& [name, g] : gpt.grads()) {
    out["grad." + name] = g.clone();
    out["param_after_step." + name] = gpt.params().at(name).clone();
  }
  return out;
}

}  // namespace tpsp::checkers
