#include "tools/capacity/presets.h"

#include "engine/error.h"

namespace tpsp::capacity {

namespace {

model::CapacityConfig sizes(int64_t hidden, int64_t ffn, int64_t heads, int64_t layers, int64_t vocab,
                            int64_t seq, int64_t batch, bool tied) {
  model::CapacityConfig c;
  c.gpt.hidden = hidden;
  c.gpt.ffn = ffn;
  c.gpt.heads = heads;
  c.gpt.layers = layers;
  c.gpt.vocab = vocab;
  c.gpt.seq = seq;
  c.gpt.tied = tied;
  c.batch = batch;
  return c;
}

model::CapacityConfig llama(const GPTConfig& gpt, int64_t batch) {
  model::CapacityConfig c;
  c.gpt = gpt;
  c.batch = batch;
  return c;
}

}  // namespace

const std::vector<Preset>& presets() {
  static const std::vector<Preset> all = {
      {"llama-70b",
       "Llama-2-70B (Touvron et al. 2023; the seed's section 6: h=8192, ffn=28672, 64 heads, s=4096, b=1): "
       "this engine's Llama block, with grouped-query attention (8 key/value groups of 128), SwiGLU (three "
       "FFN matrices, gate and up fused), RMSNorm, RoPE, no biases, untied output: 68,976,648,192 "
       "parameters",
       llama(llama_config(32000, 4096, 8192, 64, 8, 80, 28672), 1)},
      {"gpt3-175b",
       "GPT-3 175B (Brown et al. 2020; Korthikanti et al. 2022 Table 3: h=12288, 96 heads, 96 layers, "
       "s=2048, b=1)",
       sizes(12288, 4 * 12288, 96, 96, 50257, 2048, 1, true)},
      {"gpt2", "GPT-2 small (Radford et al. 2019: h=768, 12 heads, 12 layers, s=1024)",
       sizes(768, 3072, 12, 12, 50257, 1024, 1, true)},
      {"deepseek-moe-16b",
       "DeepSeekMoE 16B (Dai et al. 2024: h=2048, 16 heads, 28 layers, V=102400, s=4096, b=1; 64 routed "
       "experts of ffn 1408, top-6): the dense tables count its dense MLP (ffn 10944, the first layer's); "
       "the MoE section counts one MoE layer's routed experts (its 2 shared experts are not modelled), at "
       "EP=8, ETP=1 unless --ep/--etp say otherwise",
       llama(llama_config(102400, 4096, 2048, 16, 16, 28, 10944), 1),
       {.experts = 64, .topk = 6, .ffn = 1408, .ep = 8, .etp = 1}},
      {"moe-etp",
       "the MoE layer of lab06's comparison (make compare-etp: h=4096, 8 experts, top-2, expert "
       "ffn 1408, 256 tokens per rank) at EP=4, ETP=1 against EP=2, ETP=2, inside a small Llama block",
       llama(llama_config(32000, 256, 4096, 32, 8, 1, 1408), 1),
       {.experts = 8, .topk = 2, .ffn = 1408, .ep = 4, .etp = 1}},
      {"demo", "the model `make demo` trains (tpsp-train's defaults: byte-level, h=64, 4 heads, s=64, b=8)",
       sizes(64, 256, 4, 2, 256, 64, 8, true)},
  };
  return all;
}

const Preset& find_preset(const std::string& name) {
  std::string known;
  for (const Preset& p : presets()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw ShapeError(detail::cat("--model ", name, " is not a preset (known: ", known, ")"));
}

}  // namespace tpsp::capacity
