#include "engine/model/config.h"

#include <cmath>

#include "engine/error.h"

namespace tpsp {

namespace {
std::string layer_prefix(int64_t i) {
  return "decoder.layers." + std::to_string(i) + ".";
}
}  // namespace

std::vector<std::pair<std::string, Shape>> llama_layer_shapes(int64_t h, int64_t heads, int64_t groups,
                                                              int64_t ffn, bool qk_layernorm,
                                                              const std::string& p) {
  const int64_t d = h / heads;
  std::vector<std::pair<std::string, Shape>> out{{p + "input_layernorm.weight", {h}},
                                                 {p + "self_attention.linear_q.weight", {heads * d, h}},
                                                 {p + "self_attention.linear_k.weight", {groups * d, h}},
                                                 {p + "self_attention.linear_v.weight", {groups * d, h}}};
  if (qk_layernorm) {
    out.push_back({p + "self_attention.q_layernorm.weight", {d}});
    out.push_back({p + "self_attention.k_layernorm.weight", {d}});
  }
  out.push_back({p + "self_attention.linear_proj.weight", {h, heads * d}});
  out.push_back({p + "pre_mlp_layernorm.weight", {h}});
  out.push_back({p + "mlp.linear_gate.weight", {ffn, h}});
  out.push_back({p + "mlp.linear_up.weight", {ffn, h}});
  out.push_back({p + "mlp.linear_fc2.weight", {h, ffn}});
  return out;
}

std::vector<std::pair<std::string, Shape>> moe_layer_shapes(int64_t h, int64_t f, int64_t num_experts,
                                                            const std::string& p) {
  std::vector<std::pair<std::string, Shape>> out{{p + "mlp.router.weight", {num_experts, h}}};
  for (int64_t e = 0; e < num_experts; ++e) {
    const std::string x = p + "mlp.experts.local_experts." + std::to_string(e) + ".";
    out.push_back({x + "linear_gate.weight", {f, h}});
    out.push_back({x + "linear_up.weight", {f, h}});
    out.push_back({x + "linear_fc2.weight", {h, f}});
  }
  return out;
}

GPTConfig llama_config(int64_t vocab, int64_t seq, int64_t hidden, int64_t heads, int64_t num_query_groups,
                       int64_t layers, int64_t ffn) {
  return {.vocab = vocab,
          .seq = seq,
          .hidden = hidden,
          .heads = heads,
          .layers = layers,
          .ffn = ffn,
          .tied = false,
          .normalization = "RMSNorm",
          .activation = "swiglu",
          .position_embedding_type = "rope",
          .num_query_groups = num_query_groups,
          .add_bias_linear = false};
}

std::vector<std::pair<std::string, Shape>> gpt_parameter_shapes(const GPTConfig& c) {
  const int64_t h = c.hidden, f = c.ffn_hidden();
  if (c.llama()) {
    std::vector<std::pair<std::string, Shape>> out{{"embedding.word_embeddings.weight", {c.vocab, h}}};
    for (int64_t i = 0; i < c.layers; ++i) {
      for (auto& e : llama_layer_shapes(h, c.heads, c.query_groups(), f, c.qk_layernorm, layer_prefix(i)))
        if (!c.moe_layer(i) || e.first.find(".mlp.") == std::string::npos) out.push_back(std::move(e));
      if (c.moe_layer(i))
        for (auto& e : moe_layer_shapes(h, c.moe_ffn(), c.num_moe_experts, layer_prefix(i)))
          out.push_back(std::move(e));
    }
    out.push_back({"decoder.final_layernorm.weight", {h}});
    if (!c.tied) out.push_back({"output_layer.weight", {c.vocab, h}});
    return out;
  }
  std::vector<std::pair<std::string, Shape>> out = {
      {"embedding.word_embeddings.weight", {c.vocab, h}},
      {"embedding.position_embeddings.weight", {c.seq, h}},
  };
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = layer_prefix(i);
    out.push_back({p + "input_layernorm.weight", {h}});
    out.push_back({p + "input_layernorm.bias", {h}});
    out.push_back({p + "self_attention.linear_qkv.weight", {3 * h, h}});
    out.push_back({p + "self_attention.linear_qkv.bias", {3 * h}});
    out.push_back({p + "self_attention.linear_proj.weight", {h, h}});
    out.push_back({p + "self_attention.linear_proj.bias", {h}});
    out.push_back({p + "pre_mlp_layernorm.weight", {h}});
    out.push_back({p + "pre_mlp_layernorm.bias", {h}});
    out.push_back({p + "mlp.linear_fc1.weight", {f, h}});
    out.push_back({p + "mlp.linear_fc1.bias", {f}});
    out.push_back({p + "mlp.linear_fc2.weight", {h, f}});
    out.push_back({p + "mlp.linear_fc2.bias", {h}});
  }
  out.push_back({"decoder.final_layernorm.weight", {h}});
  out.push_back({"decoder.final_layernorm.bias", {h}});
  if (!c.tied) out.push_back({"output_layer.weight", {c.vocab, h}});
  return out;
}

void GPTConfig::validate() const {
  TPSP_CHECK(vocab > 0 && seq > 0 && hidden > 0 && heads > 0 && layers > 0 && ffn >= 0,
             "GPT sizes must be positive: ", str());
  TPSP_CHECK(hidden % heads == 0, "hidden=", hidden, " is not divisible by heads=", heads);
  TPSP_CHECK(dropout >= 0.f && dropout < 1.f, "dropout p=", dropout, " is outside [0, 1)");
  TPSP_CHECK(label_smoothing >= 0.f && label_smoothing <= 1.f, "label_smoothing=", label_smoothing,
             " is outside [0, 1]");
  const bool gpt2 = normalization == "LayerNorm" && activation == "gelu" &&
                    position_embedding_type == "learned_absolute" && add_bias_linear &&
                    num_query_groups == 0 && !qk_layernorm;
  const bool llama_block = normalization == "RMSNorm" && activation == "swiglu" &&
                           position_embedding_type == "rope" && !add_bias_linear;
  TPSP_CHECK(num_moe_experts == 0 || llama_block, "num_moe_experts=", num_moe_experts,
             ": MoE layers are built on the Llama block only (normalization RMSNorm, swiglu, rope)");
  TPSP_CHECK(
      gpt2 || llama_block, "unsupported block normalization=", normalization, " activation=", activation,
      " position_embedding_type=", position_embedding_type, " add_bias_linear=", add_bias_linear,
      " num_query_groups=", num_query_groups, " qk_layernorm=", qk_layernorm,
      ": the engine builds the GPT-2 block (LayerNorm, gelu, learned_absolute, biases, no groups) or the "
      "Llama block (RMSNorm, swiglu, rope, no biases)");
  if (!llama_block) return;
  TPSP_CHECK(dropout == 0.f, "the Llama block has no dropout, got dropout p=", dropout);
  TPSP_CHECK(num_query_groups >= 0 && heads % query_groups() == 0, "heads=", heads,
             " is not divisible by num_query_groups=", num_query_groups);
  TPSP_CHECK(head_dim() % 2 == 0, "head_dim=", head_dim(),
             " is odd; rotary embedding rotates pairs (i, i + d/2)");
  TPSP_CHECK(rotary_base > 0.f, "rotary_base=", rotary_base, " must be positive");
  if (num_moe_experts == 0) return;
  TPSP_CHECK(num_moe_experts > 0, "num_moe_experts=", num_moe_experts, " must not be negative");
  TPSP_CHECK(moe_router_topk >= 1 && moe_router_topk <= num_moe_experts, "moe_router_topk=", moe_router_topk,
             " must be between 1 and num_moe_experts=", num_moe_experts);
  TPSP_CHECK(moe_layer_freq >= 1, "moe_layer_freq=", moe_layer_freq, " must be at least 1");
  TPSP_CHECK(moe_ffn_hidden_size >= 0, "moe_ffn_hidden_size=", moe_ffn_hidden_size, " must not be negative");
  TPSP_CHECK(std::isfinite(moe_aux_loss_coeff) && moe_aux_loss_coeff >= 0.f,
             "moe_aux_loss_coeff=", moe_aux_loss_coeff, " must be finite and not negative");
}

std::string GPTConfig::str() const {
  if (llama())
    return detail::cat("llama V=", vocab, " s=", seq, " h=", hidden, " heads=", heads,
                       " groups=", query_groups(), " layers=", layers, " ffn=", ffn_hidden(),
                       qk_layernorm ? " qk_layernorm" : "", tied ? " tied" : " untied",
                       num_moe_experts > 0
                           ? detail::cat(" moe: experts=", num_moe_experts, " topk=", moe_router_topk,
                                         " moe_ffn=", moe_ffn(), " every ", moe_layer_freq,
                                         " layer(s), aux_loss_coeff=", moe_aux_loss_coeff)
                           : std::string());
  return detail::cat("V=", vocab, " s=", seq, " h=", hidden, " heads=", heads, " layers=", layers,
                     " ffn=", ffn_hidden(), " dropout=", dropout, tied ? " tied" : " untied");
}

}  // namespace tpsp
