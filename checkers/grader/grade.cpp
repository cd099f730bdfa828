#include "checkers/grader/grade.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "checkers/grader/diagnose.h"
#include "checkers/grader/hints.h"
#include "checkers/grader/todo_contracts.h"
#include "checkers/inputs.h"
#include "checkers/sandbox/witness_judge.h"
#include "engine/error.h"
#include "engine/io/npy.h"
#include "engine/lab_todo.h"
#include "engine/ops/elementwise.h"

namespace tpsp::checkers {

using comm::OpKind;

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

/// The last `n` lines of s, indented.
std::string last_lines(const std::string& s, int n) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out;
  for (std::size_t i = lines.size() > static_cast<std::size_t>(n) ? lines.size() - n : 0; i < lines.size();
       ++i)
    out += "      | " + lines[i] + "\n";
  return out;
}

/// "[i, j, k]" of a multi-index.
std::string index_str(std::vector<int64_t> idx) {
  return shape_str(idx);
}

/// Multi-index of a flat position in `shape`.
std::vector<int64_t> unflatten(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(double(t.at(i))));
  return m;
}

/// The expected calls' descriptions for one (op, bytes) of one phase: one, or "one of: a | b" when
/// several calls of that phase look alike on the wire.
std::string describe(std::vector<std::string> whats) {
  std::sort(whats.begin(), whats.end());
  whats.erase(std::unique(whats.begin(), whats.end()), whats.end());
  if (whats.size() == 1) return whats[0];
  std::string out = "one of: ";
  for (std::size_t i = 0; i < whats.size(); ++i) out += (i ? " | " : "") + whats[i];
  return out;
}

/// "all_gather on group tp along dim 2", "all_reduce (max) on group tp", "send to rank 1 on group tp":
/// the dim, the reduction and the peer for the ops that have one.
std::string call_key(const std::string& op, const std::string& group, int64_t dim, const std::string& reduce,
                     int peer) {
  std::string key = op;
  if (op == "all_reduce" || op == "reduce_scatter") key += " (" + reduce + ")";
  if (op == "send") key += " to rank " + std::to_string(peer);
  if (op == "recv") key += " from rank " + std::to_string(peer);
  key += " on group " + group;
  if (op == "all_gather" || op == "reduce_scatter") key += " along dim " + std::to_string(dim);
  return key;
}

/// A rank of the run: "rank 1", or "rank 1 of replica 1 (world rank 3)" when dp > 1.
std::string rank_name(const Layout& l, int world_rank) {
  if (l.dp == 1) return "rank " + std::to_string(world_rank);
  return fmt::format("rank {} of replica {} (world rank {})", world_rank % l.tp, world_rank / l.tp,
                     world_rank);
}

/// Compares the calls each rank recorded with the pattern; "" or the first rank's differences.
std::string check_pattern(const Scenario& sc, const Layout& layout, bool sp, uint64_t seed,
                          const std::vector<RankTimeline>& ranks) {
  if (!sc.pattern && !sc.seeded_pattern) return "";  // a scenario without a pattern checks numbers only
  const Pattern pattern =
      sc.seeded_pattern ? sc.seeded_pattern(seed, layout.tp, sp) : sc.pattern(layout.tp, sp);
  const auto labelled = [&](std::string key, const std::string& label) {
    return sc.pattern_labels ? key + " labelled '" + label + "'" : key;
  };
  for (int w = 0; w < layout.world(); ++w) {
    using Key = std::pair<std::string, uint64_t>;
    std::map<std::string, std::multiset<Key>> got, want;
    std::map<std::pair<std::string, Key>, std::vector<std::string>> what;  // (phase, call) → descriptions
    for (const TimedCall& c : ranks[static_cast<std::size_t>(w)].calls) {
      const trace::CommRecord& r = c.rec;
      if (c.phase == "setup" || r.op == OpKind::new_group) continue;
      got[c.phase].insert(
          {labelled(call_key(comm::op_name(r.op), r.group, r.dim, comm::reduce_op_name(r.reduce), r.peer),
                    r.label),
           r.tensor_bytes});
    }
    for (const auto& [phase, calls] : pattern)
      for (const ExpectedCall& c : calls) {
        const int tp_rank = w % layout.tp;
        const int peer = ((tp_rank + c.peer_offset) % layout.tp + layout.tp) % layout.tp;
        const uint64_t bytes =
            c.rank_bytes.empty() ? c.tensor_bytes : c.rank_bytes.at(static_cast<std::size_t>(w));
        const Key key{
            labelled(call_key(comm::op_name(c.op), c.group, c.dim, comm::reduce_op_name(c.reduce), peer),
                     c.label),
            bytes};
        want[phase].insert(key);
        what[{phase, key}].push_back(c.what);
      }
    std::set<std::string> phases;
    for (const auto& [p, _] : got) phases.insert(p);
    for (const auto& [p, _] : want) phases.insert(p);
    std::string msg;
    for (const std::string& phase : phases) {
      auto g = got[phase];
      for (const Key& c : want[phase])
        if (auto it = g.find(c); it != g.end())
          g.erase(it);
        else
          msg += fmt::format("\n      {}: missing {} of {} bytes ({})", phase, c.first, c.second,
                             describe(what[{phase, c}]));
      for (const Key& c : g)
        msg += fmt::format("\n      {}: unexpected {} of {} bytes", phase, c.first, c.second);
    }
    if (!msg.empty())
      return fmt::format("communication on {} differs from the expected pattern:{}", rank_name(layout, w),
                         msg);
  }
  return "";
}

/// "" when every async call was waited, else the calls of the first rank that left one unwaited.
std::string check_waited(const Layout& layout, const std::vector<RankTimeline>& ranks) {
  for (int w = 0; w < layout.world(); ++w) {
    std::string unwaited;
    for (const TimedCall& c : ranks[static_cast<std::size_t>(w)].calls) {
      const trace::CommRecord& r = c.rec;
      if (r.waited) continue;
      const bool p2p = r.op == OpKind::send || r.op == OpKind::recv;
      unwaited += fmt::format("\n      {}: {} {}#{} '{}' was issued, never waited", c.phase,
                              comm::op_name(r.op), p2p ? "p2p" : "", r.seq, r.label);
    }
    if (!unwaited.empty())
      return fmt::format(
          "on {} an async call was never waited (its Work was dropped, or kept without wait()): the call may "
          "still "
          "read or write its buffers after your function returned, and its errors are lost{}",
          rank_name(layout, w), unwaited);
  }
  return "";
}

/// Every rank's calls and compute spans, parsed once from its result.json (engine/trace/record_json.h).
/// An entry no rank program writes (an unknown op, a field of the wrong type: a result.json written by
/// something else) is a problem, named with its rank and index.
std::vector<RankTimeline> timelines(const Layout& layout, const std::vector<json>& results,
                                    std::vector<std::string>& problems) {
  std::vector<RankTimeline> out;
  for (std::size_t w = 0; w < results.size(); ++w) {
    RankTimeline t;
    const json& r = results[w];
    const json calls = r.is_object() ? r.value("calls", json::array()) : json::array();
    const json compute = r.is_object() ? r.value("compute", json::array()) : json::array();
    const auto unreadable = [&](const char* list, std::size_t k) {
      problems.push_back(fmt::format("{}'s result.json: {}[{}] is not a record any rank program writes",
                                     rank_name(layout, static_cast<int>(w)), list, k));
    };
    for (std::size_t k = 0; k < (calls.is_array() ? calls.size() : 0); ++k)
      if (auto c = trace::call_from_json(calls[k]))
        t.calls.push_back(std::move(*c));
      else
        unreadable("calls", k);
    for (std::size_t k = 0; k < (compute.is_array() ? compute.size() : 0); ++k)
      if (auto sp = trace::span_from_json(compute[k]))
        t.compute.push_back(std::move(*sp));
      else
        unreadable("compute", k);
    out.push_back(std::move(t));
  }
  return out;
}

/// True when every rank's tensor is (within tolerance) the whole expected sum.
bool every_rank_holds_the_sum(const std::vector<Tensor>& got, const Tensor& whole, const Tolerance& tol) {
  const double atol = tol.atol_rel * std::max(1e-6, max_abs(whole));
  for (const Tensor& g : got)
    if (!all_close(g, whole, tol.rtol, atol)) return false;
  return true;
}

/// Compares every expected output of one TP group (replica d) with the ranks' dumps. The outputs whose
/// difference has a signature ("hint: …") come first: a wrong value upstream makes every output after it
/// differ, and the named one is usually the cause (a wrong group index shows in k_rotated, then in ten
/// gradients).
void check_outputs(const ExpectedOutputs& want, const Layout& layout, int replica, const std::string& dir,
                   const Tolerance& tol, std::vector<std::string>& all_problems) {
  std::vector<std::string> problems;
  const auto flush = [&] {
    std::stable_partition(problems.begin(), problems.end(),
                          [](const std::string& p) { return p.find("\n      hint:") != std::string::npos; });
    all_problems.insert(all_problems.end(), problems.begin(), problems.end());
  };
  for (const auto& [name, spec] : want) {
    std::vector<Tensor> got;
    for (int r = 0; r < layout.tp; ++r) {
      const int w = replica * layout.tp + r;
      const fs::path p = fs::path(dir) / ("rank" + std::to_string(w)) / (name + ".npy");
      if (!fs::exists(p)) {
        problems.push_back(fmt::format("{}: {} produced no output", name, rank_name(layout, w)));
        break;
      }
      got.push_back(io::load_npy(p.string()));
    }
    if (static_cast<int>(got.size()) != layout.tp) continue;
    if (spec.placement.is_partial()) {
      // Each rank holds a partial sum; their sum must be the whole.
      bool same = true;
      for (const Tensor& g : got) same = same && g.shape() == spec.whole.shape();
      Tensor sum(spec.whole.shape());
      if (same)
        for (const Tensor& g : got) ops::add_(sum, g);
      Expected whole = spec;
      whole.placement = Placement::Replicate();
      std::string p =
          same ? compare_output(name + " (summed over the TP ranks)", whole, {sum}, 0, tol)
               : fmt::format("{}: a partial sum of shape {} is expected on every rank, got {} on rank 0",
                             name, shape_str(spec.whole.shape()), shape_str(got[0].shape()));
      if (!p.empty() && same && layout.tp > 1 && every_rank_holds_the_sum(got, spec.whole, tol)) {
        if (const auto h = p.find("\n      hint:"); h != std::string::npos)
          p.resize(h);  // this one is sharper
        p += fmt::format(
            "\n      hint: every rank holds the whole sum (the sum over the ranks is tp={} times it): a "
            "partial "
            "output must hold only this rank's own share (e.g. its own tokens under SP), not values that "
            "were already gathered or reduced",
            layout.tp);
      }
      if (!p.empty()) problems.push_back(layout.dp > 1 ? fmt::format("replica {}: {}", replica, p) : p);
      continue;
    }
    for (int r = 0; r < layout.tp; ++r) {
      std::string p = compare_output(name, spec, got, r, tol);
      if (p.empty()) continue;
      if (layout.dp > 1)  // name the replica in the first line: "y on rank 1 of replica 1 (world rank 3) (…)"
        if (const std::string at = fmt::format(" on rank {} (", r); p.find(at) != std::string::npos)
          p.replace(p.find(at), at.size() - 1, " on " + rank_name(layout, replica * layout.tp + r) + " ");
      problems.push_back(p);
      break;  // one rank per tensor is enough to read
    }
  }
  flush();
}

}  // namespace

std::string Layout::str() const {
  return dp == 1 ? fmt::format("tp={}", tp) : fmt::format("dp={}×tp={}", dp, tp);
}

std::string compare_output(const std::string& name, const Expected& spec, const std::vector<Tensor>& all_got,
                           int rank, const Tolerance& tol) {
  const int tp = static_cast<int>(all_got.size());
  const Tensor& whole = spec.whole;
  const Tensor& got = all_got[static_cast<std::size_t>(rank)];
  const double atol = spec.atol >= 0 ? spec.atol : tol.atol_rel * std::max(1e-6, max_abs(whole));
  const Placement& placement = spec.placement;
  try {
    check_placement(placement, whole.shape(), tp);
  } catch (const ShapeError& e) {
    return fmt::format("{}: the expected whole {} cannot be laid out {} over tp={}: {} (a checker bug)", name,
                       shape_str(whole.shape()), placement.code(), tp, e.what());
  }
  const std::string where = shard_range_str(placement, whole.shape(), rank, tp);
  Tensor want = placement.is_shard() ? shard_of(whole, placement, rank, tp) : whole;
  Tensor g = got;
  const Diagnosis diag{spec.placement, spec.passes, tol.rtol, atol};
  if (g.shape() != want.shape())
    return fmt::format("{} on rank {} ({}): {}", name, rank, where,
                       diagnose(g, want, whole, all_got, rank, diag));
  if (placement == Placement::Shard(0) && spec.real_rows >= 0) {
    // Padded vocabulary: compare only the rows of this shard that exist in the real vocabulary.
    const int64_t per = want.size(0), real = std::clamp<int64_t>(spec.real_rows - rank * per, 0, per);
    want = want.slice0(0, real).clone(), g = got.slice0(0, real).clone();
  }
  int64_t bad = 0, worst = -1;
  double worst_excess = -1;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double w = want.at(i), d = std::fabs(double(g.at(i)) - w), allowed = atol + tol.rtol * std::fabs(w);
    if (!(d <= allowed)) {
      ++bad;
      const double excess = std::isnan(d) ? 1e300 : d - allowed;
      if (excess > worst_excess) worst_excess = excess, worst = i;
    }
  }
  if (bad == 0) return "";
  // Global index of the worst element: the local index shifted by the shard's offset.
  const std::vector<int64_t> idx =
      global_index(unflatten(worst, g.shape()), placement, whole.shape(), rank, tp);
  // An output with a stated meaning (a 0/1 flag, a byte count) is explained by it, not by a signature.
  const std::string hint = spec.meaning.empty() ? diagnose(g, want, whole, all_got, rank, diag) : "";
  return fmt::format(
      "{} on rank {} ({}): {} of {} elements differ; worst at global index {}: got {:.6g}, want {:.6g}{}{}",
      name, rank, where, bad, g.numel(), index_str(idx), g.at(worst), want.at(worst),
      spec.meaning.empty() ? "" : "\n      (" + spec.meaning + ")",
      hint.empty() ? "" : "\n      hint: " + hint);
}

GradeResult grade(const Scenario& sc, const Layout& layout, bool sp, const ExpectedOutputs& want,
                  const RunRecord& run, const Tolerance& tol) {
  GradeResult res{sc.id(), layout, sp, Verdict::failed, {}, 0, sc.host_code};
  const int world = layout.world();
  std::vector<json> results(static_cast<std::size_t>(world));
  for (int w = 0; w < world; ++w) {
    const fs::path p = fs::path(run.dir) / ("rank" + std::to_string(w)) / "result.json";
    if (fs::exists(p)) results[w] = json::parse(std::ifstream(p), nullptr, false);
  }
  // 1. Did every rank finish? TODOs first: they are the learner's next step.
  for (int w = 0; w < world; ++w)
    if (results[w].is_object() && results[w].value("status", "") == "todo") {
      const std::string msg = results[w].value("message", "");
      const LabTodo t = parse_lab_todo(msg);
      if (t.lab != sc.lab) {
        res.verdict = Verdict::needs_other;
        res.problems.push_back("needs " + t.brief() + ", not implemented in your copy yet");
      } else {
        res.verdict = Verdict::todo;
        res.problems.push_back(todo_report(msg));
        // The TODO states the task's contract; the guided text is one command away.
        if (t.what.size() > t.lab.size() + 1)
          res.problems.push_back("stuck? " + hint_command(t.lab, t.what.substr(t.lab.size() + 1)) +
                                 " prints a hint for this task");
      }
      return res;
    }
  std::string missing;
  for (int w = 0; w < world; ++w) {
    if (!results[w].is_object())
      missing += (missing.empty() ? "" : ", ") + std::to_string(w);
    else if (results[w].value("status", "") != "ok")
      res.problems.push_back(
          fmt::format("{} raised: {}", rank_name(layout, w), results[w].value("message", "")));
  }
  if (!res.problems.empty() || !missing.empty()) {
    // Under ./grade a rank the witness relay cut off raised because of it: say why (the record of a run
    // that broke off is not compared; its protocol violations are).
    if (run.witness)
      for (const std::string& p : *run.witness)
        if (p.find("broke the relay's protocol") != std::string::npos)
          res.problems.push_back("witness: " + p);
    // An error on one rank is often the echo of another rank's crash, hang or skipped call: show
    // which ranks never finished and what the launcher saw.
    if (!missing.empty())
      res.problems.push_back(fmt::format(
          "{}; the launcher exited {} (a crash, a run past its time budget, or a desynchronised collective). "
          "Its last lines:\n{}",
          "ranks without a result: " + missing, run.launcher_code, last_lines(run.launcher_log, 16)));
    return res;
  }
  // Where the ranks ran the learner's code: on the host exactly for the scenarios declared host code.
  for (int w = 0; w < world; ++w) {
    const auto said = results[w].find("host_code");  // a rank wrote it: anything but true is false
    if ((said != results[w].end() && *said == true) != sc.host_code)
      res.problems.push_back(fmt::format(
          "{} {} the scenario host code (RunContext::run_on_host), but checkers/{}/expected.cpp {} "
          "(Scenario::host_code): the rank function and the scenario disagree",
          rank_name(layout, w), sc.host_code ? "did not declare" : "declared", sc.lab,
          sc.host_code ? "does" : "does not"));
  }
  // 2. Numbers: every output of every replica against the expected whole tensor.
  for (int d = 0; d < layout.dp; ++d) check_outputs(want, layout, d, run.dir, tol, res.problems);
  // 3. Communication: the calls on the TP group per phase, against the expected pattern.
  const std::vector<RankTimeline> ranks = timelines(layout, results, res.problems);
  if (std::string p = check_pattern(sc, layout, sp, run.seed, ranks); !p.empty()) res.problems.push_back(p);
  if (std::string p = check_waited(layout, ranks); !p.empty()) res.problems.push_back(p);
  // Under ./grade: that record against what the grader's relay really carried
  // (checkers/sandbox/witness_judge.h).
  if (run.witness)
    if (std::string p = witness_problem(*run.witness); !p.empty()) res.problems.push_back(p);
  if (sc.timeline)  // 4. Timing: what was in flight while what computed (lab04)
    for (std::string& p : sc.timeline(layout.tp, sp, ranks)) res.problems.push_back(std::move(p));
  // Every rank wrote its results, but a rank that then crashed or hung (e.g. in an exit handler)
  // still fails the run.
  if (run.launcher_code != 0)
    res.problems.push_back(
        fmt::format("every rank wrote its results, but the job did not end cleanly (the launcher exited {}). "
                    "Its last lines:\n{}",
                    run.launcher_code, last_lines(run.launcher_log, 16)));
  res.verdict = res.problems.empty() ? Verdict::passed : Verdict::failed;
  return res;
}

}  // namespace tpsp::checkers
