#include <cstring>
#include <vector>

#include "checkers/run_context.h"
#include "engine/error.h"

namespace tpsp::checkers {

namespace {
/// The registered labs' functions (construct on first use: registration runs from static initialisers).
std::vector<void (*)(std::map<std::string, RunFn>&)>& registry() {
  static std::vector<void (*)(std::map<std::string, RunFn>&)> labs;
  return labs;
}
}  // namespace

LabRuns::LabRuns(void (*add)(std::map<std::string, RunFn>&)) {
  registry().push_back(add);
}

const std::map<std::string, RunFn>& all_runs() {
  static const std::map<std::string, RunFn> all = [] {
    std::map<std::string, RunFn> m;
    for (auto add : registry()) add(m);
    return m;
  }();
  return all;
}

namespace {
/// FNV-1a of the tensor's bytes (a device tensor's through a host copy; undefined: the empty hash).
uint64_t fnv1a(const Tensor& t) {
  uint64_t h = 14695981039346656037ull;
  if (!t.defined()) return h;
  const Tensor host = t.to(Device::cpu);
  const auto* p = static_cast<const unsigned char*>(host.raw_data());
  for (std::size_t i = 0; i < host.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
}  // namespace

InputGuard::InputGuard(std::string call, std::initializer_list<std::pair<const char*, const Tensor*>> inputs)
    : call_(std::move(call)) {
  for (const auto& [name, t] : inputs) {
    inputs_.emplace_back(name, t);
    hashes_.push_back(fnv1a(*t));
  }
}

void InputGuard::check() const {
  for (std::size_t i = 0; i < inputs_.size(); ++i)
    if (fnv1a(*inputs_[i].second) != hashes_[i])
      throw ShapeError(call_ + " wrote into its input '" + inputs_[i].first +
                       "', which it receives as const: a Tensor copy shares storage (Tensor y = x; then "
                       "writing y writes x) — clone() before modifying, or write into a new tensor");
}

}  // namespace tpsp::checkers
