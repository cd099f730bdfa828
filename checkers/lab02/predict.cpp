// lab02's prediction step (./check lab02 --predict; checkers/predict/predict.h): the calls of vocab-parallel
// cross entropy. tests/predict/test_steps_match_recorder.cpp runs it with the engine's solution and requires
// the recorder's calls to equal these.
#include "checkers/predict/step_helpers.h"

namespace tpsp::checkers::predict {

using comm::OpKind;
using comm::ReduceOp;

// lab02: vocab-parallel cross entropy forward and backward on logits [s·b, V/tp] per rank.
Step lab02_step() {
  constexpr int64_t V = 1024, N = S * B;
  constexpr uint64_t rows = N * kF32;
  Step s{.lab = "lab02",
         .title =
             "vocab-parallel cross entropy, forward then backward: logits [1024, 1024] (s·b = 512·2 tokens, "
             "V = 1024), each rank holding [1024, 512] (its V/tp columns), tp=2, no label smoothing, f32",
         .phases = {"forward", "backward"},
         .group_size = TP,
         .sizes = {{"s", S}, {"b", B}, {"vocab", V}, {"tp", TP}}};
  const std::string t = "one float per token " + tensor({N}, rows);
  s.calls = {{call("forward", OpKind::all_reduce, "tp", rows, -1, -1, ReduceOp::max), t,
              "the max logit of each token over the WHOLE vocabulary (reduce=max), subtracted before exp so "
              "that exp cannot overflow: each rank knows only the max of its own 512 columns"},
             {call("forward", OpKind::all_reduce, "tp", rows), t,
              "the target's logit: only the rank whose vocabulary range holds the target has it, the others "
              "contribute 0, and the sum gives it to every rank"},
             {call("forward", OpKind::all_reduce, "tp", rows), t,
              "Σ exp(logit − max) over the whole vocabulary: the softmax's denominator, a sum of the ranks' "
              "partial sums"}};
  s.hints = {
      {"backward", OpKind::all_reduce,
       "the backward needs no communication: each rank's gradient softmax − one_hot(target) of its own "
       "512 columns uses the softmax saved in forward"},
      {"", OpKind::all_gather,
       "the logits are never gathered: a [s·b, V] tensor per rank is what the vocab-parallel loss avoids"}};
  return s;
}

}  // namespace tpsp::checkers::predict
