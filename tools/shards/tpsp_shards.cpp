// tpsp-shards: which rows and columns of each weight and activation of one transformer layer every TP
// rank holds, as JSON (tools/shards/layout.h; drawn by tools/plot_shards.py for lessons 01–03):
//   tpsp-shards --tp 2                 the lessons' small layer (h=8, 4 heads, ffn=32, s=8, b=1)
//   tpsp-shards --tp 4 --sp --hidden 16 --heads 4 --seq 8
//   tpsp-shards --tp 4 --model llama --query-groups 2   the Llama block: fused fc1 with stride 2, k and v
//                                                       sharded over 2 groups of 2 ranks
// Exit status 0, or 2 with a message naming the rule for sizes the engine refuses.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "engine/error.h"
#include "engine/model/config.h"
#include "tools/shards/layout.h"

int main(int argc, char** argv) {
  CLI::App app{"tpsp-shards: the shard layout of one tensor-parallel transformer layer per TP rank, as JSON"};
  tpsp::shards::LayoutConfig cfg;
  cfg.gpt.hidden = 8;
  cfg.gpt.heads = 4;
  cfg.gpt.seq = 8;
  cfg.gpt.ffn = 0;
  app.add_option("--hidden", cfg.gpt.hidden, "hidden size h")->capture_default_str();
  app.add_option("--heads", cfg.gpt.heads, "attention heads")->capture_default_str();
  app.add_option("--ffn", cfg.gpt.ffn, "MLP width (0 = 4h)")->capture_default_str();
  app.add_option("--seq", cfg.gpt.seq, "sequence length s")->capture_default_str();
  app.add_option("--batch", cfg.batch, "micro-batch size b")->capture_default_str();
  app.add_option("--tp", cfg.tp, "tensor-parallel size")->capture_default_str();
  app.add_flag("--sp,!--no-sp", cfg.sequence_parallel, "sequence parallelism");
  std::string model = "gpt";
  app.add_option("--model", model, "gpt: the GPT-2 block; llama: RMSNorm, fused SwiGLU fc1, GQA, RoPE")
      ->check(CLI::IsMember({"gpt", "llama"}))
      ->capture_default_str();
  int64_t groups = 0;
  app.add_option("--query-groups", groups, "key/value groups of the Llama block (0 = heads)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (model == "llama") {
    const tpsp::GPTConfig g = cfg.gpt;
    cfg.gpt = tpsp::llama_config(g.vocab, g.seq, g.hidden, g.heads, groups, 1, g.ffn);
  } else if (groups != 0) {
    std::fprintf(stderr, "tpsp-shards: --query-groups needs --model llama\n");
    return 2;
  }
  try {
    std::cout << tpsp::shards::to_json(cfg, tpsp::shards::layer_layout(cfg)).dump(1) << "\n";
  } catch (const tpsp::ShapeError& e) {
    std::fprintf(stderr, "tpsp-shards: %s\n", e.what());
    return 2;
  }
  return 0;
}
