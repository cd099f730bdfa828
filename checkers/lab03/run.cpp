// lab03 on the ranks: the learner's sequence-parallel mappings, the SP paths of the linear layers (the
// runs of checkers/lab01/linear_runs.h with SP on) and the gradient reduction (the SP layer runs from
// checkers/layer/run.cpp).
#include "checkers/layer/run.h"

#include "checkers/lab01/linear_runs.h"
#include "checkers/lab03/lab03.h"
#include "checkers/run_context.h"
#include "engine/model/finalize_grads.h"
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::checkers {

namespace {

using namespace lab03;

/// Each SP pair on integer tensors, each forward and each backward in its own phase.
RankOutputs run_sp_mappings(RunContext& ctx) {
  using namespace tensor_parallel;
  const int r = ctx.rank();
  comm::ProcessGroup& tp = *ctx.tp;
  const Tensor x = ctx.on_device(sp_x(ctx.in, false)), dz = ctx.on_device(sp_dz(ctx.in, false));
  const Tensor x_shard = ctx.on_device(sp_x(ctx.in, true)), dz_shard = ctx.on_device(sp_dz(ctx.in, true));
  const Tensor dgather = ctx.on_device(rank_input(ctx.in, "sp.dgather", r)),
               partial = ctx.on_device(rank_input(ctx.in, "sp.partial", r));
  RankOutputs out;
  auto phase = [&](const char* name, const char* call, const Tensor& in, auto&& fn) {
    ctx.begin_phase(name);
    return guarded(call, {{"input", &in}}, fn).clone();
  };
  out["gather_forward"] =
      phase("gather.forward", "gather_from_sequence_parallel_region.forward", x_shard,
            [&] { return gather_from_sequence_parallel_region.forward(x_shard, tp, "check.ag"); });
  out["gather_backward"] =
      phase("gather.backward", "gather_from_sequence_parallel_region.backward", dgather,
            [&] { return gather_from_sequence_parallel_region.backward(dgather, tp, "check.ag"); });
  const GatherFromSequenceParallelRegion gather_whole_grad{.tensor_parallel_output_grad = false};
  out["gather_whole_grad_backward"] =
      phase("gather_whole_grad.backward", "gather_from_sequence_parallel_region.backward", dz,
            [&] { return gather_whole_grad.backward(dz, tp, "check.ag_whole_grad"); });
  out["reduce_scatter_forward"] =
      phase("reduce_scatter.forward", "reduce_scatter_to_sequence_parallel_region.forward", partial,
            [&] { return reduce_scatter_to_sequence_parallel_region.forward(partial, tp, "check.rs"); });
  out["reduce_scatter_backward"] =
      phase("reduce_scatter.backward", "reduce_scatter_to_sequence_parallel_region.backward", dz_shard,
            [&] { return reduce_scatter_to_sequence_parallel_region.backward(dz_shard, tp, "check.rs"); });
  out["scatter_forward"] = phase("scatter.forward", "scatter_to_sequence_parallel_region.forward", x, [&] {
    return scatter_to_sequence_parallel_region.forward(x, tp, "check.scatter");
  });
  out["scatter_backward"] =
      phase("scatter.backward", "scatter_to_sequence_parallel_region.backward", dz_shard,
            [&] { return scatter_to_sequence_parallel_region.backward(dz_shard, tp, "check.scatter"); });
  return out;
}

/// Each rank holds partial gradients of replicated parameters (its own tokens' share); after the
/// reduction every rank must hold their sum.
RankOutputs run_sp_grad_sync(RunContext& ctx) {
  const int r = ctx.rank();
  Tensor gamma = ctx.on_device(sync_grad(ctx.in, "gamma", r)),
         beta = ctx.on_device(sync_grad(ctx.in, "beta", r)),
         bias = ctx.on_device(sync_grad(ctx.in, "bias", r));
  ctx.begin_phase("grad_sync");
  model::allreduce_sequence_parallel_grads({&gamma, &beta, &bias}, *ctx.tp);
  return {{"layernorm.dgamma", gamma}, {"layernorm.dbeta", beta}, {"row_bias.dbias", bias}};
}

/// `out` plus "dbias_share": this rank's dbias as a [1, out] row, so that the grader compares each
/// rank's share (Σ of dY over its own tokens), not only their sum over the ranks.
RankOutputs with_dbias_share(RankOutputs out) {
  const Tensor db = out.at("dbias");
  out["dbias_share"] = db.clone().reshape({1, db.numel()});
  return out;
}

/// The contract's "s not divisible by tp: ShapeError": 2·tp + 1 rows can be neither scattered into nor
/// reduce-scattered to tp sequence chunks.
RankOutputs run_sp_refuses(RunContext& ctx) {
  using namespace tensor_parallel;
  const Tensor x = ctx.on_device(input_tensor({2 * ctx.size() + 1, B, H}, ctx.in, "sp.uneven", 1, true));
  const Tensor even = ctx.on_device(input_tensor({2 * ctx.size(), B, H}, ctx.in, "sp.even", 1, true));
  ctx.begin_phase("refuse");
  RankOutputs out;
  check_accepts(ctx, out, "scatter_of_2tp_rows",
                [&] { scatter_to_sequence_parallel_region.forward(even, *ctx.tp, "check.scatter"); });
  check_accepts(ctx, out, "reduce_scatter_of_2tp_rows",
                [&] { reduce_scatter_to_sequence_parallel_region.forward(even, *ctx.tp, "check.rs"); });
  check_refusal(ctx, out, "scatter_of_uneven_s",
                [&] { scatter_to_sequence_parallel_region.forward(x, *ctx.tp, "check.scatter"); });
  check_refusal(ctx, out, "reduce_scatter_of_uneven_s",
                [&] { reduce_scatter_to_sequence_parallel_region.forward(x, *ctx.tp, "check.rs"); });
  return out;
}

void add_runs(std::map<std::string, RunFn>& out) {
  out["lab03/sp_mappings"] = run_sp_mappings;
  out["lab03/sp_refuses_uneven_s"] = run_sp_refuses;
  out["lab03/sp_grad_sync"] = run_sp_grad_sync;
  for (const lab01::LinearVariant& v : kSpLinearVariants)
    out["lab03/" + std::string(v.name)] = [v](RunContext& c) {
      c.sp = true;
      return v.layer == lab01::LinearLayer::column ? lab01::run_column(c, v.lc)
                                                   : with_dbias_share(lab01::run_row(c, v.lc));
    };
  out["lab03/sp_row_linear_refuses_wrong_in"] = [](RunContext& c) { return lab01::run_row_refuses(c); };
  out["lab03/sp_mlp"] = [](RunContext& c) {
    c.sp = true;
    return lab01::run_mlp(c);
  };
  out["lab03/sp_transformer_layer"] = [](RunContext& c) {
    c.sp = true;
    return layer::run_layer(c);
  };
  out["lab03/sp_activation_memory"] = [](RunContext& c) {
    c.sp = true;
    return layer::run_layer_memory(c);
  };
  out["lab03/sp_vocab_embedding"] = run_vocab_embedding;
  out["lab03/gpt_step"] = run_gpt_step;
  out["lab03/packed_sequences"] = run_packed_sequences;
}

}  // namespace

const LabRuns kRuns(add_runs);

}  // namespace tpsp::checkers
