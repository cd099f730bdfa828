// "Predict the communication" (issue 14): before implementing a lab, the learner writes the calls one
// step of that lab's layer makes — phase, op, group, dim, bytes — in labs/<lab dir>/prediction.txt,
// and `./check labNN --predict` compares them, in order, with the step's calls and explains each
// difference. The step's calls are closed forms in the grader, each lab's in checkers/labNN/predict.cpp
// beside its scenarios (step_helpers.h; they are what
// checkers/*/expected.cpp's patterns require of the same layers, at the step's sizes); they never
// come from running the learner's code. tests/predict/ checks them against the communication
// recorder of the engine's solution running the same step.
//
// The file's format (each lab's template repeats it):
//   # comment                       '#' starts a comment anywhere; blank lines are ignored
//   PHASE  OP  GROUP  dim=D  bytes=N  [reduce=sum|max]  [peer=P]
//     PHASE   one of the step's phases (forward, backward, ...: the template names them)
//     OP      all_reduce all_gather reduce_scatter all_to_all broadcast send recv barrier (c10d's names;
//             NCCL's AllReduce, ncclAllGather, ... are accepted too)
//     GROUP   tp, dp or world; lab06's expert groups ep, etp, tp_ep, edp
//     dim=    all_gather / reduce_scatter: the dim gathered or scattered along (0 = s of [s, b, h]);
//             '-' (or no dim=) for every other op
//     bytes=  S, the bytes of the tensor the call is about, as the recorder's tensor_bytes and
//             engine/comm/cost_model.h count it: the input of all_reduce, reduce_scatter, send, recv,
//             the OUTPUT (gathered, whole) tensor of all_gather. Not the bytes on the wire. Written as an
//             integer, a product (512*2*256*4) or with a unit (1MiB, 256KiB; KiB = 1024 B)
//     reduce= all_reduce / reduce_scatter only; sum when absent
//     peer=   send / recv only, required: the group rank of the other side, as seen from rank 0
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/comm/op.h"

namespace tpsp::checkers::predict {

/// Which fields of a prediction line an op has: dim= (all_gather, reduce_scatter: the dim gathered or
/// scattered), reduce= (all_reduce, reduce_scatter), peer= (send, recv).
inline bool has_dim(comm::OpKind op) {
  return op == comm::OpKind::all_gather || op == comm::OpKind::reduce_scatter;
}
inline bool has_reduce(comm::OpKind op) {
  return op == comm::OpKind::all_reduce || op == comm::OpKind::reduce_scatter;
}
inline bool has_peer(comm::OpKind op) {
  return op == comm::OpKind::send || op == comm::OpKind::recv;
}

/// One communication call as a prediction line states it, and as the engine records it on rank 0.
struct Call {
  std::string phase;  ///< "forward", "backward", ... (the step's phases)
  comm::OpKind op = comm::OpKind::all_reduce;
  std::string group;                            ///< "tp", "dp", "world", or "ep", "etp", "tp_ep", "edp"
  int64_t dim = -1;                             ///< all_gather / reduce_scatter: the dim; −1 otherwise
  comm::ReduceOp reduce = comm::ReduceOp::sum;  ///< all_reduce / reduce_scatter: the reduction
  int peer = -1;                                ///< send / recv: group rank of the other side; −1 otherwise
  uint64_t bytes = 0;                           ///< S of cost_model.h (the recorder's tensor_bytes), bytes

  /// The call as a prediction line: "forward all_reduce tp dim=- bytes=1048576" (+ reduce=max, peer=P).
  std::string line() const;
};
/// True when every field that matters for the call's op is equal (dim only for all_gather and
/// reduce_scatter, the reduction only for all_reduce and reduce_scatter, the peer only for send/recv).
bool same_call(const Call& a, const Call& b);

/// A call of the step as the engine makes it, with what a learner needs to understand it.
struct StepCall {
  Call call;
  std::string tensor;  ///< the tensor S is about: "the output Y [512, 2, 256] f32"
  std::string why;     ///< which mapping or layer makes the call, and why then
};

/// Why a call the step does not make is wrong: for a predicted call of `op` in `phase` ("" = any).
struct ExtraHint {
  std::string phase;
  comm::OpKind op;
  std::string text;
};

/// The step a lab's prediction is about.
struct Step {
  std::string lab;                  ///< "lab01"
  std::string title;                ///< one line: what runs
  std::vector<std::string> phases;  ///< the phases a line may name, in the order they run
  int group_size = 2;               ///< ranks in the group the step runs on (tp, or world for lab00)
  /// Sizes of other groups the step's calls run on, by name (lab06: {"ep", 2}, {"etp", 2}, {"tp_ep", 4});
  /// a group not listed has group_size ranks.
  std::map<std::string, int> group_sizes;
  /// Ranks in group `g` (group_sizes, else group_size).
  int size_of_group(const std::string& g) const {
    const auto it = group_sizes.find(g);
    return it == group_sizes.end() ? group_size : it->second;
  }
  std::map<std::string, int64_t> sizes;  ///< the step's sizes ("s", "b", "h", "ffn", "vocab", "n", ...)
  std::vector<StepCall> calls;           ///< rank 0's calls in issue order
  std::vector<ExtraHint> hints;          ///< explanations of calls learners tend to add
};

/// The step of `lab` ("lab00" … "lab06"); throws std::invalid_argument naming the labs that have one.
const Step& step_of(const std::string& lab);
/// The labs that have a step, in order.
std::vector<std::string> step_labs();

/// A parsed prediction line.
struct PredictedCall {
  int line = 0;  ///< 1-based line number in the file
  Call call;
};
/// The calls of a prediction file, or its errors ("line 7: ..." naming the rule broken).
struct Parsed {
  std::vector<PredictedCall> calls;
  std::vector<std::string> errors;
};
/// Parses a prediction file's text against `step` (its phases and group size). Never throws.
Parsed parse_prediction(const std::string& text, const Step& step);

/// The verdict on a prediction.
struct Outcome {
  enum class Status { right, differs, unfilled, bad_lines };
  Status status = Status::unfilled;
  int right = 0;                    ///< lines equal to the step's call at their place
  int differences = 0;              ///< numbered differences (wrong, out of place, missing, extra calls)
  int expected = 0;                 ///< calls the step makes
  std::vector<std::string> report;  ///< what ./check --predict prints, one entry per line
  /// One line: "2 of 2 calls right", "1 of 2 calls right, 2 differences", "not filled in yet", ...
  std::string summary() const;
};
/// Compares the prediction `text` with `step`'s calls, in order, and explains every difference.
Outcome check_prediction(const std::string& text, const Step& step);

/// "1 MiB", "256 KiB", "4 KiB", "100 B": bytes in the largest binary unit that divides them.
std::string human_bytes(uint64_t bytes);

}  // namespace tpsp::checkers::predict
