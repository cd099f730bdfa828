#include "checkers/grade.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "checkers/diagnose.h"
#include "engine/io/npy.h"
#include "engine/ops/elementwise.h"

namespace tpsp::checkers {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

/// The last `n` lines of s.
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

/// Multi-index of a flat position in `shape`, as "[i, j, k]".
std::string index_str(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_str(idx);
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(double(t.at(i))));
  return m;
}

/// The expected whole outputs: the scenario's own closed form, or its run at tp=1 in this process.
Outputs expected_outputs(const Scenario& sc, int tp, bool sp, uint64_t seed) {
  return sc.expected ? sc.expected(seed, tp, sp) : run_single_process(sc, seed, sp);
}

/// The expected calls' descriptions for one (op, bytes): one, or "one of: a | b" when several
/// calls of the phase look alike on the wire.
std::string describe(std::vector<std::string> whats) {
  std::sort(whats.begin(), whats.end());
  whats.erase(std::unique(whats.begin(), whats.end()), whats.end());
  if (whats.size() == 1) return whats[0];
  std::string out = "one of: ";
  for (std::size_t i = 0; i < whats.size(); ++i) out += (i ? " | " : "") + whats[i];
  return out;
}

/// "all_gather on group tp along dim 2" (the dim only for the ops that have one).
std::string call_key(const std::string& op, const std::string& group, int64_t dim) {
  const bool has_dim = op == "all_gather" || op == "reduce_scatter";
  return op + " on group " + group + (has_dim ? " along dim " + std::to_string(dim) : "");
}

/// Rows [first, first+count) of dim 0 (for padded vocabulary outputs).
Tensor rows(const Tensor& t, int64_t first, int64_t count) {
  return t.slice0(first, first + count).clone();
}

/// "chunk 1 of dim 2 = [12, 24)" style description of where a rank's shard sits.
std::string shard_range(int split_dim, const Shape& whole, int rank, int tp) {
  if (split_dim == kReplicated) return "replicated";
  if (split_dim == kPartial) return "partial sum";
  const int64_t c = whole[static_cast<std::size_t>(split_dim)] / tp;
  return fmt::format("{} [{}, {}) of dim {}", split_dim == 0 ? "rows" : "indices", rank * c, (rank + 1) * c,
                     split_dim);
}

}  // namespace

std::string compare_output(const std::string& name, const Output& spec, const Tensor& whole,
                           const std::vector<Tensor>& all_got, int rank, const Tolerance& tol) {
  const int tp = static_cast<int>(all_got.size());
  const Tensor& got = all_got[static_cast<std::size_t>(rank)];
  const double atol = spec.atol >= 0 ? spec.atol : tol.atol_rel * std::max(1e-6, max_abs(whole));
  Tensor want = spec.split_dim >= 0 ? chunk(whole, spec.split_dim, rank, tp) : whole;
  Tensor g = got;
  int64_t first_row = 0;
  if (spec.split_dim == 0 && spec.real_rows >= 0 && got.shape() == want.shape()) {
    // Padded vocabulary: compare only the rows of this shard that exist in the real vocabulary.
    const int64_t per = want.size(0);
    const int64_t real = std::clamp<int64_t>(spec.real_rows - rank * per, 0, per);
    want = rows(want, 0, real), g = rows(got, 0, real);
  }
  if (spec.split_dim >= 0) first_row = rank * (whole.size(spec.split_dim) / tp);
  const std::string where = shard_range(spec.split_dim, whole.shape(), rank, tp);
  if (g.shape() != want.shape())
    return fmt::format("{} on rank {} ({}): {}", name, rank, where,
                       diagnose(g, want, whole, all_got, rank, spec.split_dim, tol.rtol, atol));
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
  // Global index of the worst element: local index shifted by the shard's offset.
  std::vector<int64_t> shape_local = g.shape();
  std::string idx = index_str(worst, shape_local);
  if (spec.split_dim >= 0) {
    int64_t flat = worst;
    std::vector<int64_t> id(shape_local.size());
    for (std::size_t d = shape_local.size(); d-- > 0;) id[d] = flat % shape_local[d], flat /= shape_local[d];
    id[static_cast<std::size_t>(spec.split_dim)] += first_row;
    idx = shape_str(id);
  }
  std::string hint = diagnose(g, want, whole, all_got, rank, spec.split_dim, tol.rtol, atol);
  return fmt::format(
      "{} on rank {} ({}): {} of {} elements differ; worst at global index {}: got {:.6g}, want {:.6g}{}",
      name, rank, where, bad, g.numel(), idx, g.at(worst), want.at(worst),
      hint.empty() ? "" : "\n      hint: " + hint);
}

GradeResult grade(const Scenario& sc, int tp, bool sp, uint64_t seed, const std::string& dir,
                  int launcher_code, const std::string& launcher_log, const Tolerance& tol) {
  GradeResult res{sc.lab + "/" + sc.name, tp, sp, false, false, {}, 0};
  std::vector<json> results(static_cast<std::size_t>(tp));
  for (int r = 0; r < tp; ++r) {
    const fs::path p = fs::path(dir) / ("rank" + std::to_string(r)) / "result.json";
    if (fs::exists(p)) results[r] = json::parse(std::ifstream(p), nullptr, false);
  }
  // 1. Did every rank finish? TODOs first: they are the learner's next step.
  for (int r = 0; r < tp; ++r)
    if (results[r].is_object() && results[r]["status"] == "todo") {
      res.todo = true;
      res.problems.push_back(results[r]["message"].get<std::string>());
      return res;
    }
  for (int r = 0; r < tp; ++r)
    if (results[r].is_object() && results[r]["status"] == "error")
      res.problems.push_back(fmt::format("rank {} raised: {}", r, results[r]["message"].get<std::string>()));
  std::string missing;
  for (int r = 0; r < tp; ++r)
    if (!results[r].is_object()) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  if (!res.problems.empty()) {
    // An error on one rank is often the echo of another rank's crash, hang or skipped call: show
    // which ranks never finished and what the launcher saw.
    if (!missing.empty() || launcher_code != 0)
      res.problems.push_back(
          fmt::format("ranks without a result: {}; the launcher exited {}. Its last lines:\n{}",
                      missing.empty() ? "none" : missing, launcher_code, last_lines(launcher_log, 14)));
    return res;
  }
  if (!missing.empty()) {
    res.problems.push_back(
        fmt::format("rank(s) {} did not finish (the launcher exited {}: a crash, a hang past the timeout, or "
                    "a desynchronised "
                    "collective). The launcher's last lines:\n{}",
                    missing, launcher_code, last_lines(launcher_log, 14)));
    return res;
  }

  // 2. Numbers: every output against the expected whole tensor.
  const Outputs want = expected_outputs(sc, tp, sp, seed);
  for (const auto& [name, w] : want) {
    std::vector<Tensor> got;
    for (int r = 0; r < tp; ++r) {
      const fs::path p = fs::path(dir) / ("rank" + std::to_string(r)) / (name + ".npy");
      if (!fs::exists(p)) {
        res.problems.push_back(fmt::format("{}: rank {} produced no output", name, r));
        break;
      }
      got.push_back(io::load_npy(p.string()));
    }
    if (static_cast<int>(got.size()) != tp) continue;
    Output spec = w;
    spec.split_dim = results[0]["outputs"].value(name, w.split_dim);
    if (spec.split_dim == kPartial) {
      // Each rank holds a partial sum; their sum must be the whole.
      Tensor sum(got[0].shape());
      for (const Tensor& g : got) ops::add_(sum, g);
      const std::string p =
          compare_output(name + " (summed over ranks)", {sum, kReplicated, -1}, w.local, {sum}, 0, tol);
      if (!p.empty()) res.problems.push_back(p);
      continue;
    }
    for (int r = 0; r < tp; ++r) {
      const std::string p = compare_output(name, spec, w.local, got, r, tol);
      if (!p.empty()) {
        res.problems.push_back(p);
        break;  // one rank per tensor is enough to read
      }
    }
  }

  // 3. Communication: the calls on the TP group per phase, against the expected pattern.
  const Pattern pattern = sc.pattern ? sc.pattern(tp, sp) : Pattern{};
  for (int r = 0; r < (sc.pattern ? tp : 0); ++r) {  // a scenario without a pattern checks numbers only
    std::map<std::string, std::multiset<std::pair<std::string, uint64_t>>> got_calls, want_calls;
    std::map<std::pair<std::string, uint64_t>, std::vector<std::string>> what;
    for (const json& c : results[r]["calls"]) {
      const std::string op = c["op"];
      if (c["phase"] == "setup" || op == "new_group") continue;
      got_calls[c["phase"]].insert({call_key(op, c["group"].get<std::string>(), c["dim"].get<int64_t>()),
                                    c["tensor_bytes"].get<uint64_t>()});
    }
    for (const auto& [phase, calls] : pattern)
      for (const ExpectedCall& c : calls) {
        const auto key = std::pair{call_key(comm::op_name(c.op), "tp", c.dim), c.tensor_bytes};
        want_calls[phase].insert(key);
        what[key].push_back(c.what);
      }
    std::set<std::string> phases;
    for (const auto& [p, _] : got_calls) phases.insert(p);
    for (const auto& [p, _] : want_calls) phases.insert(p);
    std::string msg;
    for (const std::string& phase : phases) {
      auto g = got_calls[phase], w = want_calls[phase];
      for (const auto& c : w)
        if (auto it = g.find(c); it != g.end())
          g.erase(it);
        else
          msg += fmt::format("\n      {}: missing {} of {} bytes ({})", phase, c.first, c.second,
                             describe(what[c]));
      for (const auto& c : g)
        msg += fmt::format("\n      {}: unexpected {} of {} bytes", phase, c.first, c.second);
    }
    if (!msg.empty()) {
      res.problems.push_back(
          fmt::format("communication on rank {} differs from the expected pattern:{}", r, msg));
      break;
    }
  }
  // Every rank wrote its results, but a rank that then crashed or hung (e.g. in an exit handler)
  // still fails the run.
  if (launcher_code != 0)
    res.problems.push_back(
        fmt::format("every rank wrote its results, but the job did not end cleanly (the launcher exited {}). "
                    "Its last lines:\n{}",
                    launcher_code, last_lines(launcher_log, 14)));
  res.passed = res.problems.empty();
  return res;
}

}  // namespace tpsp::checkers
