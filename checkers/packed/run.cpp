// packed_sequences on the ranks: the sequences packed by the engine (pack_sequences, padded to a
// multiple of tp under SP), one forward_packed + backward of ParallelGPT with the learner's files.
#include "checkers/packed/packed.h"
#include "checkers/run_context.h"
#include "engine/model/gpt.h"
#include "engine/packed_seq.h"

namespace tpsp::checkers {

RankOutputs run_packed_sequences(RunContext& ctx) {
  using namespace packed;
  model::ParallelGPT gpt(config(), ctx.model_seed, *ctx.ps,
                         {.sequence_parallel = ctx.sp, .device = ctx.device});
  const PackedBatch batch =
      pack_sequences(sequences(ctx.in, "ids"), sequences(ctx.in, "targets"), ctx.sp ? ctx.size() : 1);
  ctx.begin_phase("forward");
  const float loss = gpt.forward_packed(batch.ids, batch.targets, batch.params, gpt_step::kIteration);
  ctx.begin_phase("backward");
  gpt.backward();
  RankOutputs out{{"loss", ctx.on_device(Tensor::from({1}, {loss}))}};
  for (const auto& [name, g] : gpt.grads()) out["grad." + name] = g.clone();
  return out;
}

}  // namespace tpsp::checkers
