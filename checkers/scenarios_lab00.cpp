// lab00 scenarios: ring reduce-scatter, all-gather and all-reduce on send/recv, on integer inputs
// (exact in any summation order). The pattern shows the lesson: a ring all-reduce is n−1 sends
// of reduce-scatter plus n−1 sends of all-gather, each of S/n bytes — 2(n−1)/n·S per rank.
#include "checkers/scenario.h"
#include "engine/comm/ring_collectives.h"
#include "engine/ops/elementwise.h"

namespace tpsp::checkers {

namespace {

using comm::OpKind;
constexpr int64_t R = 12, C = 10;  // rows divisible by 1, 2, 3, 4

Tensor rank_tensor(uint64_t seed, int r) {
  return input_tensor({R, C}, seed, "ring.rank" + std::to_string(r), 1, true);
}

Tensor sum_over_ranks(uint64_t seed, int tp) {
  Tensor s({R, C});
  for (int r = 0; r < tp; ++r) ops::add_(s, rank_tensor(seed, r));
  return s;
}

/// n−1 sends and n−1 receives of one chunk S/n per ring phase.
std::vector<ExpectedCall> ring_phase(int tp, const char* what) {
  std::vector<ExpectedCall> calls;
  const uint64_t chunk_bytes = R / tp * C * 4;
  for (int i = 0; i < tp - 1; ++i) {
    calls.push_back({OpKind::send, chunk_bytes, std::string(what) + ": send one chunk to rank+1"});
    calls.push_back({OpKind::recv, chunk_bytes, std::string(what) + ": receive one chunk from rank−1"});
  }
  return calls;
}

Outputs run_reduce_scatter(RunContext& ctx) {
  ctx.begin_phase("reduce_scatter");
  return {
      {"out", {comm::ring_reduce_scatter(*ctx.tp, rank_tensor(ctx.seed, ctx.rank()), "check.ring_rs"), 0}}};
}

Outputs run_all_gather(RunContext& ctx) {
  const Tensor whole = input_tensor({R, C}, ctx.seed, "ring.gather", 1, true);
  ctx.begin_phase("all_gather");
  return {
      {"out", {comm::ring_all_gather(*ctx.tp, chunk(whole, 0, ctx.rank(), ctx.size()), "check.ring_ag")}}};
}

Outputs run_all_reduce(RunContext& ctx) {
  Tensor t = rank_tensor(ctx.seed, ctx.rank());
  ctx.begin_phase("all_reduce");
  comm::ring_all_reduce(*ctx.tp, t, "check.ring_ar");
  return {{"out", {t}}};
}

}  // namespace

void register_lab00(std::vector<Scenario>& out) {
  out.push_back(
      {.lab = "lab00",
       .name = "ring_reduce_scatter",
       .summary = "ring reduce-scatter on send/recv: rank r keeps the sum of chunk r",
       .run = run_reduce_scatter,
       .pattern =
           [](int tp, bool) {
             return tp == 1 ? Pattern{} : Pattern{{"reduce_scatter", ring_phase(tp, "reduce-scatter")}};
           },
       .expected =
           [](uint64_t seed, int tp, bool) {
             return Outputs{{"out", {sum_over_ranks(seed, tp), 0}}};
           }});
  out.push_back({.lab = "lab00",
                 .name = "ring_all_gather",
                 .summary = "ring all-gather on send/recv: every rank gets all chunks in rank order",
                 .run = run_all_gather,
                 .pattern =
                     [](int tp, bool) {
                       return tp == 1 ? Pattern{} : Pattern{{"all_gather", ring_phase(tp, "all-gather")}};
                     },
                 .expected =
                     [](uint64_t seed, int, bool) {
                       return Outputs{{"out", {input_tensor({R, C}, seed, "ring.gather", 1, true)}}};
                     }});
  out.push_back({.lab = "lab00",
                 .name = "ring_all_reduce",
                 .summary = "ring all-reduce = reduce-scatter + all-gather, 2(n−1)/n·S bytes per rank",
                 .run = run_all_reduce,
                 .pattern =
                     [](int tp, bool) {
                       if (tp == 1) return Pattern{};
                       std::vector<ExpectedCall> calls = ring_phase(tp, "reduce-scatter phase");
                       for (const ExpectedCall& c : ring_phase(tp, "all-gather phase")) calls.push_back(c);
                       return Pattern{{"all_reduce", calls}};
                     },
                 .expected =
                     [](uint64_t seed, int tp, bool) {
                       return Outputs{{"out", {sum_over_ranks(seed, tp)}}};
                     }});
}

}  // namespace tpsp::checkers
