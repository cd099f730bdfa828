// The witness's verdict (witness_judge.h).
#include "checkers/sandbox/witness_judge.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/comm/op.h"
#include "engine/trace/record_json.h"

namespace tpsp::checkers {

namespace {

using comm::OpKind;
using nlohmann::json;
namespace fs = std::filesystem;

/// One call as both sides can state it: what the transport was handed, and in which phase.
struct Seen {
  std::string op;
  uint64_t bytes = 0;
  int group_size = 0;  // of the group instance the call ran in
  std::string reduce;
  int arg = -1;
  std::string phase;
  std::vector<uint64_t> send_bytes, recv_bytes;  // all_to_all: bytes to and from each group rank
  bool pending = false;  // the record's call never completed (may be missing from the relay's log)
  std::string bad;       // the record contradicts itself (tensor_bytes against shape and op)
  std::string str() const {
    std::string s = fmt::format("{} of {} bytes", op, bytes);
    if (!send_bytes.empty())
      s += fmt::format(" (to each rank: {}; from each: {})", fmt::join(send_bytes, ", "),
                       fmt::join(recv_bytes, ", "));
    if (op == "all_reduce" || op == "reduce_scatter") s += " (" + reduce + ")";
    if (arg >= 0)
      s += (op == "broadcast" ? " from root "
            : op == "send"    ? " to rank "
                              : " from rank ") +
           std::to_string(arg);
    return s + " in phase " + phase;
  }
  bool operator==(const Seen& o) const {
    const bool reduces = op == "all_reduce" || op == "reduce_scatter";
    return op == o.op && bytes == o.bytes && (!reduces || reduce == o.reduce) && arg == o.arg &&
           send_bytes == o.send_bytes && recv_bytes == o.recv_bytes && phase == o.phase &&
           group_size == o.group_size;
  }
};

/// What the ProcessGroup hands its transport for a recorded call (process_group_calls.cpp): reductions
/// in float32 whatever the dtype, an all_gather's own shard, a broadcast's payload from its root only.
/// The grader's pattern check reads tensor_bytes, so it must follow from the shape (f32 or bf16: 4 or 2
/// bytes an element) and from the bytes the relay carried. `skip` when the call moves nothing between
/// ranks: a group of one, a collective on an empty tensor (ProcessGroup returns before the transport),
/// new_group (the relay's own bookkeeping). The group's size is the record's, compared with the relay's for
/// each call (a group's name may be given to a new group once the old one is done with: lab06 builds one
/// set of expert groups per layout); `group_rank` is the relay's.
Seen from_record(const trace::PhasedCall& c, int group_rank, bool& skip) {
  const trace::CommRecord& r = c.rec;
  const int group_size = r.group_size;
  Seen s;
  s.op = comm::op_name(r.op);
  s.phase = c.phase;
  s.group_size = group_size;
  const uint64_t tb = r.tensor_bytes;
  int64_t n = 1;
  for (int64_t d : r.shape) n = d < 0 || n < 0 ? -1 : n * d;
  const uint64_t n4 = static_cast<uint64_t>(std::max<int64_t>(n, 0)) * 4, n2 = n4 / 2;
  const bool p2p = r.op == OpKind::send || r.op == OpKind::recv;
  s.reduce = comm::reduce_op_name(r.reduce);
  // An uneven all_to_all (bytes per peer recorded) reaches the transport even when this rank sends nothing.
  const bool moves = p2p || r.op == OpKind::barrier || tb > 0 || !r.send_bytes.empty();
  skip = r.op == OpKind::new_group || group_size <= 1 || !moves;
  if (r.op == OpKind::all_to_all) s.send_bytes = r.send_bytes, s.recv_bytes = r.recv_bytes;
  const uint64_t gs = static_cast<uint64_t>(std::max(group_size, 1));
  bool fits = tb == n4 || tb == n2;  // tensor_bytes = numel · element size
  if (r.op == OpKind::all_reduce || r.op == OpKind::reduce_scatter) {
    s.bytes = n4;
  } else if (r.op == OpKind::all_gather) {
    s.bytes = tb / gs;
    fits = n >= 0 && tb % gs == 0 && (s.bytes == n4 || s.bytes == n2);  // the output: group size × the shard
  } else if (r.op == OpKind::broadcast) {
    s.bytes = r.peer == group_rank ? tb : 0;
  } else if (r.op == OpKind::barrier) {
    fits = tb == 0;
  } else {
    s.bytes = tb;
  }
  if (!fits)
    s.bad = fmt::format("{} #{}: tensor_bytes {} does not follow from its shape {}", s.op, r.seq, tb,
                        shape_str(r.shape));
  if (r.op == OpKind::broadcast || p2p) s.arg = r.peer;
  s.pending = !r.waited && r.t_end == 0.0;
  return s;
}

Seen from_log(const json& e, const std::string& phase) {
  Seen s;
  s.op = e.value("op", "");
  s.bytes = e.value("bytes", uint64_t{0});
  s.reduce = e.value("reduce", "sum");
  s.arg = e.value("arg", -1);
  s.phase = phase;
  s.group_size = e.value("group_size", 1);
  if (s.op == "all_to_all") {
    s.send_bytes = e.value("send_bytes", std::vector<uint64_t>{});
    s.recv_bytes = e.value("recv_bytes", std::vector<uint64_t>{});
  }
  return s;
}

/// The first difference between one group's recorded calls and the relay's, or "".
std::string compare(const std::string& group, const std::vector<Seen>& rec, const std::vector<Seen>& wit) {
  for (std::size_t i = 0; i < std::max(rec.size(), wit.size()); ++i) {
    if (i < rec.size() && !rec[i].bad.empty()) return "group " + group + ", " + rec[i].bad;
    if (i >= wit.size()) {
      if (rec[i].pending) continue;  // issued, never completed: it may not have reached the relay
      return fmt::format("group {}, call {}: the record lists {}, the relay carried no such call", group,
                         i + 1, rec[i].str());
    }
    if (i >= rec.size())
      return fmt::format("group {}, call {}: the relay carried {}, which the record does not list", group,
                         i + 1, wit[i].str());
    if (!(rec[i] == wit[i]))
      return fmt::format("group {}, call {}: the record lists {}, the relay carried {}{}", group, i + 1,
                         rec[i].str(), wit[i].str(),
                         rec[i].phase != wit[i].phase
                             ? " (a call reaches the relay in the phase that issued it, "
                               "unless it is async and still unwaited when the phase ends)"
                         : rec[i].group_size != wit[i].group_size
                             ? fmt::format(" (the record's group has {} ranks, the relay's {})",
                                           rec[i].group_size, wit[i].group_size)
                             : "");
  }
  return "";
}

/// Problems with the groups of ctx `ctx`: a layout group ("world", "tp", "dp") of another size than the
/// layout's or in two instances; a rank that calls in two groups of one name in turn (A, B, A): a name is
/// given to a new group only once the old one is done with (lab06 builds one set of expert groups per
/// layout), so that each name's calls are one sequence on both sides.
void check_groups(const std::vector<json>& log, int ctx, const Layout& layout,
                  std::vector<std::string>& problems) {
  const std::map<std::string, int> expected{{"world", layout.world()}, {"tp", layout.tp}, {"dp", layout.dp}};
  std::map<std::pair<int, std::string>, std::vector<uint32_t>> ids;  // (rank, name) → group ids, in turn
  std::set<std::pair<int, std::string>> told;
  for (const json& e : log) {
    if (e.value("ctx", -2) != ctx || !e.contains("gid") || !e.contains("group")) continue;
    const std::string name = e["group"];
    const int rank = e.value("rank", -1);
    const int n = e.value("group_size", 1);
    const uint32_t gid = e.value("gid", 0u);
    std::vector<uint32_t>& seen = ids[{rank, name}];
    if (seen.empty() || seen.back() != gid) {
      const bool again = std::find(seen.begin(), seen.end(), gid) != seen.end();
      seen.push_back(gid);
      if ((again || (seen.size() == 2 && expected.count(name))) && told.insert({rank, name}).second)
        problems.push_back(
            again ? fmt::format(
                        "rank {} called in two different groups named '{}' in turn: a group's name must "
                        "say which it is",
                        rank, name)
                  : fmt::format("rank {} called in two different groups named '{}': the layout's groups are "
                                "made once",
                                rank, name));
    }
    if (expected.count(name) && n != expected.at(name))
      problems.push_back(
          fmt::format("rank {} called in a group named '{}' of {} ranks, but this layout's '{}' has {}", rank,
                      name, n, name, expected.at(name)));
  }
}

/// An uneven all_to_all's split-size exchange (process_group.cpp check_split_sizes): an all_gather of the
/// 2·n byte counts under the split tag (bit 22), issued by ProcessGroup itself right before the call.
bool split_exchange(const json& e) {
  const uint64_t n = e.value("group_size", 1u);
  return e.value("op", "") == "all_gather" && (e.value("tag", 0u) & (1u << 22)) != 0 &&
         e.value("bytes", uint64_t{0}) == 2 * n * sizeof(uint64_t);
}

/// The problems of one run: ctx `ctx` of the log against DIR/rank<w>/result.json.
std::vector<std::string> judge_run(const std::vector<json>& log, int ctx, const PlannedRun& run) {
  std::vector<std::string> problems;
  const int world = run.layout.world();
  check_groups(log, ctx, run.layout, problems);
  for (int w = 0; w < world; ++w) {
    for (const json& e : log)
      if (e.value("rank", -1) == w && e.contains("violation") &&
          (e.value("ctx", -2) == ctx || e.value("ctx", -2) < 0))
        problems.push_back(
            fmt::format("rank {} broke the relay's protocol: {}", w, e["violation"].get<std::string>()));
    const fs::path p = fs::path(run.dir) / ("rank" + std::to_string(w)) / "result.json";
    std::ifstream in(p);
    if (!in) continue;
    const json result = json::parse(in, nullptr, false);
    if (!result.is_object() || !result.contains("calls") || !result["calls"].is_array()) continue;
    std::vector<trace::PhasedCall> calls;  // the record, parsed once (engine/trace/record_json.h)
    for (std::size_t k = 0; k < result["calls"].size(); ++k)
      if (auto c = trace::call_from_json(result["calls"][k]))
        calls.push_back(std::move(*c));
      else
        problems.push_back(
            fmt::format("rank {}: its record's call {} is not one any rank program writes", w, k));
    // The relay's side: calls in arrival order per group, each in the phase the rank's last mark named.
    std::map<std::string, std::vector<Seen>> rec_coll, rec_p2p, wit_coll, wit_p2p;
    std::map<std::string, Seen> split;  // a split-size exchange not yet followed by its all_to_all
    std::map<std::string, int> group_rank;
    std::string phase = "setup";
    for (const json& e : log) {
      if (e.value("ctx", -2) != ctx || e.value("rank", -1) != w || !e.contains("kind")) continue;
      const std::string kind = e["kind"], group = e.value("group", "");
      if (kind == "mark") {
        // "setup" (the calls before the scenario's first phase, which the pattern does not check) is
        // never entered again: a mark of it comes from code that wants its calls left unchecked.
        phase = e.value("phase", "");
        if (phase == "setup")
          problems.push_back(
              fmt::format("rank {} marked phase 'setup' after its start (only the checker's scenario "
                          "code marks phases)",
                          w));
        continue;
      }
      group_rank[group] = e.value("group_rank", 0);
      if (e.value("group_size", 1) <= 1) continue;
      if (kind == "collective") {
        // The exchange is the engine's, not the caller's call: left out when its uneven all_to_all follows.
        const Seen s = from_log(e, phase);
        const auto pending = split.find(group);
        if (pending != split.end()) {
          if (s.op != "all_to_all" || s.send_bytes.empty()) wit_coll[group].push_back(pending->second);
          split.erase(pending);
        }
        if (split_exchange(e))
          split[group] = s;
        else
          wit_coll[group].push_back(s);
      }
      if (kind == "send" || kind == "recv") wit_p2p[group].push_back(from_log(e, phase));
    }
    for (const auto& [group, s] : split) wit_coll[group].push_back(s);
    // The record's side: collectives in issue order (a group's seq order, and across two groups that had
    // one name, the first's before the second's), point-to-point in issue order (as result.json lists them).
    std::vector<const trace::PhasedCall*> coll;
    for (const trace::PhasedCall& c : calls) {
      const bool p2p = c.rec.op == OpKind::send || c.rec.op == OpKind::recv;
      const std::string& group = c.rec.group;
      if (!p2p) {
        coll.push_back(&c);
        continue;
      }
      bool skip = false;
      const Seen s = from_record(c, group_rank[group], skip);
      if (!skip) rec_p2p[group].push_back(s);
    }
    std::stable_sort(coll.begin(), coll.end(),
                     [](const auto* a, const auto* b) { return a->rec.id < b->rec.id; });
    for (const trace::PhasedCall* c : coll) {
      const std::string& group = c->rec.group;
      bool skip = false;
      const Seen s = from_record(*c, group_rank[group], skip);
      if (!skip) rec_coll[group].push_back(s);
    }
    std::vector<std::string> groups;
    for (auto* pair : {&rec_coll, &wit_coll, &rec_p2p, &wit_p2p})
      for (const auto& entry : *pair) groups.push_back(entry.first);
    std::sort(groups.begin(), groups.end());
    groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
    for (const std::string& group : groups)
      for (const std::string& d : {compare(group, rec_coll[group], wit_coll[group]),
                                   compare(group + " (point-to-point)", rec_p2p[group], wit_p2p[group])})
        if (!d.empty()) {
          problems.push_back(fmt::format("rank {}: {}", w, d));
          break;
        }
  }
  return problems;
}

}  // namespace

std::vector<WitnessVerdict> judge_witness(const std::string& relay_log,
                                          const std::vector<const PlannedRun*>& runs) {
  std::vector<json> log;
  std::ifstream in(relay_log);
  for (std::string line; std::getline(in, line);) {
    json e = json::parse(line, nullptr, false);
    if (e.is_object()) log.push_back(std::move(e));
  }
  int worlds = 0;  // each scenario joins one world (ranks_main.cpp); one more is a world of the code's own
  for (const json& e : log) worlds = std::max(worlds, e.value("ctx", -1) + 1);
  std::vector<WitnessVerdict> verdicts;
  for (std::size_t k = 0; k < runs.size(); ++k) {
    WitnessVerdict v;
    if (!in.is_open() && log.empty()) v.push_back("the witness relay left no log");
    if (worlds > static_cast<int>(runs.size()))
      v.push_back(
          fmt::format("the ranks joined {} worlds through the relay where the launch ran {} scenario(s): a "
                      "scenario's code may not start a world of its own (comm::init_from_env)",
                      worlds, runs.size()));
    for (std::string& p : judge_run(log, static_cast<int>(k), *runs[k])) v.push_back(std::move(p));
    verdicts.push_back(std::move(v));
  }
  return verdicts;
}

std::string witness_problem(const WitnessVerdict& verdict) {
  if (verdict.empty()) return "";
  std::string text =
      "the communication record does not match what the grader's relay carried between the ranks (under "
      "./grade every byte goes through it, and a record must come from the calls the code really makes):";
  for (const std::string& p : verdict) text += "\n      " + p;
  return text;
}

}  // namespace tpsp::checkers
