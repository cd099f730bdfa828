// lab00 in the grader: closed forms (sums of the ranks' integer inputs) and the ring's calls.
// The pattern shows the lesson: a ring all-reduce is n−1 sends of reduce-scatter plus n−1 sends
// of all-gather, each of S/n bytes — 2(n−1)/n·S per rank.
#include "checkers/lab00/lab00.h"
#include "checkers/scenario.h"
#include "engine/ops/elementwise.h"

namespace tpsp::checkers {

namespace {

using comm::OpKind;
using namespace lab00;

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
    calls.push_back({.op = OpKind::send,
                     .tensor_bytes = chunk_bytes,
                     .what = std::string(what) + ": send one chunk to rank+1",
                     .peer_offset = +1});
    calls.push_back({.op = OpKind::recv,
                     .tensor_bytes = chunk_bytes,
                     .what = std::string(what) + ": receive one chunk from rank−1",
                     .peer_offset = -1});
  }
  return calls;
}

void add_scenarios(std::vector<Scenario>& out) {
  out.push_back(
      {.lab = "lab00",
       .name = "ring_reduce_scatter",
       .summary = "ring reduce-scatter on send/recv: rank r keeps the sum of chunk r",
       .host_code = true,
       .expected =
           [](uint64_t seed, int tp, bool) {
             return ExpectedOutputs{{"out", {sum_over_ranks(seed, tp), Placement::Shard(0)}}};
           },
       .pattern =
           [](int tp, bool) {
             return tp == 1 ? Pattern{} : Pattern{{"reduce_scatter", ring_phase(tp, "reduce-scatter")}};
           }});
  out.push_back({.lab = "lab00",
                 .name = "ring_all_gather",
                 .summary = "ring all-gather on send/recv: every rank gets all chunks in rank order",
                 .host_code = true,
                 .expected =
                     [](uint64_t seed, int, bool) {
                       return ExpectedOutputs{{"out", {gather_whole(seed)}}};
                     },
                 .pattern =
                     [](int tp, bool) {
                       return tp == 1 ? Pattern{} : Pattern{{"all_gather", ring_phase(tp, "all-gather")}};
                     }});
  out.push_back({.lab = "lab00",
                 .name = "ring_all_reduce",
                 .summary = "ring all-reduce = reduce-scatter + all-gather, 2(n−1)/n·S bytes per rank",
                 .host_code = true,
                 .expected =
                     [](uint64_t seed, int tp, bool) {
                       return ExpectedOutputs{{"out", {sum_over_ranks(seed, tp)}}};
                     },
                 .pattern =
                     [](int tp, bool) {
                       if (tp == 1) return Pattern{};
                       std::vector<ExpectedCall> calls = ring_phase(tp, "reduce-scatter phase");
                       for (const ExpectedCall& c : ring_phase(tp, "all-gather phase")) calls.push_back(c);
                       return Pattern{{"all_reduce", calls}};
                     }});
  out.push_back(
      {.lab = "lab00",
       .name = "ring_refuses_bad_shapes",
       .summary = "each ring op raises ShapeError for a shape it cannot split, before anything is sent",
       .tp_sizes = {2, 3},
       .host_code = true,
       .expected = [](uint64_t, int tp, bool) {
         const std::string rows = std::to_string(2 * tp + 1) + " rows at n=" + std::to_string(tp);
         const std::string lost =
             " it cannot split into n equal chunks (rows were dropped, or the "
             "ranks exchanged chunks of different sizes)";
         ExpectedOutputs out;
         expect_accepted(
             out, "reduce_scatter_of_2n_rows",
             "ring_reduce_scatter of " + std::to_string(2 * tp) + " rows at n=" + std::to_string(tp));
         expect_refusal(out, "reduce_scatter_of_uneven_rows",
                        "ring_reduce_scatter raised ShapeError for " + rows, "it accepted rows" + lost,
                        "ring_reduce_scatter");
         expect_refusal(out, "all_reduce_of_uneven_rows", "ring_all_reduce raised ShapeError for " + rows,
                        "it accepted rows" + lost, "ring_all_reduce");
         expect_refusal(out, "all_gather_of_a_scalar",
                        "ring_all_gather raised ShapeError for a tensor without a dim 0",
                        "it accepted a scalar, which has no rows to gather", "ring_all_gather");
         expect_refusal(out, "reduce_scatter_of_an_undefined_tensor",
                        "ring_reduce_scatter raised ShapeError for an undefined tensor",
                        "it accepted a tensor without storage", "ring_reduce_scatter");
         expect_refusal(out, "all_reduce_of_a_scalar",
                        "ring_all_reduce raised ShapeError for a tensor without a dim 0",
                        "it accepted a scalar, which has no rows to split", "ring_all_reduce");
         return out;
       }});
}

}  // namespace

const LabScenarios kScenarios("lab00", add_scenarios);

}  // namespace tpsp::checkers
