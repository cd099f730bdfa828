// What one MoE layer's collectives send, per rank, as closed forms of the routing's counts (exact, for
// the recorder's check) and of a uniform routing (the capacity estimate): the token dispatch and
// combine all-to-alls over EP, the ETP all-gather of the tokens each ETP rank received and the
// reduce-scatter of the row-parallel partial sums (engine/moe/token_dispatcher.h), and the expert GEMMs
// [M, N, K] a rank runs. The lesson's section on ETP (docs/lessons) derives them; tests/moe compare
// them with the communication recorder.
//
// Uniform routing (each rank's T·k choices spread evenly over the E experts), one layer forward,
// b = bytes of an element:
//   dispatch           T·k·(EP−1)/EP·h·b           combine              the same
//   ETP all-gather     (ETP−1)·T·k·h·b             ETP reduce-scatter   the same
//   expert GEMMs       E/EP experts of M = T·k·EP·ETP/E rows:  fc1 [M, 2f/ETP, h], fc2 [M, h, f/ETP]
// Backward sends the same bytes again (each collective's mirror).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpsp::moe {

/// One GEMM as [M, N, K]: an [M, K] input times a [N, K] weight (Y = X·Wᵀ).
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
};

/// A rank's bytes sent to other ranks by each forward collective of one MoE layer, and its expert GEMMs.
struct MoEVolume {
  uint64_t dispatch = 0;            ///< all_to_all over EP, "<label>.dispatch"
  uint64_t combine = 0;             ///< all_to_all over EP back, "<label>.combine"
  uint64_t etp_all_gather = 0;      ///< "<label>.etp_all_gather" (0 at ETP 1)
  uint64_t etp_reduce_scatter = 0;  ///< "<label>.etp_reduce_scatter" (0 at ETP 1)
  std::vector<GemmShape> gemms;     ///< per local expert: fc1 (gate and up together), then fc2
};

/// The layout and sizes the volumes depend on.
struct MoEVolumeSpec {
  int ep = 1, etp = 1;
  int64_t num_experts = 1, topk = 1, hidden = 0, ffn = 0;
  uint64_t element_bytes = 4;
};

/// Exact volumes of the rank at (ep_rank, etp_rank) of a tp_ep block, from every tp_ep rank's choices per
/// expert: counts[p·E + e] with p = ep_rank·ETP + etp_rank (the dispatcher's exchanged counts). Throws
/// ShapeError when counts do not have EP·ETP·E entries or one is negative, a rank outside the layout, or
/// E not divisible by EP.
MoEVolume moe_volume(const MoEVolumeSpec& spec, const std::vector<int64_t>& counts, int ep_rank,
                     int etp_rank);

/// Volumes under a uniform routing of `tokens` tokens per rank (the table above; rows rounded down).
MoEVolume moe_volume_uniform(const MoEVolumeSpec& spec, int64_t tokens);

}  // namespace tpsp::moe
