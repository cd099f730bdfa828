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
  const char* shape;
  uint64_t model::ActivationBytes::*bytes;
};

const ActivationRow kActivationRows[] = {
    {"residual", "x_in, x_mid", "2 x [rows, b, h]", &model::ActivationBytes::residual},
    {"layernorm", "ln1.y, ln2.y", "2 x [rows, b, h]", &model::ActivationBytes::layernorm},
    {"layernorm_stats", "LayerNorm mean, rstd", "4 x [rows, b] f32",
     &model::ActivationBytes::layernorm_stats},
    {"qkv", "qkv", "[s, b, 3h/tp]", &model::ActivationBytes::qkv},
    {"attention_out", "attention output", "[s, b, h/tp]", &model::ActivationBytes::attention_out},
    {"probs", "attention probabilities", "[b, heads/tp, s, s] f32", &model::ActivationBytes::probs},
    {"fc1", "fc1 pre-activation", "[s, b, ffn/tp]", &model::ActivationBytes::fc1},
    {"gelu", "GELU output", "[s, b, ffn/tp]", &model::ActivationBytes::gelu},
};

json activations_json(const std::optional<model::CapacityConfig>& c) {
  if (!c) return nullptr;
  const model::ActivationBytes a = model::activation_bytes_per_layer(*c);
  json j;
  for (const ActivationRow& r : kActivationRows) j[r.key] = a.*r.bytes;
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
  out += fmt::format("  h={} ffn={} heads={} layers={} vocab={} s={} b={} {}{}, tp={}, SP {}, link {}\n\n",
                     c.gpt.hidden, c.gpt.ffn_hidden(), c.gpt.heads, c.gpt.layers, c.gpt.vocab, c.gpt.seq,
                     c.batch, dtype_name(c.dtype), c.gpt.tied ? ", tied" : ", untied", c.tp,
                     c.sequence_parallel ? "on" : "off", link_str(q.link));
  out += fmt::format("One [s, b, h] activation: {}; one rank holds {} of it ({}).\n\n",
                     human_bytes(model::sbh_bytes(c)), human_bytes(model::sbh_bytes_per_rank(c)),
                     c.sequence_parallel ? "[s/tp, b, h] under SP" : "the whole: no SP");

  const model::ParameterBytes p = model::parameter_bytes(c);
  out += fmt::format("Parameters per rank ({})\n", dtype_name(c.dtype));
  out += fmt::format("  {:<52}{:>14}\n", "one layer", human_bytes(p.per_layer));
  out += fmt::format("  {:<52}{:>14}\n", "word embeddings [V/tp, h] + position table [s, h]",
                     human_bytes(p.embedding));
  out += fmt::format(
      "  {:<52}{:>14}\n",
      c.gpt.tied ? "final LayerNorm (output layer tied)" : "final LayerNorm + output layer [V/tp, h]",
      human_bytes(p.output));
  out += fmt::format("  {:<52}{:>14}\n\n", fmt::format("whole model ({} layers)", c.gpt.layers),
                     human_bytes(p.total));

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
  for (const ActivationRow& r : kActivationRows)
    row(r.name, r.shape, a_off.*r.bytes, a_on ? std::optional(a_on.value().*r.bytes) : std::nullopt);
  row("total per layer", "", a_off.total(), a_on ? std::optional(a_on->total()) : std::nullopt);
  const auto L = static_cast<uint64_t>(c.gpt.layers);
  row(fmt::format("all {} layers", L), "", a_off.total() * L,
      a_on ? std::optional(a_on->total() * L) : std::nullopt);
  if (!on) out += fmt::format("  (with SP: n/a, s={} is not divisible by tp={})\n", c.gpt.seq, c.tp);
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
