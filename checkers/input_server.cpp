#include "checkers/input_server.h"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "checkers/inputs.h"

namespace tpsp::checkers {

namespace {

using nlohmann::json;

/// The largest input served, elements (16 MiB of float32; the checkers' largest is 2^20): each is drawn
/// in the relay's loop, and a rank's unread replies count toward what it may make the relay hold.
constexpr int64_t kMaxElements = int64_t{1} << 22;
/// The most elements a rank may have drawn for it in one launch (every world it joins, every scenario of a
/// batch): every draw runs in the relay's loop, in root's process, outside the rank's limits (an attack
/// drew 4 GiB so). The largest launch asks for 2,237,720 per rank (lab04's batch at tp 2, measured with
/// ./check --all --solution --verbose's relay logs), about 2^21.
constexpr int64_t kMaxElementsPerLaunch = int64_t{1} << 26;

/// The request as an InputSpec and how it is shared; a non-empty return is the violation.
std::string parse_ask(const std::string& text, InputSpec& spec, Share& share, int& dim) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string() || !j.contains("shape") ||
      !j["shape"].is_array() || !j.contains("share") || !j["share"].is_string())
    return "an input request that is not {\"name\", \"shape\", \"share\", ...}";
  spec.name = j["name"].get<std::string>();
  if (const std::string why = input_name_problem(spec.name); !why.empty())
    return "input '" + spec.name + "': " + why;
  if (j["shape"].empty() || j["shape"].size() > 4) return "input '" + spec.name + "': a shape of 1 to 4 dims";
  int64_t numel = 1;
  for (const json& d : j["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > kMaxElements)
      return "input '" + spec.name + "': each size of its shape is an integer in 1 .. 2^22";
    spec.shape.push_back(d.get<int64_t>());
    numel *= d.get<int64_t>();
    if (numel > kMaxElements) return "input '" + spec.name + "': over 2^22 elements";
  }
  if ((j.contains("scale") && !j["scale"].is_number()) || (j.contains("exact") && !j["exact"].is_boolean()) ||
      (j.contains("dim") &&
       (!j["dim"].is_number_integer() || j["dim"].get<int64_t>() < 0 || j["dim"].get<int64_t>() > 3)))
    return "input '" + spec.name + "': scale a number, exact a boolean, dim an integer in 0 .. 3";
  spec.scale = j.value("scale", 1.f);
  spec.exact = j.value("exact", false);
  const std::string how = j["share"].get<std::string>();
  share = how == "split" ? Share::split : how == "of_rank" ? Share::of_rank : Share::whole;
  if (how != "whole" && how != "split" && how != "of_rank")
    return "input '" + spec.name + "': share '" + how + "' is none of whole, split, of_rank";
  dim = j.value("dim", 0);
  if (share == Share::split && (dim < 0 || dim >= static_cast<int>(spec.shape.size())))
    return "input '" + spec.name + "': split dim " + std::to_string(dim) + " is not a dim of its shape";
  return "";
}

}  // namespace

run::InputServer input_server(uint64_t seed, int tp) {
  auto drawn = std::make_shared<std::map<int, int64_t>>();  // world rank → elements drawn this launch
  return [seed, tp, drawn](const run::InputAsk& ask) {
    run::InputAnswer a;
    InputSpec spec;
    Share share = Share::whole;
    int dim = 0;
    try {
      a.violation = parse_ask(ask.spec, spec, share, dim);
    } catch (const std::exception& e) {  // a number out of its type's range
      a.violation = std::string("a malformed input request: ") + e.what();
    }
    if (!a.violation.empty()) return a;
    int64_t numel = 1;
    for (const int64_t d : spec.shape) numel *= d;
    if ((*drawn)[ask.rank] += numel; (*drawn)[ask.rank] > kMaxElementsPerLaunch) {
      a.violation = "asked for over 2^26 input elements in one launch: a flood";
      return a;
    }
    const int coord = ask.rank % tp;  // the asking rank's TP rank: the relay's knowledge, not the request's
    const int64_t size = share == Share::split ? spec.shape[static_cast<std::size_t>(dim)] : 0;
    if (share == Share::split && size % tp != 0) {
      a.error =
          fmt::format("input '{}': dim {} of size {} is not divisible by tp={}", spec.name, dim, size, tp);
      return a;
    }
    Tensor t = draw_input(spec, share, dim, coord, seed);
    if (share == Share::split) t = chunk(t, dim, coord, tp);
    a.bytes.assign(reinterpret_cast<const char*>(t.data()),
                   static_cast<std::size_t>(t.numel()) * sizeof(float));
    return a;
  };
}

}  // namespace tpsp::checkers
