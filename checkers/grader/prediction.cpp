#include "checkers/grader/prediction.h"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "checkers/predict/predict.h"

namespace tpsp::checkers {

namespace fs = std::filesystem;

namespace {

/// A prediction is a dozen lines: anything longer is not one.
constexpr std::uintmax_t kMaxPredictionBytes = 64 * 1024;

/// The whole file (a leading UTF-8 byte-order mark dropped) when it is a regular file of at most
/// kMaxPredictionBytes; else false with the reason in `why` (a FIFO would block the check forever,
/// /dev/zero would never end, a directory has no text).
bool read_text(const std::string& path, std::string& out, std::string& why) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    why = fs::exists(path, ec) ? "not a regular file" : "no such file";
    return false;
  }
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMaxPredictionBytes) {
    why = ec ? ec.message() : fmt::format("{} bytes, more than a prediction's {}", size, kMaxPredictionBytes);
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "cannot be opened";
    return false;
  }
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  if (out.rfind("\xEF\xBB\xBF", 0) == 0) out.erase(0, 3);
  return true;
}

/// `path` relative to the source dir when it is inside it ("labs/lab01_tp_layers/prediction.txt").
std::string shown(const std::string& source_dir, const std::string& path) {
  const std::string prefix = source_dir + "/";
  return path.rfind(prefix, 0) == 0 ? path.substr(prefix.size()) : path;
}

bool has_step(const std::string& lab) {
  for (const std::string& l : predict::step_labs())
    if (l == lab) return true;
  return false;
}

}  // namespace

std::string prediction_path(const std::string& source_dir, const std::string& lab) {
  std::ifstream in(source_dir + "/labs/labs.json");
  const nlohmann::json reg = nlohmann::json::parse(in, nullptr, false);
  if (!reg.is_object() || !reg.contains("labs") || !reg["labs"].is_array()) return "";
  for (const nlohmann::json& l : reg["labs"])
    if (l.is_object() && l.value("id", "") == lab)
      return source_dir + "/" + l.value("dir", "") + "/prediction.txt";
  return "";
}

int check_predictions(const std::vector<std::string>& labs, const std::string& source_dir,
                      const std::string& file) {
  int status = 0;
  for (const std::string& lab : labs) {
    if (!has_step(lab)) {
      std::printf("\n%s: no prediction step\n", lab.c_str());
      status = std::max(status, 1);
      continue;
    }
    const predict::Step& step = predict::step_of(lab);
    const std::string path = file.empty() ? prediction_path(source_dir, lab) : file;
    std::string text, why = "labs/labs.json does not name its folder";
    if (path.empty() || !read_text(path, text, why)) {
      std::fprintf(stderr, "./check: cannot read the prediction of %s (%s: %s)\n", lab.c_str(), path.c_str(),
                   why.c_str());
      status = 2;
      continue;
    }
    std::printf("\n%s — prediction (%s)\nthe step: %s\n", lab.c_str(), shown(source_dir, path).c_str(),
                step.title.c_str());
    const predict::Outcome o = predict::check_prediction(text, step);
    for (const std::string& line : o.report) std::printf("  %s\n", line.c_str());
    std::printf("prediction %s: %s\n", lab.c_str(), o.summary().c_str());
    if (o.status != predict::Outcome::Status::right) status = std::max(status, 1);
  }
  return status;
}

std::string prediction_summary(const std::string& source_dir, const std::string& lab) {
  if (!has_step(lab)) return "";
  const std::string path = prediction_path(source_dir, lab);
  std::string text, why;
  if (path.empty()) return "";
  if (!read_text(path, text, why))
    return why == "no such file"
               ? ""
               : fmt::format("prediction {}: not read ({}: {}; not counted in the runs above)", lab,
                             shown(source_dir, path), why);
  const predict::Outcome o = predict::check_prediction(text, predict::step_of(lab));
  const std::string where = shown(source_dir, path);
  if (o.status == predict::Outcome::Status::right)
    return fmt::format("prediction {}: {} ({})", lab, o.summary(), where);
  if (o.status == predict::Outcome::Status::unfilled)
    return fmt::format(
        "prediction {}: {} ({}: write the step's calls there, then ./check {} --predict; not counted in the "
        "runs above)",
        lab, o.summary(), where, lab);
  return fmt::format("prediction {}: {} ({}; ./check {} --predict explains; not counted in the runs above)",
                     lab, o.summary(), where, lab);
}

}  // namespace tpsp::checkers
