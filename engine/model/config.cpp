#include "engine/model/config.h"

#include "engine/error.h"

namespace tpsp {

namespace {
std::string layer_prefix(int64_t i) {
  return "decoder.layers." + std::to_string(i) + ".";
}
}  // namespace

std::vector<std::pair<std::string, Shape>> gpt_parameter_shapes(const GPTConfig& c) {
  const int64_t h = c.hidden, f = c.ffn_hidden();
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
}

std::string GPTConfig::str() const {
  return detail::cat("V=", vocab, " s=", seq, " h=", hidden, " heads=", heads, " layers=", layers,
                     " ffn=", ffn_hidden(), " dropout=", dropout, tied ? " tied" : " untied");
}

}  // namespace tpsp
