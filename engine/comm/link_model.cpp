#include "engine/comm/link_model.h"

#include <algorithm>
#include <cctype>
#include <regex>

#include "engine/comm/cost_model.h"
#include "engine/error.h"

namespace tpsp::comm {

double LinkModel::seconds(OpKind op, int n, uint64_t tensor_bytes, int rank, int root) const {
  if (!enabled() || n <= 1) return 0.0;
  // The slowest rank bounds a collective; for broadcast that is the root (most children).
  const uint64_t bytes = op == OpKind::broadcast ? wire_bytes(op, n, tensor_bytes, root, root)
                                                 : wire_bytes(op, n, tensor_bytes, rank, root);
  return wire_steps(op, n) * latency_s + static_cast<double>(bytes) / bandwidth_Bps;
}

LinkModel LinkModel::parse(const std::string& spec_in) {
  std::string spec;
  for (char c : spec_in)
    if (!std::isspace(static_cast<unsigned char>(c))) spec += c;
  std::string lower = spec;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower.empty() || lower == "off" || lower == "none" || lower == "0") return LinkModel{};

  // <link>[,<latency><us|ms>]
  static const std::regex re(R"(^([a-z]+|[0-9]*\.?[0-9]+(gb/s|mb/s))(,([0-9]*\.?[0-9]+)(us|ms))?$)");
  std::smatch m;
  TPSP_CHECK(std::regex_match(lower, m, re), "link spec '", spec_in,
             "' is not one of nvlink, pcie, ib, <x>GB/s, <x>MB/s (optionally followed by ,<y>us or ,<y>ms)");
  LinkModel l;
  l.name = spec;
  const std::string base = m[1].str();
  if (base == "nvlink") {
    l.bandwidth_Bps = 150e9;
    l.latency_s = 5e-6;
  } else if (base == "pcie") {
    l.bandwidth_Bps = 24e9;
    l.latency_s = 10e-6;
  } else if (base == "ib") {
    l.bandwidth_Bps = 24e9;
    l.latency_s = 5e-6;
  } else if (m[2].matched) {
    const double x = std::stod(base);
    l.bandwidth_Bps = x * (m[2].str() == "gb/s" ? 1e9 : 1e6);
    l.latency_s = 10e-6;
  } else {
    TPSP_CHECK(false, "link spec '", spec_in, "': unknown link '", base,
               "' (nvlink, pcie, ib, <x>GB/s, <x>MB/s)");
  }
  TPSP_CHECK(l.bandwidth_Bps > 0, "link spec '", spec_in, "': bandwidth must be positive");
  if (m[3].matched) l.latency_s = std::stod(m[4].str()) * (m[5].str() == "ms" ? 1e-3 : 1e-6);
  return l;
}

}  // namespace tpsp::comm
