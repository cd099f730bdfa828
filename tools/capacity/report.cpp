#include "tools/capacity/report.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

namespace tpsp::capacity {

namespace {

using nlohmann::json;

/// The configuration with SP set to `sp`, or nothing if the engine would refuse it (s % tp under SP).
std::optional<model::CapacityConfig> with_sp(const model::CapacityConfig& c, bool sp) {
  model::CapacityConfig out = c;
  out.sequence_parallel = sp;
  if (sp && c.gpt.seq % c.tp != 0) return std::nullopt;
  return out;
}

/// One row of the activation table: name, shape, and the member it reads.
struct ActivationRow {
  const char* key;
  const char* name;
  const char* shape;        ///< the GPT-2 block's
  const char* llama_shape;  ///< the Llama block's (n query heads and g groups on the rank); null: none
  uint64_t model::ActivationBytes::*bytes;
};

const ActivationRow kActivationRows[] = {
    {"residual", "x_in, x_mid", "2 x [rows, b, h]", "2 x [rows, b, h]", &model::ActivationBytes::residual},
    {"layernorm", "norm outputs", "2 x [rows, b, h]", "2 x [rows, b, h]", &model::ActivationBytes::layernorm},
    {"layernorm_stats", "norm statistics", "4 x [rows, b] f32", "2 x [rows, b] f32",
     &model::ActivationBytes::layernorm_stats},
    {"qkv_projections", "q, k, v before RoPE", nullptr, "[s, b, (n+2g)d]",
     &model::ActivationBytes::qkv_projections},
    {"qk_norm", "q/k_layernorm", nullptr, "[s, b, (n+g)d] + f32", &model::ActivationBytes::qk_norm},
    {"qkv", "qkv", "[s, b, 3h/tp]", "[s, b, (n+2g)d] rotated", &model::ActivationBytes::qkv},
    {"attention_out", "attention output", "[s, b, h/tp]", "[s, b, n·d]",
     &model::ActivationBytes::attention_out},
    {"probs", "attention probabilities", "[b, heads/tp, s, s] f32", "[b, n, s, s] f32",
     &model::ActivationBytes::probs},
    {"fc1", "fc1 output", "[s, b, ffn/tp]", "[s, b, 2ffn/tp] gate|up", &model::ActivationBytes::fc1},
    {"gelu", "activation output", "[s, b, ffn/tp] GELU", "[s, b, ffn/tp] SwiGLU",
     &model::ActivationBytes::gelu},
};

json activations_json(const std::optional<model::CapacityConfig>& c) {
  if (!c) return nullptr;
  const model::ActivationBytes a = model::activation_bytes_per_layer(*c);
  json j;
  for (const ActivationRow& r : kActivationRows)
    if (c->gpt.llama() ? r.llama_shape != nullptr : r.shape != nullptr) j[r.key] = a.*r.bytes;
  if (!c->gpt.llama()) j["korthikanti_2022"] = model::korthikanti_bytes_per_layer(*c);
  j["total"] = a.total();
  j["all_layers"] = a.total() * static_cast<uint64_t>(c->gpt.layers);
  return j;
}

json calls_json(const std::vector<model::CollectiveCall>& calls) {
  json j = json::array();
  for (const model::CollectiveCall& c : calls)
    j.push_back({{"phase", c.phase},
                 {"label", c.label},
                 {"op", comm::op_name(c.op)},
                 {"tensor_bytes", c.tensor_bytes},
                 {"wire_bytes", c.wire_bytes},
                 {"seconds", c.seconds}});
  return j;
}

json totals_json(const std::vector<model::CollectiveCall>& calls) {
  json j = json::array();
  for (const model::CollectiveTotal& t : model::totals_by_collective(calls))
    j.push_back({{"phase", t.phase},
                 {"op", comm::op_name(t.op)},
                 {"calls", t.calls},
                 {"tensor_bytes", t.tensor_bytes},
                 {"wire_bytes", t.wire_bytes},
                 {"seconds", t.seconds}});
  return j;
}

/// Sum of wire bytes and seconds over calls.
std::pair<uint64_t, double> sums(const std::vector<model::CollectiveCall>& calls) {
  uint64_t bytes = 0;
  double seconds = 0;
  for (const model::CollectiveCall& c : calls) bytes += c.wire_bytes, seconds += c.seconds;
  return {bytes, seconds};
}

std::string human_seconds(double s) {
  if (s == 0) return "-";  // link off
  if (s < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.2f} s", s);
}

std::string link_str(const comm::LinkModel& l) {
  if (!l.enabled()) return "off (no times)";
  return fmt::format("{} ({:g} GB/s bus bandwidth, {:g} us per step)", l.name, l.bandwidth_Bps / 1e9,
                     l.latency_s * 1e6);
}

void communication_table(std::string& out, const std::vector<model::CollectiveCall>& calls) {
  if (calls.empty()) {
    out += "  none (tp=1)\n";
    return;
  }
  out += fmt::format("  {:<15}{:<16}{:>6}{:>14}{:>16}{:>12}\n", "phase", "collective", "calls", "tensors S",
                     "sent per rank", "ring time");
  for (const model::CollectiveTotal& t : model::totals_by_collective(calls))
    out += fmt::format("  {:<15}{:<16}{:>6}{:>14}{:>16}{:>12}\n", t.phase, comm::op_name(t.op), t.calls,
                       human_bytes(t.tensor_bytes), human_bytes(t.wire_bytes), human_seconds(t.seconds));
  const auto [bytes, seconds] = sums(calls);
  out += fmt::format("  {:<37}{:>14}{:>16}{:>12}\n", "total", "", human_bytes(bytes), human_seconds(seconds));
}

}  // namespace

std::string human_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  uint64_t div = 1;
  while (u < 4 && bytes >= div * 1024) div *= 1024, ++u;
  if (bytes % div == 0) return fmt::format("{} {}", bytes / div, units[u]);
  return fmt::format("{:.2f} {}", static_cast<double>(bytes) / static_cast<double>(div), units[u]);
}

nlohmann::json report_json(const Question& q) {
  const model::CapacityConfig& c = q.config;
  c.validate();
  const model::ParameterBytes p = model::parameter_bytes(c);
  const auto layer = model::layer_collectives(c, q.link);
  const auto step = model::step_collectives(c, q.link);
  json j;
  j["model"] = q.model;
  j["about"] = q.about;
  j["config"] = {{"hidden", c.gpt.hidden},
                 {"ffn", c.gpt.ffn_hidden()},
                 {"heads", c.gpt.heads},
                 {"layers", c.gpt.layers},
                 {"vocab", c.gpt.vocab},
                 {"seq", c.gpt.seq},
                 {"batch", c.batch},
                 {"dtype", dtype_name(c.dtype)},
                 {"tp", c.tp},
                 {"sequence_parallel", c.sequence_parallel},
                 {"tied", c.gpt.tied}};
  j["link"] = {
      {"name", q.link.name}, {"bandwidth_Bps", q.link.bandwidth_Bps}, {"latency_s", q.link.latency_s}};
  j["sbh_bytes"] = model::sbh_bytes(c);
  j["sbh_bytes_per_rank"] = model::sbh_bytes_per_rank(c);
  j["parameters"] = {
      {"per_layer", p.per_layer}, {"embedding", p.embedding}, {"output", p.output}, {"total", p.total}};
  j["activations_per_layer"] = {{"without_sp", activations_json(with_sp(c, false))},
                                {"with_sp", activations_json(with_sp(c, true))},
                                {"selected", activations_json(c)}};
  j["layer_calls"] = calls_json(layer);
  j["layer_collectives"] = totals_json(layer);
  j["layer_wire_bytes"] = sums(layer).first;
  j["layer_seconds"] = sums(layer).second;
  j["step_collectives"] = totals_json(step);
  j["step_wire_bytes"] = sums(step).first;
  j["step_seconds"] = sums(step).second;
  return j;
}

std::string report_table(const Question& q) {
  const model::CapacityConfig& c = q.config;
  c.validate();
  std::string out = fmt::format("tpsp-capacity: {}\n", q.model);
  if (!q.about.empty()) out += fmt::format("  {}\n", q.about);
  out += fmt::format(
      "  {} block: h={} ffn={} heads={}{} layers={} vocab={} s={} b={} {}{}, tp={}, SP {}, link {}\n\n",
      c.gpt.llama() ? "Llama" : "GPT-2", c.gpt.hidden, c.gpt.ffn_hidden(), c.gpt.heads,
      c.gpt.llama() ? fmt::format(" groups={}", c.gpt.query_groups()) : "", c.gpt.layers, c.gpt.vocab,
      c.gpt.seq, c.batch, dtype_name(c.dtype), c.gpt.tied ? ", tied" : ", untied", c.tp,
      c.sequence_parallel ? "on" : "off", link_str(q.link));
  out += fmt::format("One [s, b, h] activation: {}; one rank holds {} of it ({}).\n\n",
                     human_bytes(model::sbh_bytes(c)), human_bytes(model::sbh_bytes_per_rank(c)),
                     c.sequence_parallel ? "[s/tp, b, h] under SP" : "the whole: no SP");

  const model::ParameterBytes p = model::parameter_bytes(c);
  out += fmt::format("Parameters per rank ({})\n", dtype_name(c.dtype));
  out += fmt::format("  {:<52}{:>14}\n", "one layer", human_bytes(p.per_layer));
  out += fmt::format("  {:<52}{:>14}\n",
                     c.gpt.llama() ? "word embeddings [V/tp, h] (RoPE: no position table)"
                                   : "word embeddings [V/tp, h] + position table [s, h]",
                     human_bytes(p.embedding));
  out += fmt::format("  {:<52}{:>14}\n",
                     c.gpt.tied ? "final norm (output layer tied)" : "final norm + output layer [V/tp, h]",
                     human_bytes(p.output));
  out += fmt::format("  {:<52}{:>14}\n", fmt::format("whole model ({} layers)", c.gpt.layers),
                     human_bytes(p.total));
  if (c.tp == 1)
    out += fmt::format("  {:<52}{:>14}\n", "parameters (count)",
                       fmt::format("{}", p.total / static_cast<uint64_t>(dtype_size(c.dtype))));
  out += "\n";

  const auto off = with_sp(c, false), on = with_sp(c, true);
  const model::ActivationBytes a_off = model::activation_bytes_per_layer(*off);
  const std::optional<model::ActivationBytes> a_on =
      on ? std::optional(model::activation_bytes_per_layer(*on)) : std::nullopt;
  out += fmt::format(
      "Activations one layer keeps for backward, per rank ({} unless marked f32; rows = s, or s/tp under "
      "SP)\n",
      dtype_name(c.dtype));
  out += fmt::format("  {:<26}{:<26}{:>14}{:>14}\n", "tensor", "shape", "without SP", "with SP");
  auto row = [&](const std::string& name, const std::string& shape, uint64_t a, std::optional<uint64_t> b) {
    out +=
        fmt::format("  {:<26}{:<26}{:>14}{:>14}\n", name, shape, human_bytes(a), b ? human_bytes(*b) : "n/a");
  };
  for (const ActivationRow& r : kActivationRows) {
    const char* shape = c.gpt.llama() ? r.llama_shape : r.shape;
    if (shape != nullptr)
      row(r.name, shape, a_off.*r.bytes, a_on ? std::optional(a_on.value().*r.bytes) : std::nullopt);
  }
  row("total per layer", "", a_off.total(), a_on ? std::optional(a_on->total()) : std::nullopt);
  const auto L = static_cast<uint64_t>(c.gpt.layers);
  row(fmt::format("all {} layers", L), "", a_off.total() * L,
      a_on ? std::optional(a_on->total() * L) : std::nullopt);
  if (!on) out += fmt::format("  (with SP: n/a, s={} is not divisible by tp={})\n", c.gpt.seq, c.tp);
  if (!c.gpt.llama()) {
    row("Korthikanti et al. 2022", "16-bit, §4.2", model::korthikanti_bytes_per_layer(*off),
        on ? std::optional(model::korthikanti_bytes_per_layer(*on)) : std::nullopt);
    out +=
        "  (the paper's sbh(10 + 24/t + 5as/(ht)) and sbh/t(34 + 5as/h) count the dropout masks, 1 byte\n"
        "   each: 2sbh of the hidden dropouts (/t under SP) and as^2b/t of the attention dropout, which "
        "this\n"
        "   engine regenerates from their key instead of storing; both keep 4as^2b/t bytes of probabilities\n"
        "   (the paper: the softmax output and the dropout output in 16 bits; the engine: once in f32), and\n"
        "   the engine also keeps the norm statistics the paper leaves out)\n";
  } else {
    out +=
        "  (Korthikanti et al. 2022's formula counts the GPT-2 block; SwiGLU keeps [gate | up] and its\n"
        "   output, grouped-query attention narrows k and v to the rank's groups)\n";
  }
  out += "\n";

  out += fmt::format("Communication of one layer per rank, one forward and backward (SP {}; ring model)\n",
                     c.sequence_parallel ? "on" : "off");
  communication_table(out, model::layer_collectives(c, q.link));
  out +=
      "  (S: the tensor a call moves, all_gather's output; sent: ring bytes, 2(n-1)/n S for all_reduce,\n"
      "   (n-1)/n S for all_gather and reduce_scatter; time: steps x latency + sent / bandwidth, calls in\n"
      "   sequence, no overlap)\n";
  out += fmt::format(
      "\nCommunication of one training step per rank ({} layers, embedding, output layer, cross entropy{})\n",
      c.gpt.layers, c.sequence_parallel ? ", the sequence-parallel gradient sum" : "");
  communication_table(out, model::step_collectives(c, q.link));
  return out;
}

}  // namespace tpsp::capacity
