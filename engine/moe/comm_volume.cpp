#include "engine/moe/comm_volume.h"

#include "engine/error.h"

namespace tpsp::moe {

namespace {

void check(const MoEVolumeSpec& s) {
  TPSP_CHECK(s.ep >= 1 && s.etp >= 1 && s.topk >= 1, "MoE volume: ep, etp and topk must be at least 1");
  TPSP_CHECK(s.num_experts % s.ep == 0, "num_moe_experts=", s.num_experts,
             " is not divisible by expert_model_parallel_size=", s.ep);
  TPSP_CHECK(s.ffn % s.etp == 0, "moe_ffn_hidden_size=", s.ffn,
             " is not divisible by expert_tensor_parallel_size=", s.etp);
}

void add_gemms(MoEVolume& v, const MoEVolumeSpec& s, const std::vector<int64_t>& rows) {
  for (int64_t m : rows) {
    v.gemms.push_back({m, 2 * s.ffn / s.etp, s.hidden});
    v.gemms.push_back({m, s.hidden, s.ffn / s.etp});
  }
}

}  // namespace

MoEVolume moe_volume(const MoEVolumeSpec& s, const std::vector<int64_t>& counts, int ep_rank, int etp_rank) {
  check(s);
  const int64_t E = s.num_experts, per = E / s.ep;
  TPSP_CHECK(static_cast<int64_t>(counts.size()) == s.ep * s.etp * E, "MoE volume: ", counts.size(),
             " counts for ", s.ep * s.etp, " tp_ep ranks × ", E, " experts");
  TPSP_CHECK(ep_rank >= 0 && ep_rank < s.ep && etp_rank >= 0 && etp_rank < s.etp,
             "MoE volume: (ep_rank=", ep_rank, ", etp_rank=", etp_rank, ") is not in a layout of EP=", s.ep,
             " × ETP=", s.etp);
  for (int64_t n : counts) TPSP_CHECK(n >= 0, "MoE volume: a count of ", n, " choices is negative");
  auto c = [&](int p, int64_t e) {
    return static_cast<uint64_t>(counts[static_cast<std::size_t>(p * E + e)]);
  };
  const uint64_t row = static_cast<uint64_t>(s.hidden) * s.element_bytes;
  const int me = ep_rank * s.etp + etp_rank;
  MoEVolume v;
  std::vector<uint64_t> received(static_cast<std::size_t>(s.etp), 0);  // rows each ETP rank got over EP
  std::vector<int64_t> rows(static_cast<std::size_t>(per), 0);
  for (int j = 0; j < s.ep; ++j)
    for (int64_t e = 0; e < per; ++e) {
      if (j != ep_rank) {
        v.dispatch += c(me, j * per + e) * row;  // my choices for EP rank j's experts
        v.combine +=
            c(j * s.etp + etp_rank, ep_rank * per + e) * row;  // EP rank j's rows of my experts, back
      }
      for (int q = 0; q < s.etp; ++q) {
        received[static_cast<std::size_t>(q)] += c(j * s.etp + q, ep_rank * per + e);
        rows[static_cast<std::size_t>(e)] += static_cast<int64_t>(c(j * s.etp + q, ep_rank * per + e));
      }
    }
  uint64_t all = 0;
  for (uint64_t r : received) all += r;
  const uint64_t mine = received[static_cast<std::size_t>(etp_rank)];
  v.etp_all_gather = static_cast<uint64_t>(s.etp - 1) * mine * row;
  v.etp_reduce_scatter = (all - mine) * row;
  add_gemms(v, s, rows);
  return v;
}

MoEVolume moe_volume_uniform(const MoEVolumeSpec& s, int64_t tokens) {
  check(s);
  const uint64_t row = static_cast<uint64_t>(s.hidden) * s.element_bytes;
  const auto choices = static_cast<uint64_t>(tokens * s.topk);
  MoEVolume v;
  v.dispatch = v.combine = choices * static_cast<uint64_t>(s.ep - 1) / static_cast<uint64_t>(s.ep) * row;
  v.etp_all_gather = v.etp_reduce_scatter = static_cast<uint64_t>(s.etp - 1) * choices * row;
  add_gemms(v, s,
            std::vector<int64_t>(static_cast<std::size_t>(s.num_experts / s.ep),
                                 tokens * s.topk * s.ep * s.etp / s.num_experts));
  return v;
}

}  // namespace tpsp::moe
