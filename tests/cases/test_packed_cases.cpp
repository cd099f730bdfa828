// Packed sequences in ParallelGPT (issue 14): forward_packed at tp=2 + SP refuses, on every rank and
// before any collective, a packed total not divisible by tp, bad cu_seqlens, b != 1 and a sequence
// longer than the position table — each with the rule and the values in the message. (Equality
// with the reference on the unpacked sequences is ./check's packed_sequences, at tp 1–4.)
#include "engine/model/gpt.h"
#include "engine/packed_seq.h"
#include "tests/cases/cases_util.h"

using namespace tpsp;
using namespace tpsp::cases;

namespace {

GPTConfig packed_config() {
  return {.vocab = 11, .seq = 8, .hidden = 8, .heads = 2, .layers = 1, .ffn = 16};
}

/// forward_packed must throw ShapeError whose message contains `want`.
void expect_refused(model::ParallelGPT& gpt, const TokenBatch& ids, const std::vector<int64_t>& cu,
                    const std::string& want) {
  TokenBatch targets = ids;
  try {
    gpt.forward_packed(ids, targets, PackedSeqParams{cu});
  } catch (const ShapeError& e) {
    expect(std::string(e.what()).find(want) != std::string::npos,
           "message \"" + std::string(e.what()) + "\" does not say \"" + want + "\"");
    return;
  }
  throw std::runtime_error("forward_packed accepted a batch it must refuse (" + want + ")");
}

TokenBatch row(int64_t T) {
  TokenBatch t{1, T, {}};
  for (int64_t i = 0; i < T; ++i) t.ids.push_back(i % 11);
  return t;
}

}  // namespace

TEST_CASE("forward_packed at tp=2 + SP refuses bad packed batches with the rule and the values") {
  run_case(2, [](int) {
    ParallelState ps(comm::init_from_env(), 2);
    model::ParallelGPT gpt(packed_config(), 3, ps, {.sequence_parallel = true});
    expect_refused(gpt, row(13), {0, 5, 8, 13}, "packed total 13 is not divisible by tp=2");
    expect_refused(gpt, row(14), {1, 6, 10, 14}, "cu_seqlens[0] = 1 must be 0");
    expect_refused(gpt, row(14), {0, 6, 6, 14}, "cu_seqlens[2] = 6 is not greater than cu_seqlens[1] = 6");
    expect_refused(gpt, row(14), {0, 6, 10, 12},
                   "the last cu_seqlens[3] = 12 must equal the packed total T = 14");
    expect_refused(gpt, row(12), {0, 2, 12},
                   "sequence 1 has 10 tokens (padding included), more than the position table seq=8");
    TokenBatch two{2, 2, {1, 2, 3, 4}};
    expect_refused(gpt, two, {0, 2}, "ids must be [1, T]");
    // The same model still runs a valid packed batch afterwards (nothing was left half-communicated).
    const PackedBatch p = pack_sequences({{1, 2, 3}, {4, 5, 6, 7, 8}}, {{2, 3, 4}, {5, 6, 7, 8, 9}}, 2);
    expect(p.params.cu_seqlens == std::vector<int64_t>{0, 4, 10}, "pack_sequences: cu_seqlens");
    const float loss = gpt.forward_packed(p.ids, p.targets, p.params);
    expect(std::isfinite(loss) && loss > 0, "loss of a valid packed batch: " + std::to_string(loss));
  });
}
