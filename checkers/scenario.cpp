#include "checkers/scenario.h"

#include <map>
#include <stdexcept>

namespace tpsp::checkers {

namespace {
/// The registered labs, by id (construct on first use: registration runs from static initialisers).
std::map<std::string, void (*)(std::vector<Scenario>&)>& registry() {
  static std::map<std::string, void (*)(std::vector<Scenario>&)> labs;
  return labs;
}
}  // namespace

LabScenarios::LabScenarios(const char* lab, void (*add)(std::vector<Scenario>&)) {
  registry()[lab] = add;
}

const std::vector<Scenario>& all_scenarios() {
  static const std::vector<Scenario> all = [] {
    std::vector<Scenario> v;
    for (const auto& [lab, add] : registry()) add(v);
    return v;
  }();
  return all;
}

const Scenario& find_scenario(const std::string& id) {
  std::string known;
  for (const Scenario& s : all_scenarios()) {
    if (s.id() == id) return s;
    known += " " + s.id();
  }
  throw std::invalid_argument("unknown scenario '" + id + "'; known:" + known);
}

}  // namespace tpsp::checkers
