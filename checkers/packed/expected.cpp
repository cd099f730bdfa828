// packed_sequences in the grader: reference::GPT (one process) on the sequences unpacked — a
// right-padded [n, max_len] batch with targets −100 past each sequence's end — each gradient placed
// as the TP GPT shards it (engine/model/sharding.h), vocabulary rows padded. Nothing here packs:
// the engine's packing is what the scenario checks.
#include <algorithm>

#include "checkers/packed/packed.h"
#include "checkers/scenario.h"
#include "engine/model/sharding.h"
#include "reference/gpt.h"

namespace tpsp::checkers {

namespace {

ExpectedOutputs expected_packed_sequences(uint64_t seed, int tp, bool sp) {
  using namespace packed;
  const int64_t n = static_cast<int64_t>(seqlens().size());
  const int64_t s = *std::max_element(seqlens().begin(), seqlens().end());
  TokenBatch ids{n, s, std::vector<int64_t>(static_cast<std::size_t>(n * s), 0)};
  TokenBatch targets{n, s, std::vector<int64_t>(static_cast<std::size_t>(n * s), kIgnoreIndex)};
  for (int64_t k = 0; k < n; ++k) {
    const std::vector<int64_t> id = sequence(seed, "ids", static_cast<std::size_t>(k));
    const std::vector<int64_t> tg = sequence(seed, "targets", static_cast<std::size_t>(k));
    std::copy(id.begin(), id.end(), ids.ids.begin() + k * s);
    std::copy(tg.begin(), tg.end(), targets.ids.begin() + k * s);
  }
  reference::GPT gpt(config(), model_seed_of(seed));
  const float loss = gpt.forward(ids, targets, gpt_step::kIteration);
  gpt.backward();
  ExpectedOutputs out{{"loss", {Tensor::from({1}, {loss})}}};
  for (const auto& [name, spec] : model::gpt_shard_specs(config(), tp, sp)) {
    const Tensor& g = gpt.grads().at(name);
    const bool vocab = spec.placement == Placement::Shard(0) && spec.global_shape[0] != g.size(0);
    out["grad." + name] = {.whole = vocab ? pad_dim(g, 0, spec.global_shape[0]) : g,
                           .placement = spec.placement,
                           .real_rows = vocab ? gpt_step::kVocab : -1};
  }
  return out;
}

}  // namespace

Scenario packed_sequences_scenario(const std::string& lab, SpRuns sp) {
  return {
      .lab = lab,
      .name = "packed_sequences",
      .summary = sp == SpRuns::off_only
                     ? "three sequences (5, 3, 7 tokens) packed in one row with cu_seqlens: loss and "
                       "gradients equal the reference on them unpacked"
                     : "three sequences (5, 3, 7 tokens) packed in one row with cu_seqlens, each padded to a "
                       "multiple of tp under SP: loss and gradients equal the reference on them unpacked",
      .sp_variants = sp == SpRuns::off_and_on,
      .sp_only = sp == SpRuns::on_only,
      .budget_s = 20,
      .expected = expected_packed_sequences};
}

}  // namespace tpsp::checkers
