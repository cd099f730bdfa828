#include "tools/train/options.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "tools/train/paths.h"

namespace tpsp::train {

void add_train_options(CLI::App& app, TrainOptions& o) {
  o.gpt.vocab = 256;
  if (o.text.empty()) o.text = default_text_path();
  app.add_option("--tp", o.tp, "tensor-parallel size")->check(CLI::PositiveNumber);
  app.add_option("--dp", o.dp, "data-parallel size")->check(CLI::PositiveNumber);
  app.add_flag("--sp,!--no-sp", o.sequence_parallel, "sequence parallelism on/off");
  app.add_flag("--tp-comm-overlap", o.tp_comm_overlap,
               "overlap the linear layers' TP communication with their GEMMs (Megatron's tp_comm_overlap)");
  app.add_option("--steps", o.steps, "training steps")->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "seed of parameters, data and dropout");
  app.add_option("--dropout", o.gpt.dropout, "dropout probability")->check(CLI::Range(0.0, 0.99));
  app.add_option("--link", o.link, "emulated link: nvlink, pcie, ib or a bandwidth such as 2GB/s");
  app.add_flag(
      "--check-collectives", o.check_collectives,
      "fingerprint every collective to catch desynchronised ranks (costs 7-11% of a step; off by default)");
  app.add_option("--device", o.device,
                 "where the model computes: cpu, cuda (one GPU per rank: LOCAL_RANK modulo the GPUs), or "
                 "cuda-emulated (the GPU code paths in host memory, on the CPU)")
      ->check(CLI::IsMember({"cpu", "cuda", "cuda-emulated"}));
  app.add_option("--backend", o.backend,
                 "how ranks talk: gloo (device tensors staged through host memory; ranks may share a GPU), "
                 "relay (through tpsp-run --backend relay's relay process, staged the same way; no Gloo "
                 "needed) or nccl (--device cuda, one GPU per rank)")
      ->check(CLI::IsMember({"gloo", "relay", "nccl"}))
      ->capture_default_str();
  app.add_option("--text", o.text, "training text (bytes)")->check(CLI::ExistingFile)->capture_default_str();
  app.add_option("--batch", o.batch, "global batch size b")->check(CLI::PositiveNumber);
  app.add_option("--seq", o.gpt.seq, "sequence length s")->check(CLI::PositiveNumber);
  app.add_option("--hidden", o.gpt.hidden, "hidden size h")->check(CLI::PositiveNumber);
  app.add_option("--heads", o.gpt.heads, "attention heads")->check(CLI::PositiveNumber);
  app.add_option("--layers", o.gpt.layers, "transformer layers")->check(CLI::PositiveNumber);
  app.add_option("--lr", o.adamw.lr, "AdamW learning rate");
  app.add_option(
         "--model", o.model,
         "the block: gpt (GPT-2: LayerNorm, GELU, learned positions, biases), llama (RMSNorm, SwiGLU "
         "with a fused fc1, RoPE, grouped-query attention, no biases) or moe (llama with a mixture of "
         "experts in place of the MLPs: the --experts ... --etp options)")
      ->check(CLI::IsMember({"gpt", "llama", "moe"}));
  app.add_option("--experts", o.experts, "moe: experts per MoE layer (num_moe_experts)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--moe-topk", o.moe_topk, "moe: experts per token (moe_router_topk)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--moe-ffn", o.moe_ffn,
                 "moe: each expert's ffn width (moe_ffn_hidden_size; 0: the same width as the dense ffn, 4h)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--moe-aux-loss-coeff", o.moe_aux_loss_coeff,
                 "moe: coefficient of the load-balancing loss (moe_aux_loss_coeff)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--moe-layer-freq", o.moe_layer_freq,
                 "moe: every n-th layer is an MoE layer (0, n, 2n, ...)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--ep", o.ep,
                 "moe: expert_model_parallel_size, the ranks the experts are divided among, folded over the "
                 "same ranks as tp x dp (0, the default: the largest size dividing both world/etp and the "
                 "experts)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option(
         "--etp", o.etp,
         "moe: expert_tensor_parallel_size, the ranks each expert is split over (gate and up by rows, "
         "fc2 by columns); ep x etp must divide tp x dp")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  // The MoE options shape an MoE model only: given with another --model they are refused, not ignored.
  app.parse_complete_callback([&app, &o] {
    if (o.model == "moe") return;
    for (const char* flag : {"--experts", "--moe-topk", "--moe-ffn", "--moe-aux-loss-coeff",
                             "--moe-layer-freq", "--ep", "--etp"})
      if (app.count(flag) > 0)
        throw CLI::ValidationError(
            flag, std::string("is an MoE option: it needs --model moe (got --model ") + o.model + ")");
  });
  app.add_option(
         "--query-groups", o.gpt.num_query_groups,
         "llama: key/value groups (num_query_groups; default heads/2, grouped-query attention). Groups "
         "below tp (e.g. 1 at tp=2) share each group over tp/groups ranks")
      ->check(CLI::NonNegativeNumber);
}

void apply_model(TrainOptions& o) {
  if (o.model == "gpt") return;
  const GPTConfig g = o.gpt;
  // Default: the most key/value groups g ≤ heads/2 that divide the heads and fit tp (g % tp == 0 or
  // tp % g == 0), so any heads % tp == 0 gets grouped-query attention (1 group at worst).
  int64_t groups = g.num_query_groups;
  for (int64_t k = std::max<int64_t>(1, g.heads / 2); groups == 0 && k >= 1; --k)
    if (g.heads % k == 0 && (k % o.tp == 0 || o.tp % k == 0)) groups = k;
  o.gpt = llama_config(g.vocab, g.seq, g.hidden, g.heads, groups, g.layers, g.ffn);
  o.gpt.dropout = g.dropout;  // refused by validate() unless 0: the Llama block has no dropout
  if (o.model != "moe") return;
  o.gpt.num_moe_experts = o.experts;
  o.gpt.moe_router_topk = o.moe_topk;
  o.gpt.moe_ffn_hidden_size = o.moe_ffn > 0 ? o.moe_ffn : o.gpt.ffn_hidden();
  o.moe_ffn = o.gpt.moe_ffn_hidden_size;  // resolved, so that the flags handed on say the width
  o.gpt.moe_aux_loss_coeff = o.moe_aux_loss_coeff;
  o.gpt.moe_layer_freq = o.moe_layer_freq;
  if (o.ep == 0) o.ep = static_cast<int>(std::gcd<int64_t>(std::max(1, o.tp * o.dp / o.etp), o.experts));
}

std::string train_options_flags(const TrainOptions& o) {
  return fmt::format(
             "--tp {} --dp {} {} --steps {} --seed {} --dropout {} --text '{}' --batch {} --seq {} --hidden "
             "{} "
             "--heads {} "
             "--layers {} --lr {}{}",
             o.tp, o.dp, o.sequence_parallel ? "--sp" : "--no-sp", o.steps, o.seed, o.gpt.dropout, o.text,
             o.batch, o.gpt.seq, o.gpt.hidden, o.gpt.heads, o.gpt.layers, o.adamw.lr,
             o.link.empty() ? "" : " --link " + o.link) +
         (o.check_collectives ? " --check-collectives" : "") +
         (o.tp_comm_overlap ? " --tp-comm-overlap" : "") +
         (o.model == "gpt" ? ""
                           : fmt::format(" --model {} --query-groups {}", o.model, o.gpt.num_query_groups)) +
         (o.model != "moe" ? ""
                           : fmt::format(" --experts {} --moe-topk {} --moe-ffn {} --moe-aux-loss-coeff {} "
                                         "--moe-layer-freq {} --ep {} --etp {}",
                                         o.experts, o.moe_topk, o.moe_ffn, o.moe_aux_loss_coeff,
                                         o.moe_layer_freq, o.ep, o.etp)) +
         (o.device == "cpu" ? "" : " --device " + o.device) + " --backend " + o.backend;
}

}  // namespace tpsp::train
