// The steps of the labs' predictions: each lab's step, its calls on rank 0 in issue order as closed forms
// of the step's sizes, lives beside its scenarios (checkers/labNN/predict.cpp: the same calls that lab's
// patterns require, at sizes of a realistic scale); here the list, the lookup and the shared builders.
#include <fmt/format.h>

#include <stdexcept>

#include "checkers/predict/step_helpers.h"

namespace tpsp::checkers::predict {

namespace {

const std::vector<Step>& steps() {
  static const std::vector<Step> all{lab00_step(), lab01_step(), lab02_step(),
                                     lab03_step(), lab04_step(), lab05_step(), lab06_step()};
  return all;
}

}  // namespace

const std::map<std::string, int64_t>& mlp_sizes() {
  static const std::map<std::string, int64_t> sizes{{"s", S}, {"b", B}, {"h", H}, {"ffn", FFN}, {"tp", TP}};
  return sizes;
}

std::string tensor(const std::vector<int64_t>& shape, uint64_t bytes) {
  std::string dims;
  for (int64_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  return fmt::format("[{}] f32 ({})", dims, human_bytes(bytes));
}

Call call(const char* phase, comm::OpKind op, const char* group, uint64_t bytes, int64_t dim, int peer,
          comm::ReduceOp reduce) {
  Call c;
  c.phase = phase;
  c.op = op;
  c.group = group;
  c.bytes = bytes;
  c.dim = dim;
  c.peer = peer;
  c.reduce = reduce;
  return c;
}

const Step& step_of(const std::string& lab) {
  for (const Step& s : steps())
    if (s.lab == lab) return s;
  throw std::invalid_argument(fmt::format("no prediction step for '{}' (labs with one: lab00 … lab06)", lab));
}

std::vector<std::string> step_labs() {
  std::vector<std::string> out;
  for (const Step& s : steps()) out.push_back(s.lab);
  return out;
}

std::string human_bytes(uint64_t bytes) {
  if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0) return fmt::format("{} GiB", bytes >> 30);
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1ull << 10) && bytes % (1ull << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

}  // namespace tpsp::checkers::predict
