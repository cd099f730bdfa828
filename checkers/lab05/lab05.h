// lab05 scenarios, shared by the ranks and the grader: the Llama block's TP pieces in configurations
// where their wrong variants differ — key/value groups above tp (whole groups per rank) and below it
// (tp/G ranks sharing a group through the gathered QKV activation), every rank compared, sequences of 12
// tokens so that a shard's position offset shows, packed documents whose boundary is not a shard's.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "checkers/inputs.h"
#include "engine/model/llama_config.h"

namespace tpsp::checkers::lab05 {

constexpr int64_t S = 12, D = 6, FFN = 24;
/// Packed sequences: one batch row of three documents, [0, 5), [5, 9) and [9, 12): under SP the boundary
/// at 5 falls inside a shard for tp = 2, 3, 4; three documents tell "restart at every boundary" from
/// "restart at the first one".
inline const std::vector<int64_t> kPackedCu{0, 5, 9, 12};

/// One attention configuration of a TP size: "groups_per_rank" (G % tp == 0: each rank holds G/tp whole
/// groups), "shared_groups" (tp % G == 0, G < tp: tp/G ranks share each group) or "multi_head"
/// (num_query_groups = 0: one group per head, Megatron's default).
struct LlamaCase {
  std::string name;
  int64_t heads;
  int64_t query_groups;  ///< num_query_groups: 0 = heads
  int64_t groups() const { return query_groups > 0 ? query_groups : heads; }
};
/// The cases of tp (1: no shared group). Head dim D (even, RoPE), qk_layernorm on, ffn FFN; every fused
/// QKV row count divisible by tp.
inline std::vector<LlamaCase> llama_cases(int tp) {
  switch (tp) {
    case 1:
      return {{"groups_per_rank", 4, 2}, {"multi_head", 2, 0}};
    case 2:
      return {{"groups_per_rank", 8, 4}, {"shared_groups", 4, 1}, {"multi_head", 4, 0}};
    case 3:
      return {{"groups_per_rank", 6, 3}, {"shared_groups", 6, 1}, {"multi_head", 6, 0}};
    default:
      return {{"groups_per_rank", 8, 4}, {"shared_groups", 8, 2}, {"multi_head", 8, 0}};
  }
}

inline model::LlamaLayerConfig config_of(const LlamaCase& c) {
  return {.hidden = c.heads * D,
          .heads = c.heads,
          .num_query_groups = c.query_groups,
          .ffn = FFN,
          .qk_layernorm = true};
}

/// The whole UNFUSED parameters' draw: matrices N(0, 0.3²), norm weights 1 + N(0, 0.1²). Every rank's by
/// design (checkers/inputs.h): the engine's shard_llama_layer cuts them (the lab's pieces decide which
/// part a rank keeps).
inline Tensor whole_param(const std::string& name, const Shape& shape, const InputDraw& d,
                          const LlamaCase& c) {
  const bool norm = name.find("layernorm") != std::string::npos;
  Tensor t = input_tensor(shape, d, "lab05." + c.name + "." + name, norm ? 0.1f : 0.3f);
  if (norm)
    for (int64_t i = 0; i < t.numel(); ++i) t.at(i) += 1.f;
  return t;
}
/// The layer's input x and output gradient dy [s, b, h]: whole, or split along s under SP (a rank's s/tp
/// rows).
inline Tensor layer_x(const InputDraw& d, const LlamaCase& c, int64_t b, bool sp) {
  return (sp ? d.split(0) : d)({"lab05." + c.name + ".x", {S, b, c.heads * D}});
}
inline Tensor layer_dy(const InputDraw& d, const LlamaCase& c, int64_t b, bool sp) {
  return (sp ? d.split(0) : d)({"lab05." + c.name + ".dy", {S, b, c.heads * D}});
}
/// The fused fc1 [2·ffn, h] of the fc1_shard scenario, integer-valued (exact): every rank's by design (the
/// learner's shard_linear_fc1 cuts it).
inline Tensor fc1_whole(const InputDraw& seed, int64_t ffn) {
  return input_tensor({2 * ffn, 8}, seed, "lab05.fc1." + std::to_string(ffn), 1, true);
}

/// The whole UNFUSED parameters of one layer (reference/llama_layer.h's names, no prefix) and their shapes.
inline std::vector<std::pair<std::string, Shape>> unfused_shapes(const LlamaCase& c) {
  const int64_t h = c.heads * D, q = c.heads * D, kv = c.groups() * D;
  return {{"input_layernorm.weight", {h}},
          {"self_attention.linear_q.weight", {q, h}},
          {"self_attention.linear_k.weight", {kv, h}},
          {"self_attention.linear_v.weight", {kv, h}},
          {"self_attention.q_layernorm.weight", {D}},
          {"self_attention.k_layernorm.weight", {D}},
          {"self_attention.linear_proj.weight", {h, q}},
          {"pre_mlp_layernorm.weight", {h}},
          {"mlp.linear_gate.weight", {FFN, h}},
          {"mlp.linear_up.weight", {FFN, h}},
          {"mlp.linear_fc2.weight", {h, FFN}}};
}
inline std::map<std::string, Tensor> whole_params(const InputDraw& seed, const LlamaCase& c) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, shape] : unfused_shapes(c)) out[name] = whole_param(name, shape, seed, c);
  return out;
}

/// The names the norm rule is asked about (norm_rule scenario), as ParallelGPT passes them (prefixed), and
/// whether each is partial over TP without SP and with SP.
struct NormName {
  const char* name;
  bool partial_without_sp, partial_with_sp;
};
inline constexpr NormName kNormNames[] = {{"decoder.layers.0.input_layernorm.weight", false, true},
                                          {"decoder.layers.1.pre_mlp_layernorm.weight", false, true},
                                          {"decoder.layers.0.self_attention.q_layernorm.weight", true, true},
                                          {"decoder.layers.2.self_attention.k_layernorm.weight", true, true},
                                          {"decoder.final_layernorm.weight", false, true},
                                          {"input_layernorm.weight", false, true}};
/// Names the norm rule must refuse: a linear weight, a norm of another model (Hugging Face's Llama),
/// a non-norm weight under self_attention.
inline const std::vector<std::pair<std::string, std::string>> kNotNormNames{
    {"linear_weight", "decoder.layers.1.mlp.linear_fc2.weight"},
    {"foreign_norm", "decoder.layers.0.post_attention_layernorm.weight"},
    {"attention_weight", "decoder.layers.0.self_attention.linear_proj.weight"}};

/// The fused fc1 widths the refusals scenario cuts at tp: 25 (odd), and for tp > 2 an even one tp does not
/// divide (26), so that a check of "ffn is even" instead of "tp divides ffn" is refused.
inline std::vector<int64_t> uneven_ffns(int tp) {
  return tp > 2 ? std::vector<int64_t>{25, 26} : std::vector<int64_t>{25};
}

/// The norm weights' gradients of a layer that the finalize phase sums.
inline const std::vector<std::string> kNormWeights{"input_layernorm.weight", "pre_mlp_layernorm.weight",
                                                   "self_attention.q_layernorm.weight",
                                                   "self_attention.k_layernorm.weight"};

}  // namespace tpsp::checkers::lab05
