// lab05's prediction step (./check lab05 --predict; checkers/predict/predict.h): one Llama layer with
// sequence parallelism and fewer key/value groups than ranks, forward, backward and the norm gradients'
// sum. tests/predict/test_steps_match_recorder.cpp runs it with the engine's solution and requires the
// recorder's calls to equal these.
#include "checkers/predict/step_helpers.h"

namespace tpsp::checkers::predict {

using comm::OpKind;

namespace {

// One Llama layer: s=256, b=1, h=512, 8 query heads of d=64 in G=2 key/value groups (Q=4), ffn=1024
// (the width of gate and of up), qk_layernorm on, tp=4 (two ranks share each group), SP, f32.
constexpr int64_t LS = 256, LB = 1, LH = 512, LHEADS = 8, LG = 2, LD = LH / LHEADS, LFFN = 1024, LTP = 4;
constexpr uint64_t kLsbh = LS * LB * LH * kF32;                           // 512 KiB
constexpr uint64_t kLqkv = LS * LB * LG * (LHEADS / LG + 2) * LD * kF32;  // 768 KiB
constexpr uint64_t kLnorms = (2 * LH + 2 * LD) * kF32;                    // 4.5 KiB

}  // namespace

Step lab05_step() {
  Step s{.lab = "lab05",
         .title =
             "one Llama layer with SP: s=256, b=1, h=512, 8 query heads of d=64 in 2 key/value groups, "
             "ffn=1024 (gate and up each), qk_layernorm; forward, backward, then finalize_grads (the "
             "partial norm gradients); tp=4, f32",
         .phases = {"forward", "backward", "finalize_grads"},
         .group_size = LTP,
         .sizes = {{"s", LS},
                   {"b", LB},
                   {"h", LH},
                   {"heads", LHEADS},
                   {"groups", LG},
                   {"d", LD},
                   {"ffn", LFFN},
                   {"tp", LTP}}};
  const std::string whole = tensor({LS, LB, LH}, kLsbh),
                    qkv = tensor({LS, LB, LG * (LHEADS / LG + 2) * LD}, kLqkv);
  s.calls = {
      {call("forward", OpKind::all_gather, "tp", kLsbh, 0),
       "its output, the normed input gathered whole, " + whole,
       "linear_qkv under SP: the column-parallel GEMM needs every token"},
      {call("forward", OpKind::all_gather, "tp", kLqkv, 2), "its output, the whole QKV activation, " + qkv,
       "2 groups on 4 ranks: each rank's QKV columns cut through a group, so the activation is gathered "
       "along "
       "its last dim and rank r keeps group r / 2 (Megatron's get_query_key_value_tensors)"},
      {call("forward", OpKind::reduce_scatter, "tp", kLsbh, 0), "linear_proj's partial output " + whole,
       "linear_proj under SP: the partial outputs are summed and each rank keeps s/tp rows"},
      {call("forward", OpKind::all_gather, "tp", kLsbh, 0),
       "its output, the normed input gathered whole, " + whole,
       "linear_fc1 (the fused [W_gate; W_up]) under SP"},
      {call("forward", OpKind::reduce_scatter, "tp", kLsbh, 0), "linear_fc2's partial output " + whole,
       "linear_fc2 under SP"},
      {call("backward", OpKind::all_gather, "tp", kLsbh, 0), "its output, dY gathered whole, " + whole,
       "linear_fc2's backward: the reduce-scatter's conjugate"},
      {call("backward", OpKind::all_gather, "tp", kLsbh, 0),
       "its output, fc1's input gathered again, " + whole,
       "linear_fc1's weight gradient needs every token, and only the shard was saved"},
      {call("backward", OpKind::reduce_scatter, "tp", kLsbh, 0), "fc1's partial input gradient " + whole,
       "linear_fc1's backward: the all-gather's conjugate"},
      {call("backward", OpKind::all_gather, "tp", kLsbh, 0),
       "its output, dY of linear_proj gathered whole, " + whole, "linear_proj's backward"},
      {call("backward", OpKind::reduce_scatter, "tp", kLqkv, 2), "the gradient of the gathered QKV " + qkv,
       "the QKV gather's backward: zero outside this rank's heads and its group's k and v; the sum adds the "
       "k and v gradients of the two ranks sharing a group"},
      {call("backward", OpKind::all_gather, "tp", kLsbh, 0),
       "its output, qkv's input gathered again, " + whole, "linear_qkv's weight gradient"},
      {call("backward", OpKind::reduce_scatter, "tp", kLsbh, 0), "qkv's partial input gradient " + whole,
       "linear_qkv's backward"},
      {call("finalize_grads", OpKind::all_reduce, "tp", kLnorms),
       "input/pre_mlp_layernorm's and q/k_layernorm's gradients " + tensor({2 * LH + 2 * LD}, kLnorms),
       "under SP each rank's residual-stream norms saw s/tp tokens, and q/k_layernorm each rank's heads "
       "only: all four are summed over TP, coalesced into one all-reduce"}};
  s.hints = {{"", OpKind::all_reduce,
              "with SP the layer's linear layers never all-reduce: only the partial norm gradients are "
              "all-reduced, once, after backward"}};
  return s;
}

}  // namespace tpsp::checkers::predict
