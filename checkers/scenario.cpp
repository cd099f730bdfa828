#include "checkers/scenario.h"

#include <stdexcept>

namespace tpsp::checkers {

const std::vector<Scenario>& all_scenarios() {
  static const std::vector<Scenario> all = [] {
    std::vector<Scenario> v;
    register_lab00(v);
    register_lab01(v);
    register_lab02(v);
    register_lab03(v);
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
