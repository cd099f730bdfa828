// lab04 in the grader: closed forms of the linear layers (engine ops on the whole tensors, no lab
// code), the ring's send/recv pattern, and the timeline: every collective is in flight across the
// GEMM it must hide, and under the emulated link most of the communication time is covered.
#include <fmt/format.h>

#include "checkers/grader/timeline.h"
#include "checkers/lab01/linear_expected.h"
#include "checkers/lab04/lab04.h"
#include "checkers/scenario.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/matmul.h"

namespace tpsp::checkers {

namespace {

using comm::OpKind;
using namespace lab04;

/// y = x·Wᵀ (+ b), dX = dY·W, dW = dW0 + dYᵀ·x, db = db0 + Σ dY, on whole tensors.
struct Dense {
  Tensor y, dx, dw, db;
};
Dense dense(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& dy, const Tensor& dw0,
            const Tensor& db0) {
  Dense d{ops::matmul_forward(x, w), ops::matmul_dgrad(dy, w), dw0.clone(), db0.clone()};
  if (b.defined()) ops::bias_add_forward(d.y, b);
  ops::matmul_wgrad(dy, x, d.dw);
  if (db0.defined()) ops::add_(d.db, ops::bias_add_backward(dy));
  return d;
}

/// tp−1 sends to rank r+1 and tp−1 recvs from rank r−1 of `bytes` each: one ring.
void ring(std::vector<ExpectedCall>& calls, int tp, uint64_t bytes, const std::string& what) {
  for (int k = 0; k + 1 < tp; ++k) {
    calls.push_back(
        {.op = OpKind::send, .tensor_bytes = bytes, .what = what + ": send to rank r+1", .peer_offset = 1});
    calls.push_back({.op = OpKind::recv,
                     .tensor_bytes = bytes,
                     .what = what + ": recv from rank r−1",
                     .peer_offset = -1});
  }
}

/// The ring's sends and recvs in `phase` must each be in flight across a GEMM labelled `gemm`.
void ring_rules(std::vector<HideRule>& rules, const std::string& phase, const std::string& gemm) {
  for (const OpKind op : {OpKind::send, OpKind::recv})
    rules.push_back(
        {phase, op, "", gemm, "a chunk's " + gemm + " GEMM (each ring step multiplies while it sends)"});
}

// ---- ColumnParallelLinear -------------------------------------------------------------------
// The layer, then the same weights frozen (no dweight) with skip_bias_add, and without SP with
// gather_output (layers in phases "frozen.*" and "gather_output.*").
ExpectedOutputs expected_column(uint64_t s, int, bool sp) {
  const InputDraw whole(s), rows = whole.split(0);  // as the ranks hold them (run.cpp)
  const Tensor x = exact({S, B, IN}, sp ? rows : whole, "col.x"), w = exact({OUT, IN}, rows, "col.w");
  const Tensor b = exact({OUT}, rows, "col.b"), dw0 = exact({OUT, IN}, rows, "col.dw0"),
               db0 = exact({OUT}, rows, "col.db0");
  const Dense d = dense(x, w, b, exact({S, B, OUT}, whole.split(2), "col.dy"), dw0, db0);
  const Placement dx_placement = sp ? Placement::Shard(0) : Placement::Replicate();
  Expected y{d.y, Placement::Shard(2)};
  y.meaning =
      "y = X·A_rᵀ + b_r: rows [k·s/tp, (k+1)·s/tp) of y come from rank k's input shard — at ring step j you "
      "hold "
      "rank (r−j) mod tp's shard";
  ExpectedOutputs out{{"y", y},
                      {"dx", {d.dx, dx_placement}},
                      {"dweight", {d.dw, Placement::Shard(0)}},
                      {"dbias", {d.db, Placement::Shard(0)}},
                      {"frozen.y", {ops::matmul_forward(x, w), Placement::Shard(2)}},
                      {"frozen.dx", {d.dx, dx_placement}},
                      {"frozen.dbias", {d.db, Placement::Shard(0)}}};
  if (!sp) {  // the gathered output's dY is every rank's, whole
    const Dense g = dense(x, w, b, exact({S, B, OUT}, whole, "col.dy"), dw0, db0);
    out.insert({{"gather_output.y", {g.y, Placement::Replicate()}},
                {"gather_output.dx", {g.dx, Placement::Replicate()}},
                {"gather_output.dweight", {g.dw, Placement::Shard(0)}},
                {"gather_output.dbias", {g.db, Placement::Shard(0)}}});
  }
  return out;
}

Pattern pattern_column(int tp, bool sp) {
  if (tp == 1) return {};
  constexpr uint64_t whole = S * B * IN * 4;
  if (!sp) {
    const ExpectedCall reduce{OpKind::all_reduce, whole, "all-reduce of dX (f's backward)"};
    return {{"backward", {reduce}},
            {"frozen.backward", {reduce}},
            {"gather_output.forward",
             {{OpKind::all_gather, S * B * OUT * 4, "gather_output: all-gather of Y's last dim", 2}}},
            {"gather_output.backward", {reduce}}};
  }
  Pattern p;
  ring(p["forward"], tp, whole / tp, "all_gather_matmul ring of the input shards [s/tp, b, in]");
  p["frozen.forward"] = p["forward"];
  p["backward"] = {{OpKind::all_gather, whole, "all-gather of the saved input shard for the weight gradient"},
                   {OpKind::reduce_scatter, whole, "reduce-scatter of dX"}};
  p["frozen.backward"] = {
      {OpKind::reduce_scatter, whole, "reduce-scatter of dX (a frozen weight needs no gathered input)"}};
  return p;
}

/// The main layer's rules (also fc1's in overlap_under_link).
std::vector<HideRule> column_rules(bool sp) {
  const std::string wgrad = "the weight-gradient GEMM dW = dYᵀ·X";
  if (!sp) return {{"backward", OpKind::all_reduce, "", "wgrad", wgrad}};
  std::vector<HideRule> rules;
  ring_rules(rules, "forward", "forward");
  rules.push_back({"backward", OpKind::all_gather, "", "dgrad",
                   "the dgrad GEMM dX = dY·A (it does not need the gathered input)"});
  rules.push_back({"backward", OpKind::reduce_scatter, "", "wgrad", wgrad});
  return rules;
}

/// column_overlap's rules: the main layer's, the frozen layer's forward ring (its reduction has no
/// GEMM left to hide behind) and the gather_output layer's all-reduce of dX behind its wgrad.
std::vector<HideRule> column_scenario_rules(bool sp) {
  std::vector<HideRule> rules = column_rules(sp);
  if (sp)
    ring_rules(rules, "frozen.forward", "forward");
  else
    rules.push_back(
        {"gather_output.backward", OpKind::all_reduce, "", "wgrad", "the weight-gradient GEMM dW = dYᵀ·X"});
  return rules;
}

// ---- RowParallelLinear ----------------------------------------------------------------------
// The layer, then without SP the same weights with input_is_parallel=false and skip_bias_add
// (phases "input_not_parallel.*").
ExpectedOutputs expected_row(uint64_t s, int, bool sp) {
  const InputDraw whole(s), cols = whole.split(1);  // as the ranks hold them (run.cpp)
  const Tensor w = exact({IN, OUT}, cols, "row.w"), b = exact({IN}, whole, "row.b"),
               dy = exact({S, B, IN}, sp ? whole.split(0) : whole, "row.dy"),
               dw0 = exact({IN, OUT}, cols, "row.dw0");
  const Dense d = dense(exact({S, B, OUT}, whole.split(2), "row.x"), w, b, dy, dw0, Tensor::zeros({IN}));
  // Under SP each rank's bias gradient covers its own tokens (summed over TP afterwards).
  ExpectedOutputs out{{"y", {d.y, sp ? Placement::Shard(0) : Placement::Replicate()}},
                      {"dx", {d.dx, Placement::Shard(2)}},
                      {"dweight", {d.dw, Placement::Shard(1)}},
                      {"dbias", {d.db, sp ? Placement::Partial() : Placement::Replicate()}}};
  if (!sp) {  // the layer splits a replicated x itself: x is every rank's, whole
    const Tensor x = exact({S, B, OUT}, whole, "row.x");
    const Dense g = dense(x, w, b, dy, dw0, Tensor::zeros({IN}));
    out.insert({{"input_not_parallel.y", {ops::matmul_forward(x, w), Placement::Replicate()}},
                {"input_not_parallel.dx", {g.dx, Placement::Replicate()}},
                {"input_not_parallel.dweight", {g.dw, Placement::Shard(1)}},
                {"input_not_parallel.dbias", {g.db, Placement::Replicate()}}});
  }
  return out;
}

Pattern pattern_row(int tp, bool sp) {
  if (tp == 1) return {};
  constexpr uint64_t chunk_bytes = S * B * IN * 4;  // one [s/tp, b, out] chunk is whole/tp
  Pattern p;
  if (!sp) {
    const ExpectedCall g{OpKind::all_reduce, S * B * IN * 4, "g: all-reduce of the partial Y"};
    p["forward"] = {g};
    p["input_not_parallel.forward"] = {g};
    p["input_not_parallel.backward"] = {
        {OpKind::all_gather, S * B * OUT * 4, "scatter's backward: all-gather of dX's last dim", 2}};
    return p;
  }
  ring(p["forward"], tp, chunk_bytes / tp, "matmul_reduce_scatter ring of the running sums [s/tp, b, out]");
  ring(p["backward"], tp, chunk_bytes / tp, "all_gather_matmul ring of the dY shards [s/tp, b, out]");
  return p;
}

std::vector<HideRule> row_rules(bool sp) {
  std::vector<HideRule> rules;  // without SP: g's all-reduce needs the whole product, nothing to hide
  if (!sp) return rules;
  ring_rules(rules, "forward", "forward");
  ring_rules(rules, "backward", "dgrad");
  return rules;
}

// ---- fc1 → fc2 under the emulated link ------------------------------------------------------
ExpectedOutputs expected_overlap(uint64_t s, int, bool) {
  const Tensor x = random({OS, OB, OH}, s, 0, "x", 1), dy = random({OS, OB, OH}, s, 0, "dy", 1);
  const Tensor w1 = random({OFFN, OH}, s, 0, "w1", 0.09f), w2 = random({OH, OFFN}, s, 1, "w2", 0.011f);
  const Tensor h = ops::matmul_forward(x, w1);
  const Dense d2 = dense(h, w2, Tensor(), dy, Tensor::zeros({OH, OFFN}), Tensor());
  const Dense d1 = dense(x, w1, Tensor(), d2.dx, Tensor::zeros({OFFN, OH}), Tensor());
  auto repeated = [](const Tensor& dw, int dim) {  // kRepeats backward passes accumulate
    Tensor sum = Tensor::zeros(dw.shape());
    for (int i = 0; i < kRepeats; ++i) ops::add_(sum, dw);
    return Expected{.whole = sum, .placement = Placement::Shard(dim), .passes = kRepeats};
  };
  return {{"y", {d2.y, Placement::Shard(0)}},
          {"dx", {d1.dx, Placement::Shard(0)}},
          {"fc1.dweight", repeated(d1.dw, 0)},
          {"fc2.dweight", repeated(d2.dw, 1)}};
}

Pattern pattern_overlap(int tp, bool) {
  constexpr uint64_t whole = OS * OB * OH * 4;
  Pattern p;
  for (int i = 0; i < kRepeats; ++i) {
    std::vector<ExpectedCall>& fwd = p[phase_name("forward", i)];
    ring(fwd, tp, whole / tp, "fc1's all_gather_matmul ring");
    ring(fwd, tp, whole / tp, "fc2's matmul_reduce_scatter ring");
    std::vector<ExpectedCall>& bwd = p[phase_name("backward", i)];
    ring(bwd, tp, whole / tp, "fc2's all_gather_matmul ring of dY");
    bwd.push_back({OpKind::all_gather, whole, "fc1: all-gather of the saved input shard"});
    bwd.push_back({OpKind::reduce_scatter, whole, "fc1: reduce-scatter of dX"});
    for (int k = 0; k < 2; ++k)
      p["sync"].push_back({OpKind::barrier, 0, "the checker's barrier between the phases"});
  }
  return p;
}

std::vector<std::string> timeline_overlap(int, bool, const std::vector<RankTimeline>& ranks) {
  // The order rules on the first repeat (the code is the same in every repeat); the overlap figure
  // on the best one.
  std::vector<HideRule> rules;
  for (HideRule r : column_rules(true)) {  // fc1: its forward ring, its async backward
    r.phase = phase_name(r.phase.c_str(), 0);
    rules.push_back(r);
  }
  ring_rules(rules, phase_name("backward", 0), "dgrad");  // fc2's backward ring
  std::vector<std::string> out = check_hidden(ranks, rules);
  std::vector<std::string> forwards, backwards;
  for (int i = 0; i < kRepeats; ++i) {
    forwards.push_back(phase_name("forward", i));
    backwards.push_back(phase_name("backward", i));
  }
  for (const auto& phases : {forwards, backwards})
    if (std::string p = check_overlap(ranks, phases, kMinOverlap, kLink); !p.empty()) out.push_back(p);
  return out;
}

// ---- the aliasing hazard --------------------------------------------------------------------
ExpectedOutputs expected_aliasing(uint64_t, int, bool) {
  const Tensor ones = Tensor::full({4, 1, 2}, 1.f);
  const Dense d1 = dense(alias_x1(), alias_w1(), Tensor(), ones, Tensor::zeros({2, 2}), Tensor());
  const Dense d2 = dense(alias_x2(), alias_w2(), Tensor(), ones, Tensor::zeros({2, 2}), Tensor());
  Expected dw1{d1.dw, Placement::Shard(0)};
  dw1.meaning =
      "dW1 = dY1ᵀ·X1 = [[4, 2], [4, 2]]; [[8, 6], [8, 6]] are the column sums of X2 = X1 + 1: the input "
      "layer 1 "
      "saved for backward was overwritten by layer 2's forward — it aliases a communication buffer that the "
      "next "
      "layer reused. Save the input shard you were given (or a tensor nobody else writes), not a shared "
      "buffer";
  return {{"y1", {d1.y, Placement::Shard(2)}},
          {"dx1", {d1.dx, Placement::Shard(0)}},
          {"layer1.dweight", dw1},
          {"layer2.dweight", {d2.dw, Placement::Shard(0)}}};
}

void add_scenarios(std::vector<Scenario>& out) {
  out.push_back({.lab = "lab04",
                 .name = "column_overlap",
                 .summary =
                     "ColumnParallelLinear with tp_comm_overlap: the forward ring, the async backward; a "
                     "frozen weight, gather_output",
                 .sp_variants = true,
                 .expected = expected_column,
                 .pattern = pattern_column,
                 .timeline = [](int tp, bool sp, const std::vector<RankTimeline>& r) {
                   return tp == 1 ? std::vector<std::string>{} : check_hidden(r, column_scenario_rules(sp));
                 }});
  out.push_back(
      {.lab = "lab04",
       .name = "row_overlap",
       .summary = "RowParallelLinear with tp_comm_overlap: under SP GEMM + reduce-scatter and all-gather + "
                  "dgrad rings; without SP g's all-reduce, and input_is_parallel=false",
       .sp_variants = true,
       .expected = expected_row,
       .pattern = pattern_row,
       .timeline = [](int tp, bool sp, const std::vector<RankTimeline>& r) {
         return tp == 1 ? std::vector<std::string>{} : check_hidden(r, row_rules(sp));
       }});
  out.push_back(
      {.lab = "lab04",
       .name = "overlap_under_link",
       .summary = fmt::format("fc1 → fc2 with SP at TPSP_LINK={}: ≥ {:.0f}% of the communication hidden",
                              kLink, 100 * kMinOverlap),
       .tp_sizes = {2},
       .sp_only = true,
       .dp_layout = false,
       .budget_s = 40,
       .expected = expected_overlap,
       .pattern = pattern_overlap,
       .timeline = timeline_overlap});
  out.push_back({.lab = "lab04",
                 .name = "aliasing_hazard",
                 .summary = "two stacked column layers: layer 1's saved input must survive layer 2's forward",
                 .tp_sizes = {2},
                 .sp_only = true,
                 .dp_layout = false,
                 .expected = expected_aliasing});
  out.push_back(
      {.lab = "lab04",
       .name = "ring_refuses_uneven_s",
       .summary = "matmul_reduce_scatter refuses s not divisible by tp (ShapeError) before any send or recv",
       .tp_sizes = {2, 3},
       .expected = [](uint64_t, int tp, bool) {
         ExpectedOutputs out;
         expect_accepted(
             out, "s_divisible_by_tp",
             "matmul_reduce_scatter of s=" + std::to_string(2 * tp) + " rows at tp=" + std::to_string(tp));
         expect_refusal_naming(
             out, "s_not_divisible_by_tp",
             "matmul_reduce_scatter raised ShapeError for s=" + std::to_string(2 * tp + 1) +
                 " rows at tp=" + std::to_string(tp),
             "it accepted a sequence it cannot split into tp chunks (rows were dropped or the ring "
             "ran on chunks of different sizes)",
             "the ring", "s=" + std::to_string(2 * tp + 1) + " and tp=" + std::to_string(tp));
         return out;
       }});
  // forward_overlap takes on lab01's contract: an x whose last dim does not match the weight is refused
  // before any communication (under SP before the ring's first send).
  out.push_back(
      {.lab = "lab04",
       .name = "row_overlap_refuses_wrong_in",
       .summary =
           "RowParallelLinear with tp_comm_overlap refuses an x whose last dim does not match its weight",
       .tp_sizes = {2, 3},
       .sp_variants = true,
       .expected = [](uint64_t, int tp, bool sp) { return lab01::expected_row_refuses(tp, sp); }});
}

}  // namespace

const LabScenarios kScenarios("lab04", add_scenarios);

}  // namespace tpsp::checkers
