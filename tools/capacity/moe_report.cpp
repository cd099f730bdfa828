#include "tools/capacity/moe_report.h"

#include <fmt/format.h>

#include <vector>

#include "engine/error.h"
#include "engine/moe/comm_volume.h"

namespace tpsp::capacity {

void MoeQuestion::validate() const {
  TPSP_CHECK(topk >= 1 && topk <= experts, "--moe-topk ", topk, " must be in [1, --moe-experts=", experts,
             "]");
  TPSP_CHECK(ffn > 0, "--moe-ffn ", ffn, " must be positive");
  TPSP_CHECK(ep >= 1 && etp >= 1, "--ep ", ep, " and --etp ", etp, " must be at least 1");
  TPSP_CHECK(experts % ep == 0, "num_moe_experts=", experts,
             " is not divisible by expert_model_parallel_size=", ep);
  TPSP_CHECK(ffn % etp == 0, "--moe-ffn ", ffn, " is not divisible by expert_tensor_parallel_size=", etp);
}

int64_t moe_tokens_per_rank(const Question& q) {
  const model::CapacityConfig& c = q.config;
  const int64_t tokens = c.gpt.seq * c.batch;
  return c.sequence_parallel && c.tp > 1 ? tokens / c.tp : tokens;
}

namespace {

uint64_t element_bytes(const Question& q) {
  return q.config.dtype == DType::f32 ? 4 : 2;
}

/// The asked layout and its counterpart at the same EP·ETP.
std::vector<std::pair<int, int>> layouts(const MoeQuestion& m) {
  std::vector<std::pair<int, int>> out{{m.ep, m.etp}};
  if (m.etp > 1 && m.experts % (m.ep * m.etp) == 0) out.push_back({m.ep * m.etp, 1});
  if (m.etp == 1 && m.ep % 2 == 0 && m.ffn % 2 == 0) out.push_back({m.ep / 2, 2});
  return out;
}

nlohmann::json layout_json(const Question& q, const MoeQuestion& m, int ep, int etp) {
  const moe::MoEVolumeSpec spec{ep, etp, m.experts, m.topk, q.config.gpt.hidden, m.ffn, element_bytes(q)};
  const moe::MoEVolume v = moe::moe_volume_uniform(spec, moe_tokens_per_rank(q));
  nlohmann::json gemms = nlohmann::json::array();
  for (const moe::GemmShape& g : v.gemms) gemms.push_back({g.m, g.n, g.k});
  const uint64_t weights = static_cast<uint64_t>(m.experts / ep) * 3 * static_cast<uint64_t>(m.ffn / etp) *
                           static_cast<uint64_t>(q.config.gpt.hidden) * element_bytes(q);
  return {{"ep", ep},
          {"etp", etp},
          {"dispatch", v.dispatch},
          {"combine", v.combine},
          {"etp_all_gather", v.etp_all_gather},
          {"etp_reduce_scatter", v.etp_reduce_scatter},
          {"total", v.dispatch + v.combine + v.etp_all_gather + v.etp_reduce_scatter},
          {"gemms", gemms},
          {"expert_weight_bytes", weights}};
}

}  // namespace

nlohmann::json moe_report_json(const Question& q, const MoeQuestion& m) {
  m.validate();
  nlohmann::json out = {{"experts", m.experts},
                        {"topk", m.topk},
                        {"ffn", m.ffn},
                        {"tokens_per_rank", moe_tokens_per_rank(q)},
                        {"element_bytes", element_bytes(q)},
                        {"layouts", nlohmann::json::array()}};
  for (const auto& [ep, etp] : layouts(m)) out["layouts"].push_back(layout_json(q, m, ep, etp));
  return out;
}

std::string moe_report_table(const Question& q, const MoeQuestion& m) {
  const nlohmann::json j = moe_report_json(q, m);
  std::string s = fmt::format(
      "\nMoE layer (routed experts, uniform routing): {} experts, top-{}, expert ffn {}, {} tokens per rank\n"
      "bytes a rank sends, one layer forward (backward sends as much again; lesson 06's formulas):\n{:<24}",
      m.experts, m.topk, m.ffn, moe_tokens_per_rank(q), "");
  for (const auto& l : j["layouts"])
    s += fmt::format("{:>22}", fmt::format("EP={}, ETP={}", l["ep"].get<int>(), l["etp"].get<int>()));
  s += "\n";
  for (const char* row : {"dispatch", "combine", "etp_all_gather", "etp_reduce_scatter", "total"}) {
    s += fmt::format("{:<24}", row);
    for (const auto& l : j["layouts"]) s += fmt::format("{:>22}", human_bytes(l[row].get<uint64_t>()));
    s += "\n";
  }
  s += fmt::format("{:<24}", "expert weights");
  for (const auto& l : j["layouts"])
    s += fmt::format("{:>22}", human_bytes(l["expert_weight_bytes"].get<uint64_t>()));
  s += "\n";
  for (const auto& l : j["layouts"]) {
    const auto& g = l["gemms"];
    s += fmt::format(
        "expert GEMMs, EP={} ETP={}: {} experts × fc1 [{}, {}, {}] + fc2 [{}, {}, {}] ([M, N, K])\n",
        l["ep"].get<int>(), l["etp"].get<int>(), g.size() / 2, g[0][0].get<int64_t>(), g[0][1].get<int64_t>(),
        g[0][2].get<int64_t>(), g[1][0].get<int64_t>(), g[1][1].get<int64_t>(), g[1][2].get<int64_t>());
  }
  return s;
}

}  // namespace tpsp::capacity
