// tpsp-capacity: per layer and per rank, the parameter bytes, the activation bytes kept for backward
// (with and without sequence parallelism), the collectives of a layer and of a training step with
// their bytes, and their ring-model time at a link — this engine's accounting
// (engine/model/capacity.h), for a preset or any sizes:
//   tpsp-capacity --model llama-70b --tp 8 --sp
//   tpsp-capacity --hidden 1024 --heads 16 --seq 2048 --tp 4 --no-sp --link 2GB/s --json
// Exit status 0, or 2 with a message naming the rule for sizes the engine refuses.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <optional>

#include "engine/error.h"
#include "tools/capacity/presets.h"
#include "tools/capacity/report.h"

namespace {

/// Flags that override the preset when given.
struct Overrides {
  std::optional<int64_t> hidden, ffn, heads, seq, batch, layers, vocab;
  std::optional<int64_t> moe_experts, moe_topk, moe_ffn;
  std::optional<int> ep, etp;
  bool tied = true;
  bool tied_given = false;  ///< --tied or --untied was on the command line
};

/// The preset's sizes with every flag given on the command line applied.
tpsp::model::CapacityConfig apply(tpsp::model::CapacityConfig c, const Overrides& o) {
  if (o.hidden) c.gpt.hidden = *o.hidden;
  if (o.ffn) c.gpt.ffn = *o.ffn;
  if (o.heads) c.gpt.heads = *o.heads;
  if (o.seq) c.gpt.seq = *o.seq;
  if (o.batch) c.batch = *o.batch;
  if (o.layers) c.gpt.layers = *o.layers;
  if (o.vocab) c.gpt.vocab = *o.vocab;
  if (o.tied_given) c.gpt.tied = o.tied;
  return c;
}

std::string preset_help() {
  std::string s = "model preset; flags override its sizes:";
  for (const auto& p : tpsp::capacity::presets()) s += "\n  " + p.name + ": " + p.about;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tpsp-capacity: parameter, activation and communication bytes per layer and per rank of this "
      "engine's tensor-parallel (+ sequence-parallel) GPT, and the ring-model time of the collectives"};
  std::string model_name = "demo", dtype = "bf16", link_spec = "nvlink";
  Overrides o;
  int tp = 1;
  bool sp = false, as_json = false;
  app.add_option("--model", model_name, preset_help())->capture_default_str();
  app.add_option("--hidden", o.hidden, "hidden size h");
  app.add_option("--ffn", o.ffn, "MLP width (the preset's, else 4h)");
  app.add_option("--heads", o.heads, "attention heads");
  app.add_option("--seq", o.seq, "sequence length s (also the position table's length)");
  app.add_option("--batch", o.batch, "micro-batch size b");
  app.add_option("--layers", o.layers, "transformer layers");
  app.add_option("--vocab", o.vocab, "vocabulary size V (padded to a multiple of tp)");
  CLI::Option* tied = app.add_flag("--tied,!--untied", o.tied, "output layer shares the word embedding");
  app.add_option("--dtype", dtype, "storage of parameters and activations (compute is f32)")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  app.add_option("--tp", tp, "tensor-parallel size")->capture_default_str();
  app.add_flag("--sp,!--no-sp", sp, "sequence parallelism");
  app.add_option("--link", link_spec,
                 "link of the time column: nvlink, pcie, ib, <x>GB/s, <x>MB/s (,<y>us), off")
      ->capture_default_str();
  app.add_option("--moe-experts", o.moe_experts, "num_moe_experts: adds the MoE section (0: none)");
  app.add_option("--moe-topk", o.moe_topk, "moe_router_topk (the preset's, else 2)");
  app.add_option("--moe-ffn", o.moe_ffn, "each expert's ffn (the preset's, else --ffn)");
  app.add_option("--ep", o.ep, "expert_model_parallel_size of the MoE section");
  app.add_option("--etp", o.etp, "expert_tensor_parallel_size of the MoE section");
  app.add_flag("--json", as_json, "print JSON instead of tables");
  CLI11_PARSE(app, argc, argv);
  o.tied_given = tied->count() > 0;

  try {
    const tpsp::capacity::Preset& preset = tpsp::capacity::find_preset(model_name);
    tpsp::capacity::Question q;
    q.config = apply(preset.config, o);
    const bool changed =
        o.hidden || o.ffn || o.heads || o.seq || o.batch || o.layers || o.vocab || o.tied_given;
    q.model = changed ? preset.name + " with sizes changed by flags" : preset.name;
    q.about = preset.about;
    q.config.tp = tp;
    q.config.sequence_parallel = sp;
    q.config.dtype = dtype == "f32" ? tpsp::DType::f32 : tpsp::DType::bf16;
    q.link = tpsp::comm::LinkModel::parse(link_spec);
    tpsp::capacity::MoeQuestion moe = preset.moe;
    if (o.moe_experts) moe.experts = *o.moe_experts;
    if (o.moe_topk) moe.topk = *o.moe_topk;
    moe.ffn = o.moe_ffn ? *o.moe_ffn : moe.ffn > 0 ? moe.ffn : q.config.gpt.ffn_hidden();
    if (o.ep) moe.ep = *o.ep;
        if (o.etp) moe.etp = *o.etp;
    if (moe.enabled()) moe.validate();  // before anything is printed

    if (as_json) {
      nlohmann::json j = tpsp::capacity::report_json(q);
      if (moe.enabled()) j["moe"] = tpsp::capacity::moe_report_json(q, moe);
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << tpsp::capacity::report_table(q);
      if (moe.enabled()) std::cout << tpsp::capacity::moe_report_table(q, moe);
    }
  } catch (const tpsp::ShapeError& e) {
    std::fprintf(stderr, "tpsp-capacity: %s\n", e.what());
    return 2;
  }
  return 0;
}
