// Capacity arithmetic (see capacity.h): closed forms of the engine's parameters, saved activations
// and collectives, per rank.
#include "engine/model/capacity.h"

#include <algorithm>

#include "engine/comm/cost_model.h"
#include "engine/error.h"
#include "engine/model/llama_config.h"

namespace tpsp::model {

namespace {

using comm::OpKind;

uint64_t u(int64_t v) {
  return static_cast<uint64_t>(v);
}
uint64_t dtype_bytes(DType d) {
  return static_cast<uint64_t>(dtype_size(d));
}

/// Appends one call of `op` on S bytes with its wire bytes and ring-model time.
void add_call(std::vector<CollectiveCall>& out, const CapacityConfig& cfg, const comm::LinkModel& link,
              const std::string& phase, const std::string& label, OpKind op, uint64_t S) {
  out.push_back({phase, label, op, S, comm::wire_bytes(op, cfg.tp, S), link.seconds(op, cfg.tp, S)});
}

/// The column-parallel layer `name`'s calls in `phase` (engine/tensor_parallel/layers.cpp, under
/// SP layers_sp.cpp).
void column_parallel(std::vector<CollectiveCall>& out, const CapacityConfig& cfg, const comm::LinkModel& link,
                     const std::string& phase, const std::string& name) {
  const uint64_t S = sbh_bytes(cfg);
  if (!cfg.sequence_parallel) {
    if (phase == "backward") add_call(out, cfg, link, phase, name + ".f", OpKind::all_reduce, S);
    return;
  }
  if (phase == "forward") {
    add_call(out, cfg, link, phase, name + ".ag", OpKind::all_gather, S);
  } else {
    add_call(out, cfg, link, phase, name + ".ag_wgrad", OpKind::all_gather, S);
    add_call(out, cfg, link, phase, name + ".ag", OpKind::reduce_scatter, S);
  }
}

/// The row-parallel layer `name`'s calls in `phase` (its input is already split: no scatter).
void row_parallel(std::vector<CollectiveCall>& out, const CapacityConfig& cfg, const comm::LinkModel& link,
                  const std::string& phase, const std::string& name) {
  const uint64_t S = sbh_bytes(cfg);
  if (!cfg.sequence_parallel) {
    if (phase == "forward") add_call(out, cfg, link, phase, name + ".g", OpKind::all_reduce, S);
    return;
  }
  add_call(out, cfg, link, phase, name + ".rs",
           phase == "forward" ? OpKind::reduce_scatter : OpKind::all_gather, S);
}

}  // namespace

void CapacityConfig::validate() const {
  gpt.validate();
  TPSP_CHECK(batch >= 1, "batch b=", batch, " must be at least 1");
  TPSP_CHECK(tp >= 1, "tp=", tp, " must be at least 1");
  TPSP_CHECK(gpt.heads % tp == 0, "heads=", gpt.heads, " is not divisible by tp=", tp);
  TPSP_CHECK(gpt.ffn_hidden() % tp == 0, "ffn=", gpt.ffn_hidden(), " is not divisible by tp=", tp);
  TPSP_CHECK(!sequence_parallel || gpt.seq % tp == 0, "sequence parallelism: s=", gpt.seq,
             " is not divisible by tp=", tp);
  TPSP_CHECK(dtype == DType::f32 || dtype == DType::bf16, "dtype must be f32 or bf16, got ",
             dtype_name(dtype));
  if (gpt.llama()) llama_layer_config(gpt).validate(tp);
}

uint64_t sbh_bytes(const CapacityConfig& cfg) {
  return u(cfg.gpt.seq) * u(cfg.batch) * u(cfg.gpt.hidden) * dtype_bytes(cfg.dtype);
}

uint64_t sbh_bytes_per_rank(const CapacityConfig& cfg) {
  return u(cfg.rows()) * u(cfg.batch) * u(cfg.gpt.hidden) * dtype_bytes(cfg.dtype);
}

ParameterBytes parameter_bytes(const CapacityConfig& cfg) {
  cfg.validate();
  const uint64_t h = u(cfg.gpt.hidden), f = u(cfg.gpt.ffn_hidden()), t = u(cfg.tp),
                 e = dtype_bytes(cfg.dtype);
  const uint64_t padded_vocab = (u(cfg.gpt.vocab) + t - 1) / t * t;
  ParameterBytes p;
  if (cfg.gpt.llama()) {
    const uint64_t a = u(cfg.gpt.heads), g = u(cfg.gpt.query_groups()), d = h / a;
    const uint64_t replicated = 2 * h + (cfg.gpt.qk_layernorm ? 2 * d : 0);  // RMSNorm weights
    const uint64_t split =
        g * (a / g + 2) * d * h + h * a * d + 2 * f * h + h * f;  // fused QKV, proj, fc1, fc2
    p.per_layer = (replicated + split / t) * e;
    p.embedding = padded_vocab / t * h * e;  // no position table: RoPE
    p.output = (h + (cfg.gpt.tied ? 0 : padded_vocab / t * h)) * e;
    p.total = u(cfg.gpt.layers) * p.per_layer + p.embedding + p.output;
    return p;
  }
  const uint64_t replicated = 2 * 2 * h + h + h;  // two LayerNorms (γ, β), proj and fc2 biases
  const uint64_t split = (3 * h * h + 3 * h) + h * h + (f * h + f) + h * f;
  p.per_layer = (replicated + split / t) * e;
  p.embedding = (padded_vocab / t * h + u(cfg.gpt.seq) * h) * e;
  p.output = (2 * h + (cfg.gpt.tied ? 0 : padded_vocab / t * h)) * e;
  p.total = u(cfg.gpt.layers) * p.per_layer + p.embedding + p.output;
  return p;
}

uint64_t ActivationBytes::total() const {
  return residual + layernorm + layernorm_stats + qkv + attention_out + probs + fc1 + gelu + qkv_projections +
         qk_norm;
}

ActivationBytes activation_bytes_per_layer(const CapacityConfig& cfg) {
  cfg.validate();
  const uint64_t s = u(cfg.gpt.seq), b = u(cfg.batch), h = u(cfg.gpt.hidden), f = u(cfg.gpt.ffn_hidden()),
                 t = u(cfg.tp), a = u(cfg.gpt.heads), rows = u(cfg.rows()), e = dtype_bytes(cfg.dtype);
  const uint64_t f32 = dtype_bytes(DType::f32);
  ActivationBytes m;
  m.residual = 2 * rows * b * h * e;
  m.layernorm = 2 * rows * b * h * e;
  if (cfg.gpt.llama()) {
    const uint64_t g_all = u(cfg.gpt.query_groups()), d = h / a, n = a / t;
    const uint64_t g = g_all % t == 0 ? g_all / t : 1;  // groups on this rank
    m.layernorm_stats = 2 * rows * b * f32;
    m.qkv_projections = s * b * (n + 2 * g) * d * e;
    if (cfg.gpt.qk_layernorm) m.qk_norm = s * b * (n + g) * d * e + s * b * (n + g) * f32;
    m.qkv = s * b * (n + 2 * g) * d * e;
    m.attention_out = s * b * n * d * e;
    m.probs = b * n * s * s * f32;
    m.fc1 = s * b * (2 * f / t) * e;
    m.gelu = s * b * (f / t) * e;
    return m;
  }
  m.layernorm_stats = 4 * rows * b * f32;
  m.qkv = s * b * (3 * h / t) * e;
  m.attention_out = s * b * (h / t) * e;
  m.probs = b * (a / t) * s * s * f32;
  m.fc1 = s * b * (f / t) * e;
  m.gelu = s * b * (f / t) * e;
  return m;
}

uint64_t korthikanti_bytes_per_layer(const CapacityConfig& cfg) {
  cfg.validate();
  const double s = static_cast<double>(cfg.gpt.seq), b = static_cast<double>(cfg.batch),
               h = static_cast<double>(cfg.gpt.hidden), a = static_cast<double>(cfg.gpt.heads),
               t = static_cast<double>(cfg.tp);
  const double bytes = cfg.sequence_parallel ? s * b * h / t * (34 + 5 * a * s / h)
                                             : s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
  return static_cast<uint64_t>(bytes + 0.5);
}

std::vector<CollectiveCall> layer_collectives(const CapacityConfig& cfg, const comm::LinkModel& link,
                                              int64_t index) {
  cfg.validate();
  std::vector<CollectiveCall> out;
  if (cfg.tp == 1) return out;
  const std::string p = "decoder.layers." + std::to_string(index) + ".";
  // The Llama block with fewer groups than ranks gathers the QKV activation (engine/model/llama_layer.h).
  const bool gathered = cfg.gpt.llama() && cfg.gpt.query_groups() % cfg.tp != 0;
  const uint64_t qkv_whole = u(cfg.gpt.seq) * u(cfg.batch) * u(cfg.gpt.query_groups()) *
                             u(cfg.gpt.heads / cfg.gpt.query_groups() + 2) * u(cfg.gpt.head_dim()) *
                             dtype_bytes(cfg.dtype);
  // forward, top to bottom: attention (QKV in, proj out), then the MLP (fc1 in, fc2 out)
  column_parallel(out, cfg, link, "forward", p + "self_attention.linear_qkv");
  if (gathered)
    add_call(out, cfg, link, "forward", p + "self_attention.qkv_gather", OpKind::all_gather, qkv_whole);
  row_parallel(out, cfg, link, "forward", p + "self_attention.linear_proj");
  column_parallel(out, cfg, link, "forward", p + "mlp.linear_fc1");
  row_parallel(out, cfg, link, "forward", p + "mlp.linear_fc2");
  // backward, bottom to top
  row_parallel(out, cfg, link, "backward", p + "mlp.linear_fc2");
  column_parallel(out, cfg, link, "backward", p + "mlp.linear_fc1");
  row_parallel(out, cfg, link, "backward", p + "self_attention.linear_proj");
  if (gathered)
    add_call(out, cfg, link, "backward", p + "self_attention.qkv_gather", OpKind::reduce_scatter, qkv_whole);
  column_parallel(out, cfg, link, "backward", p + "self_attention.linear_qkv");
  return out;
}

std::vector<CollectiveCall> step_collectives(const CapacityConfig& cfg, const comm::LinkModel& link) {
  cfg.validate();
  std::vector<CollectiveCall> out;
  if (cfg.tp == 1) return out;
  const uint64_t S = sbh_bytes(cfg), f32 = dtype_bytes(DType::f32), tokens = u(cfg.gpt.seq) * u(cfg.batch);
  const bool sp = cfg.sequence_parallel;
  const std::string emb = "embedding.word_embeddings";
  // one phase of every layer, in the order the layers run: first to last forward, last to first backward
  auto layers = [&](const std::string& phase) {
    for (int64_t k = 0; k < cfg.gpt.layers; ++k) {
      const int64_t i = phase == "forward" ? k : cfg.gpt.layers - 1 - k;
      for (const CollectiveCall& c : layer_collectives(cfg, link, i))
        if (c.phase == phase) out.push_back(c);
    }
  };

  add_call(out, cfg, link, "forward", "check.replicated_inputs", OpKind::all_reduce, 6 * f32);
  add_call(out, cfg, link, "forward", emb + (sp ? ".rs" : ".g"),
           sp ? OpKind::reduce_scatter : OpKind::all_reduce, S);
  layers("forward");
  column_parallel(out, cfg, link, "forward", "output_layer");
  add_call(out, cfg, link, "forward", "cross_entropy.max", OpKind::all_reduce, tokens * f32);
  add_call(out, cfg, link, "forward", "cross_entropy.predicted_logit", OpKind::all_reduce, tokens * f32);
  const uint64_t sums = cfg.gpt.label_smoothing > 0.f ? 2 : 1;
  add_call(out, cfg, link, "forward", "cross_entropy.sum_exp", OpKind::all_reduce, sums * tokens * f32);

  column_parallel(out, cfg, link, "backward", "output_layer");
  layers("backward");
  if (sp) add_call(out, cfg, link, "backward", emb + ".rs", OpKind::all_gather, S);

  const uint64_t h = u(cfg.gpt.hidden), L = u(cfg.gpt.layers);
  uint64_t numel = 0;  // the gradients summed over TP: replicated under SP, and q/k_layernorm's always
  if (cfg.gpt.llama()) {
    numel = (sp ? L * 2 * h + h : 0) + (cfg.gpt.qk_layernorm ? L * 2 * u(cfg.gpt.head_dim()) : 0);
  } else if (sp) {
    numel = L * 6 * h + 2 * h + u(cfg.gpt.seq) * h;
  }
  if (numel > 0)
    add_call(out, cfg, link, "finalize_grads", "grads.sequence_parallel", OpKind::all_reduce, numel * f32);
  return out;
}

std::vector<CollectiveTotal> totals_by_collective(const std::vector<CollectiveCall>& calls) {
  std::vector<CollectiveTotal> out;
  for (const CollectiveCall& c : calls) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const CollectiveTotal& t) { return t.phase == c.phase && t.op == c.op; });
    if (it == out.end()) {
      out.push_back({c.phase, c.op});
      it = out.end() - 1;
    }
    it->calls += 1;
    it->tensor_bytes += c.tensor_bytes;
    it->wire_bytes += c.wire_bytes;
    it->seconds += c.seconds;
  }
  return out;
}

}  // namespace tpsp::model
