// lab03 scenarios: the sequence-parallel mappings, the gradient reduction of sequence-parallel
// parameters, and the SP transformer layer with its activation memory (Korthikanti et al. 2022 §4).
#include "checkers/layer_fixture.h"
#include "checkers/scenario.h"
#include "engine/model/finalize_grads.h"
#include "engine/ops/elementwise.h"
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::checkers {

namespace {

using comm::OpKind;
constexpr int64_t S = 12, B = 2, H = 24;
constexpr uint64_t kSbh = S * B * H * 4;

Tensor rank_input(uint64_t seed, const std::string& name, int r) {
  return input_tensor({S, B, H}, seed, name + ".rank" + std::to_string(r), 1, true);
}

/// The three SP pairs on integer tensors: each forward and each backward in its own phase.
Outputs run_sp_mappings(RunContext& ctx) {
  using namespace tensor_parallel;
  const int n = ctx.size(), r = ctx.rank();
  comm::ProcessGroup& tp = *ctx.tp;
  const Tensor x = input_tensor({S, B, H}, ctx.seed, "sp.x", 1, true);
  Outputs out;
  ctx.begin_phase("gather.forward");
  out["gather_forward"] = {
      gather_from_sequence_parallel_region.forward(chunk(x, 0, r, n), tp, "check.ag").clone()};
  ctx.begin_phase("gather.backward");
  out["gather_backward"] = {
      gather_from_sequence_parallel_region.backward(rank_input(ctx.seed, "sp.dgather", r), tp, "check.ag")
          .clone(),
      0};
  ctx.begin_phase("reduce_scatter.forward");
  out["reduce_scatter_forward"] = {reduce_scatter_to_sequence_parallel_region
                                       .forward(rank_input(ctx.seed, "sp.partial", r), tp, "check.rs")
                                       .clone(),
                                   0};
  ctx.begin_phase("reduce_scatter.backward");
  const Tensor dz = input_tensor({S, B, H}, ctx.seed, "sp.dz", 1, true);
  out["reduce_scatter_backward"] = {
      reduce_scatter_to_sequence_parallel_region.backward(chunk(dz, 0, r, n), tp, "check.rs").clone()};
  ctx.begin_phase("scatter.forward");
  out["scatter_forward"] = {scatter_to_sequence_parallel_region.forward(x, tp, "check.scatter").clone(), 0};
  ctx.begin_phase("scatter.backward");
  out["scatter_backward"] = {
      scatter_to_sequence_parallel_region.backward(chunk(dz, 0, r, n), tp, "check.scatter").clone()};
  return out;
}

Outputs expected_sp_mappings(uint64_t seed, int tp, bool) {
  Tensor dgather({S, B, H}), partial({S, B, H});
  for (int r = 0; r < tp; ++r) {
    ops::add_(dgather, rank_input(seed, "sp.dgather", r));
    ops::add_(partial, rank_input(seed, "sp.partial", r));
  }
  const Tensor x = input_tensor({S, B, H}, seed, "sp.x", 1, true),
               dz = input_tensor({S, B, H}, seed, "sp.dz", 1, true);
  return {{"gather_forward", {x}},
          {"gather_backward", {dgather, 0}},
          {"reduce_scatter_forward", {partial, 0}},
          {"reduce_scatter_backward", {dz}},
          {"scatter_forward", {x, 0}},
          {"scatter_backward", {dz}}};
}

Pattern pattern_sp_mappings(int tp, bool) {
  if (tp == 1) return {};
  return {
      {"gather.forward", {{OpKind::all_gather, kSbh, "all-gather of the sequence shards"}}},
      {"gather.backward", {{OpKind::reduce_scatter, kSbh, "reduce-scatter of the partial gradient"}}},
      {"reduce_scatter.forward", {{OpKind::reduce_scatter, kSbh, "reduce-scatter of the partial output"}}},
      {"reduce_scatter.backward", {{OpKind::all_gather, kSbh, "all-gather of the gradient shards"}}},
      {"scatter.backward", {{OpKind::all_gather, kSbh, "all-gather: every rank needs the full gradient"}}}};
}

/// Each rank holds partial gradients of replicated parameters (its own tokens' share); after the
/// reduction every rank must hold their sum.
Outputs run_sp_grad_sync(RunContext& ctx) {
  Tensor gamma = input_tensor({H}, ctx.seed, "sync.gamma.rank" + std::to_string(ctx.rank()), 1, true);
  Tensor beta = input_tensor({H}, ctx.seed, "sync.beta.rank" + std::to_string(ctx.rank()), 1, true);
  Tensor bias = input_tensor({H}, ctx.seed, "sync.bias.rank" + std::to_string(ctx.rank()), 1, true);
  ctx.begin_phase("grad_sync");
  model::allreduce_sequence_parallel_grads({&gamma, &beta, &bias}, *ctx.tp);
  return {{"layernorm.dgamma", {gamma}}, {"layernorm.dbeta", {beta}}, {"row_bias.dbias", {bias}}};
}

Outputs expected_sp_grad_sync(uint64_t seed, int tp, bool) {
  Outputs out;
  for (const auto& [key, name] :
       {std::pair{"layernorm.dgamma", "gamma"}, {"layernorm.dbeta", "beta"}, {"row_bias.dbias", "bias"}}) {
    Tensor sum({H});
    for (int r = 0; r < tp; ++r)
      ops::add_(sum,
                input_tensor({H}, seed, std::string("sync.") + name + ".rank" + std::to_string(r), 1, true));
    out[key] = {sum};
  }
  return out;
}

Pattern pattern_sp_grad_sync(int tp, bool) {
  if (tp == 1) return {};
  return {{"grad_sync",
           {{OpKind::all_reduce, 3 * H * 4, "one coalesced all-reduce (sum) of the three gradients"}}}};
}

}  // namespace

void register_lab03(std::vector<Scenario>& out) {
  out.push_back({.lab = "lab03",
                 .name = "sp_mappings",
                 .summary = "gather_from_ / reduce_scatter_to_ / scatter_to_sequence_parallel_region",
                 .sp_only = true,
                 .run = run_sp_mappings,
                 .pattern = pattern_sp_mappings,
                 .expected = expected_sp_mappings});
  out.push_back({.lab = "lab03",
                 .name = "sp_grad_sync",
                 .summary = "sum (not average) the sequence-parallel gradients over TP in one all-reduce",
                 .sp_only = true,
                 .run = run_sp_grad_sync,
                 .pattern = pattern_sp_grad_sync,
                 .expected = expected_sp_grad_sync});
  out.push_back({.lab = "lab03",
                 .name = "sp_transformer_layer",
                 .summary = "a transformer layer with sequence parallelism, gradients summed over TP",
                 .sp_only = true,
                 .run =
                     [](RunContext& c) {
                       c.sp = true;
                       return run_layer(c);
                     },
                 .pattern = [](int tp, bool) { return layer_pattern(tp, true); },
                 .expected =
                     [](uint64_t seed, int, bool) {
                       Scenario s;
                       s.run = run_layer;
                       return run_single_process(s, seed, true);
                     }});
  out.push_back({.lab = "lab03",
                 .name = "sp_activation_memory",
                 .summary = "SP keeps 1/tp of the [s, b, h] activations per rank",
                 .sp_only = true,
                 .run =
                     [](RunContext& c) {
                       c.sp = true;
                       return run_layer_memory(c);
                     },
                 .pattern =
                     [](int tp, bool) {
                       Pattern p = layer_pattern(tp, true);
                       return Pattern{{"forward", p["forward"]}};
                     },
                 .expected =
                     [](uint64_t, int tp, bool) {
                       return Outputs{
                           {"activation_bytes",
                            {Tensor::from({1}, {static_cast<float>(layer_activation_bytes(tp, true))})}}};
                     }});
  out.push_back(gpt_step_scenario("lab03", true));
}

}  // namespace tpsp::checkers
