// lab00's prediction step (./check lab00 --predict; checkers/predict/predict.h): the calls of ring_all_reduce
// on rank 0. tests/predict/test_steps_match_recorder.cpp runs it with the engine's solution and requires the
// recorder's calls to equal these.
#include <fmt/format.h>

#include "checkers/predict/step_helpers.h"

namespace tpsp::checkers::predict {

using comm::OpKind;
using comm::ReduceOp;

// lab00: one ring all-reduce of N floats on a world of 4, rank 0's sends and receives. The ring is a
// reduce-scatter (n−1 steps) then an all-gather (n−1 steps); each step sends one chunk N/n to rank
// r+1 (posted first, async) and receives one from rank r−1.
Step lab00_step() {
  constexpr int n = 4;
  constexpr int64_t N = 262144;
  const uint64_t chunk = N / n * kF32;
  Step s{.lab = "lab00",
         .title = "rank 0's calls in ring_all_reduce of a [262144] f32 tensor (1 MiB) on a world of 4 ranks",
         .phases = {"reduce_scatter", "all_gather"},
         .group_size = n,
         .sizes = {{"N", N}, {"world", n}}};
  const std::string t = "one chunk " + tensor({N / n}, chunk);
  for (const char* phase : {"reduce_scatter", "all_gather"}) {
    const bool rs = std::string(phase) == "reduce_scatter";
    for (int i = 1; i < n; ++i) {
      s.calls.push_back(
          {call(phase, OpKind::send, "world", chunk, -1, 1), t,
           fmt::format("{} step {} of {}: send {} to the next rank (r+1 = 1), posted first (send_async) so "
                       "that the receive below can run at the same time",
                       rs ? "reduce-scatter" : "all-gather", i, n - 1,
                       rs ? (i == 1 ? "your chunk r−1 = 3" : "the partial sum you received last")
                          : (i == 1 ? "your summed chunk 0" : "the chunk you received last"))});
      s.calls.push_back({call(phase, OpKind::recv, "world", chunk, -1, n - 1), t,
                         fmt::format("{} step {} of {}: receive from the previous rank (r−1 = 3){}",
                                     rs ? "reduce-scatter" : "all-gather", i, n - 1,
                                     rs ? " a partial sum and add your own chunk to it"
                                        : " a summed chunk, into its place")});
    }
  }
  s.hints = {{"", OpKind::all_reduce,
              "lab00 builds the all-reduce from send and recv only: no collective is called"},
             {"", OpKind::all_gather,
              "lab00 builds the all-gather from send and recv only: no collective is called"},
             {"", OpKind::reduce_scatter,
              "lab00 builds the reduce-scatter from send and recv only: no collective is called"}};
  return s;
}

}  // namespace tpsp::checkers::predict
