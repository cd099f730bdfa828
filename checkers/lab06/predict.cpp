// lab06's prediction step (./check lab06 --predict; checkers/predict/predict.h): one MoE layer on 4 ranks
// folded as EP = 2 × ETP = 2, each rank with its own tokens, a balanced routing, forward and backward.
// tests/predict/test_steps_match_recorder.cpp runs it with the engine's solution and requires the
// recorder's calls to equal these.
#include "checkers/predict/step_helpers.h"

namespace tpsp::checkers::predict {

using comm::OpKind;

namespace {

// One MoE layer: T=256 tokens per rank (s=256, b=1, no SP), h=512, E=8 experts of ffn 1408, top-2, on 4
// ranks as EP=2 x ETP=2 (etp {0,1} {2,3}, ep {0,2} {1,3}, one tp_ep group of 4), f32. The router sends
// every token to expert 0 and to expert 4, one on each EP rank (the balanced case): each rank sends T
// rows to each EP rank and receives T from each.
constexpr int64_t MT = 256, MH = 512, ME = 8, MK = 2, MF = 1408, MEP = 2, METP = 2;
constexpr uint64_t kChoices = MT * MK * MH * kF32;    // [T·k, h]: 1 MiB
constexpr uint64_t kReceived = MT * MEP * MH * kF32;  // [T·EP, h] received (= T·k here): 1 MiB
constexpr uint64_t kEtpRows = METP * kReceived;       // both ETP ranks' received rows: 2 MiB
constexpr uint64_t kCounts = ME * MEP * METP * kF32;  // [E] from each of the 4 tp_ep ranks: 128 B

}  // namespace

Step lab06_step() {
  Step s{.lab = "lab06",
         .title =
             "one MoE layer on 4 ranks as EP=2 x ETP=2: T=256 tokens per rank, h=512, 8 experts of ffn "
             "1408, top-2, every token routed to expert 0 and expert 4 (one on each EP rank); forward "
             "and backward, f32",
         .phases = {"forward", "backward"},
         .group_size = static_cast<int>(MEP * METP),
         .group_sizes = {{"ep", static_cast<int>(MEP)},
                         {"etp", static_cast<int>(METP)},
                         {"tp_ep", static_cast<int>(MEP * METP)}},
         .sizes = {{"T", MT}, {"h", MH}, {"E", ME}, {"k", MK}, {"ffn", MF}, {"ep", MEP}, {"etp", METP}}};
  const std::string choices = tensor({MT * MK, MH}, kChoices), received = tensor({MT * MEP, MH}, kReceived),
                    both = tensor({METP * MT * MEP, MH}, kEtpRows);
  s.calls = {
      {call("forward", OpKind::all_gather, "tp_ep", kCounts, 0),
       "its output, every rank's tokens per expert " + tensor({ME * MEP * METP}, kCounts),
       "count_exchange: each rank learns how many rows every rank of its tp_ep block sends to each expert, "
       "so that the all_to_all's split sizes agree on both sides"},
      {call("forward", OpKind::all_to_all, "ep", kChoices), "the permuted choices " + choices,
       "dispatch: each choice's row goes to the EP rank holding its expert (T rows to each EP rank here)"},
      {call("forward", OpKind::all_to_all, "etp", kEtpRows),
       "ETP copies of the received rows, one for each ETP rank, " + both,
       "all_gather_v over ETP (carried as one all_to_all): each ETP rank computes its slice of the same "
       "experts, so it needs the rows its partner received too"},
      {call("forward", OpKind::all_to_all, "etp", kEtpRows),
       "fc2's partial outputs of both ETP ranks' rows " + both,
       "reduce_scatter_v over ETP (one all_to_all, then the sum): fc2 is row-parallel, each rank keeps the "
       "summed rows its own dispatch received"},
      {call("forward", OpKind::all_to_all, "ep", kReceived),
       "the experts' outputs of the received rows " + received,
       "combine: the reverse of dispatch, each row back to the rank its token lives on"},
      {call("backward", OpKind::all_to_all, "ep", kChoices), "the gradient of the combined rows " + choices,
       "combine's backward: the reverse all_to_all, with dispatch's split sizes"},
      {call("backward", OpKind::all_to_all, "etp", kEtpRows),
       "ETP copies of the received gradient rows " + both,
       "the ETP reduce-scatter's backward is an all-gather (all_gather_v)"},
      {call("backward", OpKind::all_to_all, "etp", kEtpRows),
       "the experts' partial input gradients of both ETP ranks' rows " + both,
       "the ETP all-gather's backward is a reduce-scatter (reduce_scatter_v): gate and up are "
       "column-parallel, each rank's input gradient a partial sum"},
      {call("backward", OpKind::all_to_all, "ep", kReceived), "the received rows' input gradient " + received,
       "dispatch's backward: each row's gradient back to its token's rank, with combine's split sizes"}};
  s.hints = {{"", OpKind::all_reduce,
              "no all-reduce in this step: the tokens are whole on each rank (no sequence group for the "
              "load-balancing counts), and the experts' gradient sum over edp happens in finalize (edp = 1 "
              "here)"},
             {"", OpKind::all_gather,
              "the only all_gather is the count exchange; ETP's all-gather of uneven row counts is "
              "carried by an all_to_all (all_gather_v), over the etp group"}};
  return s;
}

}  // namespace tpsp::checkers::predict
