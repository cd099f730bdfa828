// Training options shared by the parallel trainer (tpsp-train) and the demo driver (tpsp-demo).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "engine/model/config.h"
#include "engine/ops/adamw.h"

namespace tpsp::train {

/// One training run: the model, the data, the parallel layout and the optimiser.
struct TrainOptions {
  GPTConfig gpt;  ///< vocab is fixed at 256 (byte-level text)
                  /// --model gpt | llama | moe: the GPT-2 block, the Llama block, or the Llama block whose
                  /// MLPs are MoE
  /// layers (apply_model sets GPTConfig's block and MoE fields).
  std::string model = "gpt";
  /// --model moe: --experts (num_moe_experts), --moe-topk, --moe-ffn (moe_ffn_hidden_size, 0: the dense
  /// ffn), --moe-aux-loss-coeff, --moe-layer-freq; --ep (expert_model_parallel_size; 0: the largest that
  /// divides both the world / etp and the experts) and --etp (expert_tensor_parallel_size).
  int64_t experts = 4;
  int64_t moe_topk = 2;
  int64_t moe_ffn = 0;
  float moe_aux_loss_coeff = 0.01f;
  int64_t moe_layer_freq = 1;
  int ep = 0;
  int etp = 1;
  int64_t batch = 8;  ///< global batch b (split over dp)
  int64_t steps = 100;
  uint64_t seed = 1234;
  std::string text;  ///< corpus path (add_train_options fills in default_text_path() when empty)
  int tp = 2;
  int dp = 1;
  bool sequence_parallel = true;
  bool tp_comm_overlap = false;  ///< --tp-comm-overlap: overlap TP communication with GEMMs (lab04)
  std::string link;              ///< link emulation spec (empty = off), e.g. "nvlink", "2GB/s"
  /// Fingerprint every collective (desync detection, ProcessGroup GroupOptions::fingerprints): one
  /// small all-gather per call, 7–11% of a step on 2 cores. Off by default in training; ./check and
  /// the tests always have it on.
  bool check_collectives = false;
  /// --device cpu | cuda | cuda-emulated and --backend gloo | relay | nccl (engine/runtime/device_runtime.h;
  /// the default: gloo, or relay in a build without Gloo).
  std::string device = "cpu";
  std::string backend = TPSP_WITH_GLOO ? "gloo" : "relay";
  ops::AdamWConfig adamw{.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.01f};
};

/// Registers --tp --sp/--no-sp --dp --steps --seed --dropout --link --check-collectives --device --backend
/// --text --batch --seq --hidden --heads --layers --lr --model --query-groups --experts --moe-topk --moe-ffn
/// --moe-aux-loss-coeff --moe-layer-freq --ep --etp on `app`, writing into `o`; an
/// empty `o.text` becomes default_text_path() (data/genesis_kjv.txt).
void add_train_options(CLI::App& app, TrainOptions& o);

/// After parsing: --model llama turns o.gpt into the Llama block at its sizes (RMSNorm, SwiGLU, RoPE, no
/// biases, untied; --query-groups key/value groups); --model moe into the same block with MoE layers (the
/// MoE options above; --ep 0 resolved); --model gpt leaves the GPT-2 block.
void apply_model(TrainOptions& o);

/// The command-line flags that reproduce `o` (for handing a run to tpsp-train).
std::string train_options_flags(const TrainOptions& o);

}  // namespace tpsp::train
