// Comparing a prediction with the step's calls, in order, and explaining each difference.
//
// The predicted lines are aligned with the step's calls by an edit distance: an equal call costs 0,
// a call with one or two fields wrong (phase, op, group, dim, reduce, peer, bytes) costs the number
// of wrong fields, a line with no counterpart (extra) or a call never predicted (missing) costs 1.5.
// A line that equals a call of the step left unmatched elsewhere is then reported as out of place.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>

#include "checkers/predict/predict.h"
#include "engine/comm/cost_model.h"

namespace tpsp::checkers::predict {

namespace {

using comm::OpKind;

/// The fields of `p` that differ from `e` ("phase", "op", ...), in the order they are explained.
std::vector<std::string> diff_fields(const Call& p, const Call& e) {
  std::vector<std::string> d;
  if (p.phase != e.phase) d.push_back("phase");
  if (p.op != e.op) d.push_back("op");
  if (p.group != e.group) d.push_back("group");
  if (p.op == e.op && has_dim(e.op) && p.dim != e.dim) d.push_back("dim");
  if (p.op == e.op && has_reduce(e.op) && p.reduce != e.reduce) d.push_back("reduce");
  if (p.op == e.op && has_peer(e.op) && p.peer != e.peer) d.push_back("peer");
  if (p.bytes != e.bytes) d.push_back("bytes");
  return d;
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

/// "an all_reduce", "a send".
std::string with_article(const std::string& op) {
  return (op[0] == 'a' ? "an " : "a ") + op;
}

/// The step's specific hint for a call of `p`'s phase and op ("" when it has none).
std::string specific_hint(const Call& p, const Step& step) {
  for (const ExtraHint& h : step.hints)
    if (h.op == p.op && (h.phase.empty() || h.phase == p.phase)) return h.text;
  return "";
}

/// Why `p` bytes are not the call's S = e.bytes, recognising the usual slips.
std::string bytes_hint(const Call& p, const Call& e, int n) {
  const uint64_t pb = p.bytes, eb = e.bytes;
  const uint64_t wire = comm::wire_bytes(e.op, n, eb);
  std::string what;
  if (e.op == OpKind::all_to_all && n > 1 &&
      pb * static_cast<uint64_t>(n) == eb * static_cast<uint64_t>(n - 1)) {
    what = fmt::format(
        "{}/{} of the call's send buffer: only the rows that leave this rank (the lesson's "
        "per-rank bytes)? An all_to_all's bytes= is its whole send buffer, this rank's own rows "
        "included, and a token's row once per expert it chose",
        n - 1, n);
  } else if (pb * static_cast<uint64_t>(n) == eb) {
    what = fmt::format("1/{} of the call's tensor: one rank's shard", n);
    if (e.op == OpKind::all_gather) what += " (an all-gather's bytes= is its gathered output)";
    if (n == 2) what += ", or the tensor at 2 bytes per element (bf16: this step is f32, 4 bytes)";
  } else if (pb == eb * static_cast<uint64_t>(n) && (e.op == OpKind::send || e.op == OpKind::recv)) {
    what = fmt::format("the whole tensor, {} chunks: a ring step moves one chunk, 1/{} of it", n, n);
  } else if (pb == eb * static_cast<uint64_t>(n)) {
    what = fmt::format("{}× the call's tensor: bytes= counts the tensor once, not once per rank of the {}", n,
                       n);
  } else if (pb == wire && wire != eb) {
    what = "what one rank sends on the wire (cost_model.h); bytes= is the tensor S itself";
  } else if (pb * 2 == eb) {
    what = "half the call's tensor: 2 bytes per element (bf16)? This step is f32, 4 bytes";
  } else if (pb % eb == 0) {
    what = fmt::format("{}× the call's tensor", pb / eb);
  } else if (eb % pb == 0) {
    what = fmt::format("1/{} of the call's tensor", eb / pb);
  } else {
    what = "not the call's tensor";
  }
  return fmt::format("bytes={} ({}) is {}", pb, human_bytes(pb), what);
}

/// A sentence per wrong field of `p` against `e`.
std::string explain_fields(const Call& p, const Call& e, const Step& step) {
  std::string out;
  const std::string op = comm::op_name(e.op), pop = comm::op_name(p.op);
  for (const std::string& f : diff_fields(p, e)) {
    if (f == "phase")
      out += fmt::format(" The step makes this {} in {}, not in {}.", op, upper(e.phase), p.phase);
    else if (f == "op")
      out += fmt::format(" The step makes {} here, not {}.", with_article(op), with_article(pop)) +
             (specific_hint(p, step).empty() ? "" : " (" + specific_hint(p, step) + ".)");
    else if (f == "group")
      out += fmt::format(" It runs on group {}, not {}{}.", e.group, p.group,
                         e.group == "tp" ? " (the ranks that share the layer's weights)" : "");
    else if (f == "dim")
      out +=
          fmt::format(" It {} along dim {}, not {}{}.", e.op == OpKind::all_gather ? "gathers" : "scatters",
                      e.dim, p.dim, e.dim == 0 ? " (dim 0 is s: SP splits the sequence)" : "");
    else if (f == "reduce")
      out += fmt::format(" Its reduction is {}, not {}.", comm::reduce_op_name(e.reduce),
                         comm::reduce_op_name(p.reduce));
    else if (f == "peer")
      out += fmt::format(" Rank 0 {} rank {}, not rank {}: a ring sends to r+1 and receives from r−1.",
                         e.op == OpKind::send ? "sends to" : "receives from", e.peer, p.peer);
    else if (f == "bytes")
      out += " " + bytes_hint(p, e, step.size_of_group(e.group)) + fmt::format("; S = {} bytes.", e.bytes);
  }
  return out;
}

/// The step's call as a sentence: "`line` — tensor: why".
std::string describe(const StepCall& e) {
  return fmt::format("`{}` — {}: {}", e.call.line(), e.tensor, e.why);
}

/// The explanation of a predicted call the step does not make.
std::string extra_hint(const Call& p, const Step& step) {
  if (std::string h = specific_hint(p, step); !h.empty()) return h;
  std::string calls;
  for (const StepCall& e : step.calls)
    if (e.call.phase == p.phase)
      calls += (calls.empty() ? "" : "; ") + std::string("`") + e.call.line() + "`";
  return calls.empty() ? fmt::format("the step makes no call in {}", p.phase)
                       : fmt::format("the step's calls in {} are {}", p.phase, calls);
}

/// The alignment: for each predicted line the index of its step call (−1: extra), by dynamic programming.
std::vector<int> align(const std::vector<PredictedCall>& pred, const std::vector<StepCall>& want) {
  const std::size_t n = pred.size(), m = want.size();
  constexpr double kGap = 1.5, kInf = std::numeric_limits<double>::infinity();
  // A point-to-point call is never read as a collective written wrong, nor the other way round.
  auto sub = [&](std::size_t i, std::size_t j) {
    if (has_peer(pred[i].call.op) != has_peer(want[j].call.op)) return kInf;
    const std::size_t d = diff_fields(pred[i].call, want[j].call).size();
    return d <= 2 ? static_cast<double>(d) : kInf;
  };
  std::vector<std::vector<double>> cost(n + 1, std::vector<double>(m + 1, 0));
  for (std::size_t i = 0; i <= n; ++i)
    for (std::size_t j = 0; j <= m; ++j) {
      if (i == 0 && j == 0) continue;
      double best = kInf;
      if (i > 0) best = std::min(best, cost[i - 1][j] + kGap);
      if (j > 0) best = std::min(best, cost[i][j - 1] + kGap);
      if (i > 0 && j > 0) best = std::min(best, cost[i - 1][j - 1] + sub(i - 1, j - 1));
      cost[i][j] = best;
    }
  // Back from the end; on a tie a call is left missing first, so that of several equal calls the
  // earliest are the ones matched (the later one, e.g. the weight gradient's re-gather, is missing).
  std::vector<int> match(n, -1);
  for (std::size_t i = n, j = m; i > 0 || j > 0;) {
    if (j > 0 && cost[i][j] == cost[i][j - 1] + kGap) {
      --j;
    } else if (i > 0 && j > 0 && cost[i][j] == cost[i - 1][j - 1] + sub(i - 1, j - 1)) {
      match[--i] = static_cast<int>(--j);
    } else {
      --i;
    }
  }
  return match;
}

}  // namespace

std::string Call::line() const {
  std::string s = fmt::format("{} {} {} dim={} bytes={}", phase, comm::op_name(op), group,
                              has_dim(op) ? std::to_string(dim) : "-", bytes);
  if (has_reduce(op) && reduce != comm::ReduceOp::sum)
    s += std::string(" reduce=") + comm::reduce_op_name(reduce);
  if (has_peer(op)) s += " peer=" + std::to_string(peer);
  return s;
}

bool same_call(const Call& a, const Call& b) {
  return a.op == b.op && diff_fields(a, b).empty();
}

std::string Outcome::summary() const {
  switch (status) {
    case Status::unfilled:
      return "not filled in yet";
    case Status::bad_lines:
      return fmt::format("{} line(s) to fix before it can be compared", differences);
    case Status::right:
      return fmt::format("{} of {} calls right", right, expected);
    case Status::differs:
      break;
  }
  return fmt::format("{} of {} calls right, {} difference{}", right, expected, differences,
                     differences == 1 ? "" : "s");
}

Outcome check_prediction(const std::string& text, const Step& step) {
  Outcome out;
  out.expected = static_cast<int>(step.calls.size());
  const Parsed parsed = parse_prediction(text, step);
  if (!parsed.errors.empty()) {
    out.status = Outcome::Status::bad_lines;
    out.differences = static_cast<int>(parsed.errors.size());
    for (const std::string& e : parsed.errors) out.report.push_back("✗ " + e);
    return out;
  }
  if (parsed.calls.empty()) {
    out.status = Outcome::Status::unfilled;
    out.report.push_back(
        "the prediction is not filled in yet: write one line per call of the step (the template's comments "
        "say how), then run this again");
    return out;
  }
  const std::vector<PredictedCall>& pred = parsed.calls;
  std::vector<int> match = align(pred, step.calls);
  // A line equal to a step call that the alignment left unmatched (or matched to something else) is
  // that call out of place: pair them.
  std::vector<int> exact_of_pred(pred.size(), -1), pred_of_call(step.calls.size(), -1);
  for (std::size_t i = 0; i < pred.size(); ++i)
    if (match[i] >= 0) pred_of_call[static_cast<std::size_t>(match[i])] = static_cast<int>(i);
  for (std::size_t i = 0; i < pred.size(); ++i) {
    if (match[i] >= 0 && same_call(pred[i].call, step.calls[static_cast<std::size_t>(match[i])].call))
      continue;
    for (std::size_t j = 0; j < step.calls.size(); ++j) {
      const int owner = pred_of_call[j];
      const bool owner_exact =
          owner >= 0 && same_call(pred[static_cast<std::size_t>(owner)].call, step.calls[j].call);
      if (owner_exact || !same_call(pred[i].call, step.calls[j].call)) continue;
      if (owner >= 0) match[static_cast<std::size_t>(owner)] = -1;  // its inexact pairing gives way
      if (match[i] >= 0) pred_of_call[static_cast<std::size_t>(match[i])] = -1;
      match[i] = -2 - static_cast<int>(j);  // out of place, equal to call j
      pred_of_call[j] = static_cast<int>(i);
      exact_of_pred[i] = static_cast<int>(j);
      break;
    }
  }
  int k = 0;
  auto diff = [&](const std::string& msg) { out.report.push_back(fmt::format("✗ {}. {}", ++k, msg)); };
  std::vector<bool> reported(step.calls.size(), false);
  // Missing calls are reported where they belong: before the first line matched to a later call.
  auto report_missing_before = [&](std::size_t limit, int after_line) {
    for (std::size_t j = 0; j < limit; ++j) {
      if (reported[j] || pred_of_call[j] >= 0) continue;
      reported[j] = true;
      diff(fmt::format("missing {}: the step makes {}",
                       after_line > 0 ? fmt::format("after line {}", after_line) : "before your first line",
                       describe(step.calls[j])));
    }
  };
  int last_line = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) {
    const Call& p = pred[i].call;
    const int L = pred[i].line;
    if (match[i] >= 0) report_missing_before(static_cast<std::size_t>(match[i]), last_line);
    if (match[i] >= 0) {
      const StepCall& e = step.calls[static_cast<std::size_t>(match[i])];
      reported[static_cast<std::size_t>(match[i])] = true;
      if (same_call(p, e.call)) {
        ++out.right;
        out.report.push_back(fmt::format("✓ line {}: {} — {}", L, p.line(), e.tensor));
      } else {
        diff(fmt::format("line {}: you predicted {} of {} in {}.{} The call: {}", L, comm::op_name(p.op),
                         human_bytes(p.bytes), p.phase, explain_fields(p, e.call, step), describe(e)));
      }
    } else if (match[i] <= -2) {
      const std::size_t j = static_cast<std::size_t>(-2 - match[i]);
      reported[j] = true;
      diff(
          fmt::format("line {}: `{}` is a call of the step, but out of place: it is the step's call {} of {} "
                      "in its order ({}); the lines before and after it say which calls come first",
                      L, p.line(), j + 1, step.calls.size(), step.calls[j].why));
    } else {
      diff(fmt::format("line {}: extra: the step makes no call `{}` — {}", L, p.line(), extra_hint(p, step)));
    }
    last_line = L;
  }
  report_missing_before(step.calls.size(), last_line);
  out.differences = k;
  out.status = k == 0 && out.right == out.expected ? Outcome::Status::right : Outcome::Status::differs;
  return out;
}

}  // namespace tpsp::checkers::predict
