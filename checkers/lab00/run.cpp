// lab00 on the ranks: the learner's ring collectives (engine/comm/ring_collectives.h). They are host
// code by design (the lesson is the ring; its chunks are added with data(), as labs/lab00's HINTS
// teach), so every scenario runs on the host even under ./check --device (RunContext::run_on_host).
#include "checkers/lab00/lab00.h"
#include "checkers/run_context.h"
#include "engine/comm/ring_collectives.h"

namespace tpsp::checkers {

namespace {

void add_runs(std::map<std::string, RunFn>& out) {
  using namespace lab00;
  out["lab00/ring_reduce_scatter"] = [](RunContext& ctx) {
    ctx.run_on_host();
    const Tensor in = rank_tensor(ctx.in, ctx.rank());
    ctx.begin_phase("reduce_scatter");
    return RankOutputs{{"out", guarded("ring_reduce_scatter", {{"in", &in}}, [&] {
                          return comm::ring_reduce_scatter(*ctx.tp, in, "check.ring_rs");
                        })}};
  };
  out["lab00/ring_all_gather"] = [](RunContext& ctx) {
    ctx.run_on_host();
    const Tensor in = gather_whole(ctx.in);
    ctx.begin_phase("all_gather");
    return RankOutputs{{"out", guarded("ring_all_gather", {{"in", &in}},
                                       [&] { return comm::ring_all_gather(*ctx.tp, in, "check.ring_ag"); })}};
  };
  out["lab00/ring_all_reduce"] = [](RunContext& ctx) {
    ctx.run_on_host();
    Tensor t = rank_tensor(ctx.in, ctx.rank());
    ctx.begin_phase("all_reduce");
    comm::ring_all_reduce(*ctx.tp, t, "check.ring_ar");
    return RankOutputs{{"out", t}};
  };
  // The contract's "Bad shape: ShapeError before anything is sent": 2·n + 1 rows cannot be split into n
  // ring chunks; a tensor without a dim 0 (a scalar) has nothing to gather along.
  out["lab00/ring_refuses_bad_shapes"] = [](RunContext& ctx) {
    ctx.run_on_host();
    const Tensor uneven = input_tensor({2 * ctx.size() + 1, C}, ctx.in, "ring.uneven", 1, true);
    const Tensor scalar = Tensor::from({}, {1.f});
    const Tensor even = input_tensor({2 * ctx.size(), C}, ctx.in, "ring.even", 1, true);
    ctx.begin_phase("refuse");
    RankOutputs out;
    check_accepts(ctx, out, "reduce_scatter_of_2n_rows",
                  [&] { comm::ring_reduce_scatter(*ctx.tp, even, "check.ok"); });
    check_refusal(ctx, out, "reduce_scatter_of_uneven_rows",
                  [&] { comm::ring_reduce_scatter(*ctx.tp, uneven, "check.ring_rs"); });
    Tensor t = uneven.clone();
    check_refusal(ctx, out, "all_reduce_of_uneven_rows",
                  [&] { comm::ring_all_reduce(*ctx.tp, t, "check.ring_ar"); });
    check_refusal(ctx, out, "all_gather_of_a_scalar",
                  [&] { comm::ring_all_gather(*ctx.tp, scalar, "check.ring_ag"); });
    // "a defined f32 (or bf16) tensor with at least one dim": the other inputs an op must refuse.
    const Tensor undefined;
    check_refusal(ctx, out, "reduce_scatter_of_an_undefined_tensor",
                  [&] { comm::ring_reduce_scatter(*ctx.tp, undefined, "check.ring_rs"); });
    Tensor s = scalar.clone();
    check_refusal(ctx, out, "all_reduce_of_a_scalar",
                  [&] { comm::ring_all_reduce(*ctx.tp, s, "check.ring_ar"); });
    return out;
  };
}

}  // namespace

const LabRuns kRuns(add_runs);

}  // namespace tpsp::checkers
