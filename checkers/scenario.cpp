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

void expect_refusal(ExpectedOutputs& out, const std::string& what, const std::string& refusal,
                    const std::string& accepted, const std::string& who) {
  out["refuses_" + what] = {.whole = Tensor::from({1}, {1.f}),
                            .meaning = "1 = " + refusal + "; 0 = " + accepted};
  out["no_call_before_refusing_" + what] = {
      .whole = Tensor::from({1}, {1.f}),
      .meaning = "1 = nothing was sent, received or issued before the refusal; 0 = " + who +
                 " communicated first (check the arguments before any communication)"};
}

void expect_refusal_naming(ExpectedOutputs& out, const std::string& what, const std::string& refusal,
                           const std::string& accepted, const std::string& who, const std::string& values) {
  expect_refusal(out, what, refusal, accepted, who);
  out["names_values_" + what] = {.whole = Tensor::from({1}, {1.f}),
                                 .meaning = "1 = the ShapeError's message names " + values +
                                            "; 0 = it did not (or nothing was refused)"};
}

void expect_accepted(ExpectedOutputs& out, const std::string& what, const std::string& call) {
  out["accepts_" + what] = {.whole = Tensor::from({1}, {1.f}),
                            .meaning = "1 = " + call +
                                       " ran; 0 = it raised ShapeError on a shape the contract "
                                       "accepts (a refusal must depend on the shape)"};
}

}  // namespace tpsp::checkers
