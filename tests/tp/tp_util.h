// Shared pieces of the tensor-parallel tests: element-wise comparison that throws with the worst
// element, the slice of a reference tensor that a TP shard must equal, and a small batch.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/comm/env.h"
#include "engine/model/gpt.h"
#include "engine/parallel_state.h"
#include "engine/tensor.h"
#include "engine/tokens.h"
#include "reference/gpt.h"
#include "tests/support/ranks.h"

namespace tpsp::testing {

/// Throws naming `what`, the count of elements outside |got − want| ≤ atol + rtol·|want|, and the
/// worst flat index with got/want. Shapes must match.
inline void expect_close(const Tensor& got, const Tensor& want, double rtol, double atol,
                         const std::string& what) {
  expect(got.shape() == want.shape(),
         what + ": shape " + shape_str(got.shape()) + " != " + shape_str(want.shape()));
  int64_t bad = 0, worst = -1;
  double worst_excess = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.at(i), w = want.at(i), tol = atol + rtol * std::fabs(w), d = std::fabs(g - w);
    if (!(d <= tol)) {
      ++bad;
      if (worst < 0 || d - tol > worst_excess) worst = i, worst_excess = d - tol;
    }
  }
  if (bad)
    throw std::runtime_error(what + ": " + std::to_string(bad) + " of " + std::to_string(got.numel()) +
                             " elements differ; worst flat index " + std::to_string(worst) + " got " +
                             std::to_string(got.at(worst)) + " want " + std::to_string(want.at(worst)));
}

/// The reference tensor's slice that TP rank `rank` holds under `spec`; vocabulary rows past the
/// real vocabulary (padding) are zero-filled (their gradients must be 0).
inline Tensor expected_shard(const Tensor& ref_whole, const model::ShardSpec& spec, int rank, int tp) {
  Tensor whole(spec.global_shape);
  const int64_t rows = std::min(ref_whole.size(0), whole.size(0));
  std::copy(ref_whole.data(),
            ref_whole.data() + rows * (ref_whole.numel() / std::max<int64_t>(ref_whole.size(0), 1)),
            whole.data());
  return shard_of(whole, spec.placement, rank, tp);
}

/// A deterministic batch [b, s] of ids in [0, vocab); targets include two ignored (−100) positions.
inline void make_batch(int64_t b, int64_t s, int64_t vocab, uint64_t salt, TokenBatch& ids,
                       TokenBatch& targets) {
  ids = {b, s, {}};
  targets = {b, s, {}};
  for (int64_t k = 0; k < b * s; ++k) {
    ids.ids.push_back(static_cast<int64_t>((k * 7 + salt * 13 + 3) % static_cast<uint64_t>(vocab)));
    targets.ids.push_back(static_cast<int64_t>((k * 11 + salt * 5 + 1) % static_cast<uint64_t>(vocab)));
  }
  targets.ids[1] = kIgnoreIndex;
  targets.ids[static_cast<std::size_t>(b * s - 2)] = kIgnoreIndex;
}

/// The slice of a reference's whole tensor `whole` (under the engine's names) that this rank holds of
/// parameter `name`: its TP shard (expected_shard), or for an MoE model's expert weight its ETP cut
/// (`experts`: the model's expert groups, required then).
inline Tensor local_slice(const model::ParallelGPT& gpt, ParallelState& ps,
                          const moe::ExpertParallelState* experts, const std::string& name,
                          const Tensor& whole) {
  const auto e = gpt.expert_placements().find(name);
  if (e == gpt.expert_placements().end())
    return expected_shard(whole, gpt.shard_spec(name), ps.tp_rank(), ps.tp_size());
  expect(experts != nullptr, "expert weight " + name + " but no expert groups given");
  return shard_of(whole, e->second.placement, experts->etp_rank(), experts->etp_size());
}

/// One training step of `gpt` against the single-process `ref` (which has run forward and backward on the
/// whole batch), after gpt.forward on this data-parallel rank's b_local rows returned `loss`: the loss
/// (dp = 1 only: with dp > 1 it is this rank's rows' mean), this rank's logit columns, every gradient after
/// gpt.backward(), and every parameter after one AdamW step of both models. The reference's tensors are
/// put under the engine's names (model::fused_model_parameters: each Llama layer fused, the GPT-2 block
/// as it is) and sliced by the engine's ShardSpec (expected_shard). Float32 tolerances: the parallel run
/// sums the same terms in another order (docs/tolerances.md). AdamW divides by √v + eps: a gradient that
/// is zero analytically (the key bias: softmax ignores a constant added to every score) carries ~1e-10
/// rounding noise that the update scales up to ~lr·noise/eps ≈ 1e-5, so parameters use atol 2e-5.
/// An MoE model's expert weights (gpt.expert_placements()) are this rank's ETP cut of its EP rank's experts:
/// `experts` must then be the model's expert groups.
inline void expect_step_equals_reference(model::ParallelGPT& gpt, reference::GPT& ref, float loss,
                                         float ref_loss, const Tensor& ref_logits, ParallelState& ps, int dp,
                                         int64_t b_local, const moe::ExpertParallelState* experts = nullptr) {
  const GPTConfig& c = gpt.config();
  const auto mine = [&](const std::string& name, const Tensor& whole) {
    return local_slice(gpt, ps, experts, name, whole);
  };
  if (dp == 1)
    expect(std::fabs(loss - ref_loss) <= 1e-5 + 1e-5 * std::fabs(ref_loss),
           "loss " + std::to_string(loss) + " != reference " + std::to_string(ref_loss));
  // Logits: this rank's vocabulary columns of its data-parallel rows.
  const Tensor local = gpt.logits_local();
  const int64_t vl = local.size(2), v0 = ps.tp_rank() * vl,
                real = std::max<int64_t>(0, std::min(vl, c.vocab - v0));
  const Tensor ref_rows = ref_logits.slice0(ps.dp_rank() * b_local, (ps.dp_rank() + 1) * b_local);
  expect_close(local.narrow_copy(2, 0, real), ref_rows.narrow_copy(2, v0, real), 1e-4, 1e-5, "logits");
  gpt.backward();
  const auto ref_grads = model::fused_model_parameters(c, ref.grads());
  for (const auto& [name, g] : gpt.grads())
    expect_close(g, mine(name, ref_grads.at(name)), 1e-3, 2e-6, "grad " + name);
  const ops::AdamWConfig adam;
  ref.step(adam);
  gpt.step(adam);
  const auto ref_params = model::fused_model_parameters(c, ref.params());
  for (const auto& [name, p] : gpt.params()) {
    const Tensor want = mine(name, ref_params.at(name));
    int64_t rows = p.size(0);  // padded vocabulary rows have no reference counterpart
    if (gpt.expert_placements().contains(name)) {
      expect_close(p, want, 1e-4, 2e-5, "param after AdamW " + name);
      continue;
    }
    const model::ShardSpec& spec = gpt.shard_spec(name);
    if (spec.placement == Placement::Shard(0) && spec.global_shape[0] != ref_params.at(name).size(0))
      rows = std::clamp<int64_t>(c.vocab - ps.tp_rank() * p.size(0), 0, p.size(0));
    expect_close(p.slice0(0, rows), want.slice0(0, rows), 1e-4, 2e-5, "param after AdamW " + name);
  }
}

}  // namespace tpsp::testing
