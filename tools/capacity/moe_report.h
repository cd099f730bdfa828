// tpsp-capacity's MoE section: one MoE layer's bytes per rank (routed experts, a uniform routing) at
// an EP × ETP layout and at the other layout of the same expert world EP·ETP, from the closed forms
// of engine/moe/comm_volume.h, the expert GEMMs [M, N, K] a rank runs and the expert weights it holds.
// Lesson 06 ("Expert tensor parallelism, and its price") derives the formulas; tests/moe checks them
// against the recorder.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tools/capacity/report.h"

namespace tpsp::capacity {

/// The MoE layer of the question: num_moe_experts, moe_router_topk, each expert's ffn (the width of gate
/// and of up), expert_model_parallel_size and expert_tensor_parallel_size.
struct MoeQuestion {
  int64_t experts = 0;
  int64_t topk = 2;
  int64_t ffn = 0;
  int ep = 1, etp = 1;
  bool enabled() const { return experts > 0; }
  /// Throws ShapeError naming the rule: topk outside 1..experts, ffn not positive, ep or etp below 1,
  /// experts not divisible by ep, ffn not divisible by etp.
  void validate() const;
};

/// The tokens one rank routes per layer: its sequence shard under SP (s·b/tp), else s·b.
int64_t moe_tokens_per_rank(const Question& q);

/// {"experts", "topk", "ffn", "tokens_per_rank", "element_bytes", "layouts": [{"ep", "etp", "dispatch",
/// "combine", "etp_all_gather", "etp_reduce_scatter", "total", "gemms": [[M, N, K], ...],
/// "expert_weight_bytes"}, ...]} — the asked layout first, then the other layout of the same EP·ETP
/// (ETP = 1 when ETP > 1; EP/2 × ETP 2 when ETP = 1 and EP is even; none otherwise). Forward bytes;
/// backward sends as much again. Throws ShapeError as validate().
nlohmann::json moe_report_json(const Question& q, const MoeQuestion& m);

/// The same as a text table.
std::string moe_report_table(const Question& q, const MoeQuestion& m);

}  // namespace tpsp::capacity
