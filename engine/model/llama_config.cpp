#include "engine/model/llama_config.h"

#include <cmath>

#include "engine/error.h"

namespace tpsp::model {

void LlamaLayerConfig::validate(int tp) const {
  TPSP_CHECK(hidden > 0 && heads > 0 && (ffn > 0 || moe()) && num_query_groups >= 0 && tp > 0,
             "llama layer: sizes must be positive, got h=", hidden, " heads=", heads, " ffn=", ffn,
             " num_query_groups=", num_query_groups, " tp=", tp);
  TPSP_CHECK(hidden % heads == 0, "llama layer: hidden=", hidden, " is not divisible by heads=", heads);
  TPSP_CHECK(heads % groups() == 0, "llama layer: heads=", heads,
             " is not divisible by num_query_groups=", groups());
  TPSP_CHECK(head_dim() % 2 == 0, "llama layer: head_dim=", head_dim(),
             " is odd; rotary embedding rotates pairs (i, i + d/2)");
  TPSP_CHECK(heads % tp == 0, "llama layer: heads=", heads, " is not divisible by tp=", tp);
  TPSP_CHECK(moe() || ffn % tp == 0, "llama layer: ffn=", ffn, " is not divisible by tp=", tp);
  TPSP_CHECK(num_moe_experts >= 0, "llama layer: num_moe_experts=", num_moe_experts, " must not be negative");
  TPSP_CHECK(!moe() || moe_ffn_hidden_size > 0, "llama layer: moe_ffn_hidden_size=", moe_ffn_hidden_size,
             " must be positive");
  TPSP_CHECK(!moe() || (std::isfinite(moe_aux_loss_coeff) && moe_aux_loss_coeff >= 0.f),
             "llama layer: moe_aux_loss_coeff=", moe_aux_loss_coeff, " must be finite and not negative");
  TPSP_CHECK(!moe() || (moe_router_topk >= 1 && moe_router_topk <= num_moe_experts),
             "llama layer: moe_router_topk=", moe_router_topk,
             " must be between 1 and num_moe_experts=", num_moe_experts);
  TPSP_CHECK(groups() % tp == 0 || tp % groups() == 0, "llama layer: num_query_groups=", groups(),
             " and tp=", tp,
             ": one must divide the other (whole groups per rank, or tp/groups ranks sharing a group)");
  const int64_t rows = groups() * (heads / groups() + 2) * head_dim();
  TPSP_CHECK(rows % tp == 0, "llama layer: the fused QKV weight's ", rows,
             " rows are not divisible by tp=", tp);
}

LlamaLayerConfig llama_layer_config(const GPTConfig& c, int64_t layer) {
  LlamaLayerConfig l{.hidden = c.hidden,
                     .heads = c.heads,
                     .num_query_groups = c.num_query_groups,
                     .ffn = c.ffn_hidden(),
                     .norm_eps = c.ln_eps,
                     .rotary_base = c.rotary_base,
                     .qk_layernorm = c.qk_layernorm};
  if (layer >= 0 && c.moe_layer(layer)) {
    l.num_moe_experts = c.num_moe_experts;
    l.moe_router_topk = c.moe_router_topk;
    l.moe_ffn_hidden_size = c.moe_ffn();
    l.moe_aux_loss_coeff = c.moe_aux_loss_coeff;
  }
  return l;
}

}  // namespace tpsp::model
