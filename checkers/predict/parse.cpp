// Reading a prediction file (the format is in predict.h): one call per line, every error named with
// its line and the rule it breaks.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>

#include "checkers/predict/predict.h"

namespace tpsp::checkers::predict {

namespace {

using comm::OpKind;
using comm::ReduceOp;

/// c10d's or NCCL's name of an op ("all_reduce", "AllReduce", "ncclAllReduce", "allreduce").
bool parse_op(std::string s, OpKind& op) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s.rfind("nccl", 0) == 0) s = s.substr(4);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  static const std::vector<std::pair<const char*, OpKind>> names{{"allreduce", OpKind::all_reduce},
                                                                 {"allgather", OpKind::all_gather},
                                                                 {"reducescatter", OpKind::reduce_scatter},
                                                                 {"alltoall", OpKind::all_to_all},
                                                                 {"broadcast", OpKind::broadcast},
                                                                 {"send", OpKind::send},
                                                                 {"recv", OpKind::recv},
                                                                 {"barrier", OpKind::barrier}};
  for (const auto& [name, kind] : names)
    if (s == name) {
      op = kind;
      return true;
    }
  return false;
}

/// A non-negative decimal integer, all of `s`.
bool parse_uint(const std::string& s, uint64_t& out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

/// bytes=: "1048576", "512*2*256*4", "1MiB", "256KiB", "2*512KiB", "1024B". "" or an error.
std::string parse_bytes(const std::string& v, uint64_t& out) {
  const std::string rule =
      "write an integer, a product like 512*2*256*4, or a count with a unit: B, KiB, MiB, GiB";
  for (const char* decimal : {"KB", "MB", "GB", "kB"})
    if (v.find(decimal) != std::string::npos)
      return fmt::format("bytes={}: {} is ambiguous (1000 or 1024?); {}", v, decimal, rule);
  std::string s = v;
  uint64_t unit = 1;
  for (const auto& [suffix, k] : std::vector<std::pair<std::string, uint64_t>>{
           {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"B", 1}}) {
    if (s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0) {
      s = s.substr(0, s.size() - suffix.size());
      unit = k;
      break;
    }
  }
  uint64_t product = unit;
  std::size_t pos = 0;
  while (true) {
    const std::size_t star = s.find('*', pos);
    const std::string factor = s.substr(pos, star == std::string::npos ? std::string::npos : star - pos);
    uint64_t f = 0;
    if (!parse_uint(factor, f))
      return fmt::format("bytes={}: '{}' is not a whole number; {}", v, factor, rule);
    if (f != 0 && product > UINT64_MAX / f) return fmt::format("bytes={}: too large", v);
    product *= f;
    if (star == std::string::npos) break;
    pos = star + 1;
  }
  if (product == 0) return fmt::format("bytes={}: a call moves a tensor of at least 1 byte", v);
  out = product;
  return "";
}

/// The words of a line without its comment.
std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line.substr(0, line.find('#')));
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

/// The groups a call may name: the engine's (ParallelState) and lab06's expert groups
/// (moe::ExpertParallelState), as the recorder names them.
const std::vector<std::string> kGroups{"tp", "dp", "world", "ep", "etp", "tp_ep", "edp"};

/// One call line (at least one word); appends its errors ("line N: ...").
void parse_line(const std::vector<std::string>& w, int n, const Step& step, Parsed& out) {
  const std::size_t before = out.errors.size();
  auto error = [&](const std::string& msg) { out.errors.push_back(fmt::format("line {}: {}", n, msg)); };
  if (w.size() < 3) {
    error(fmt::format("a call is PHASE OP GROUP dim=D bytes=N (got '{}')", joined(w)));
    return;
  }
  Call c;
  c.phase = w[0];
  if (std::find(step.phases.begin(), step.phases.end(), c.phase) == step.phases.end())
    error(fmt::format("phase '{}' is not one of this step's phases: {}", c.phase, joined(step.phases)));
  if (!parse_op(w[1], c.op))
    error(fmt::format(
        "op '{}' is not a collective: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send, "
        "recv, barrier (NCCL's AllReduce, ncclAllGather, ... are accepted too)",
        w[1]));
  c.group = w[2];
  if (std::find(kGroups.begin(), kGroups.end(), c.group) == kGroups.end())
    error(fmt::format("group '{}' is not one of {}", c.group, joined(kGroups)));
  std::map<std::string, std::string> fields;
  for (std::size_t i = 3; i < w.size(); ++i) {
    const std::size_t eq = w[i].find('=');
    const std::string key = w[i].substr(0, eq);
    if (eq == std::string::npos || eq + 1 == w[i].size()) {
      error(fmt::format("'{}' is not KEY=VALUE (the fields are dim=, bytes=, reduce=, peer=)", w[i]));
      continue;
    }
    if (key != "dim" && key != "bytes" && key != "reduce" && key != "peer") {
      error(fmt::format("'{}' is not a field: dim=, bytes=, reduce=, peer=", key));
      continue;
    }
    if (!fields.emplace(key, w[i].substr(eq + 1)).second) error(fmt::format("{}= is given twice", key));
  }
  if (out.errors.size() > before) return;  // the op is unknown: the field rules below depend on it
  const std::string op = comm::op_name(c.op);
  if (!fields.count("bytes"))
    error("bytes= is missing: the bytes of the call's tensor S (all_gather: the gathered output)");
  else if (const std::string e = parse_bytes(fields["bytes"], c.bytes); !e.empty())
    error(e);
  const std::string dim = fields.count("dim") ? fields["dim"] : "-";
  uint64_t d = 0;
  if (has_dim(c.op)) {
    if (dim == "-")
      error(fmt::format("{} needs dim=D: the dim it {} along (0 = s of [s, b, h])", op,
                        c.op == OpKind::all_gather ? "gathers" : "scatters"));
    else if (!parse_uint(dim, d) || d > 7)
      error(fmt::format("dim={}: a dim is 0, 1, 2, ... (0 = s of [s, b, h])", dim));
    else
      c.dim = static_cast<int64_t>(d);
  } else if (dim != "-") {
    error(fmt::format("dim={}: {} has no dim; write dim=- (a dim belongs to all_gather and reduce_scatter)",
                      dim, op));
  }
  if (fields.count("reduce")) {
    const std::string r = fields["reduce"];
    if (!has_reduce(c.op))
      error(fmt::format("reduce={}: {} does not reduce (reduce= belongs to all_reduce and reduce_scatter)", r,
                        op));
    else if (r == "max")
      c.reduce = ReduceOp::max;
    else if (r != "sum")
      error(fmt::format("reduce={}: the engine's reductions are sum and max", r));
  }
  uint64_t p = 0;
  if (has_peer(c.op)) {
    if (!fields.count("peer"))
      error(fmt::format("{} needs peer=P: the group rank it {}", op,
                        c.op == OpKind::send ? "sends to" : "receives from"));
    else if (!parse_uint(fields["peer"], p) || p >= static_cast<uint64_t>(step.group_size))
      error(fmt::format("peer={}: a group rank is 0 … {}", fields["peer"], step.group_size - 1));
    else
      c.peer = static_cast<int>(p);
  } else if (fields.count("peer")) {
    error(fmt::format("peer={}: {} has no peer (peer= belongs to send and recv)", fields["peer"], op));
  }
  if (out.errors.size() == before) out.calls.push_back({n, c});
}

}  // namespace

Parsed parse_prediction(const std::string& text, const Step& step) {
  Parsed out;
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    const std::vector<std::string> w = words(line);
    if (!w.empty()) parse_line(w, n, step, out);
  }
  return out;
}

}  // namespace tpsp::checkers::predict
