#include "checkers/grader/report.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "checkers/scenario.h"

namespace tpsp::checkers {

namespace fs = std::filesystem;
using nlohmann::json;

Report::Report(uint64_t seed, bool solution, std::string binary, std::string backend,
               std::vector<std::string> labs, bool verbose)
    : seed_(seed),
      solution_(solution),
      binary_(std::move(binary)),
      backend_(std::move(backend)),
      labs_(std::move(labs)),
      verbose_(verbose),
      tty_(isatty(1) != 0) {
  std::printf("%s\n", color("1", fmt::format("tpsp check — seed {} ({}), backend {}", seed_,
                                             solution_ ? "engine's solution" : "your code", backend_))
                          .c_str());
}

std::string Report::color(const char* code, const std::string& s) const {
  return tty_ ? fmt::format("\033[{}m{}\033[0m", code, s) : s;
}

bool Report::begin_lab(const std::string& lab, const std::string& bin) {
  if (!fs::exists(bin)) {
    std::printf("%s %s: %s is not built — run `make %s` first\n", color("31", "FAIL").c_str(), lab.c_str(),
                bin.c_str(), lab.c_str());
    ++failed_;
    return false;
  }
  std::printf("\n%s\n", color("1", lab).c_str());
  return true;
}

void Report::lab_note(const std::string& line) {
  std::printf("  %s\n", color("2", line).c_str());
}

void Report::add(const GradeResult& g, const std::string& dir) {
  ++runs_;
  const std::string tag = fmt::format("{:<30} {:<10} sp={}", g.id.substr(g.id.find('/') + 1), g.layout.str(),
                                      g.sp ? "on " : "off");
  switch (g.verdict) {
    case Verdict::passed:
      ++passed_;
      if (verbose_)
        std::printf("  %s %s  (%.2f s, %s)\n", color("32", "PASS").c_str(), tag.c_str(), g.seconds,
                    dir.c_str());
      break;
    case Verdict::needs_other:
      ++needs_;
      std::printf("  %s %s\n", color("33", "NEEDS").c_str(), tag.c_str());
      break;
    case Verdict::todo:
      ++todo_;
      std::printf("  %s %s\n", color("33", "TODO").c_str(), tag.c_str());
      break;
    case Verdict::failed:
      ++failed_;
      std::printf("  %s %s\n", color("31", "FAIL").c_str(), tag.c_str());
      break;
  }
  if (g.verdict != Verdict::passed) {
    for (const std::string& p : g.problems) {
      const bool once = g.verdict == Verdict::todo || g.verdict == Verdict::needs_other;
      if (once && !shown_.insert(p).second) continue;  // shown above already
      std::printf("    %s\n", p.c_str());
    }
    if (verbose_) std::printf("    dumps and launcher log: %s\n", dir.c_str());
  }
  std::fflush(stdout);
  results_.push_back({{"scenario", g.id},
                      {"tp", g.layout.tp},
                      {"dp", g.layout.dp},
                      {"sp", g.sp},
                      {"passed", g.verdict == Verdict::passed},
                      {"todo", g.verdict == Verdict::todo},
                      {"needs_other_lab", g.verdict == Verdict::needs_other},
                      {"problems", g.problems},
                      {"seconds", g.seconds},
                      {"host_code", g.host_code},
                      {"seed", seed_}});
}

bool Report::write_json(const std::string& path) const {
  const json doc = {{"seed", seed_},
                    {"source", solution_         ? "solution"
                               : binary_.empty() ? "learner"
                                                 : binary_},
                    {"backend", backend_},
                    {"labs", labs_},
                    {"passed", passed_},
                    {"failed", failed_},
                    {"not_implemented", todo_},
                    {"needs_other_lab", needs_},
                    {"results", results_},
                    {"notes", notes_}};
  std::ofstream out(path);
  out << doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace)
      << "\n";  // rank messages: any bytes
  return static_cast<bool>(out);
}

int Report::finish() const {
  if (failed_ && !verbose_)
    std::printf(
        "\n(rerun a failing scenario with --seed %llu --only NAME --tp N --verbose to keep the ranks' dumps "
        "and the "
        "expected tensors as .npy)\n",
        static_cast<unsigned long long>(seed_));
  if (needs_)
    std::printf(
        "\n%d run(s) need another lab's code that your copy does not implement yet: in a learner copy every "
        "lab's code is yours (labs/README.md says which scenario needs which lab), unless your instructor "
        "ships "
        "prebuilt solutions (solutions/)\n",
        needs_);
  std::string summary = fmt::format("{} passed, {} failed", passed_, failed_);
  if (todo_) summary += fmt::format(", {} not implemented yet", todo_);
  if (needs_) summary += fmt::format(", {} need another lab's code", needs_);
  const bool all_passed = failed_ == 0 && todo_ == 0 && needs_ == 0;
  if (!notes_.empty()) std::printf("\n");
  for (const std::string& n : notes_) std::printf("%s\n", n.c_str());
  std::printf("\n%s\n", color(all_passed ? "32" : "31", summary).c_str());
  return all_passed ? 0 : 1;
}

void print_scenario_list() {
  for (const Scenario& s : all_scenarios())
    std::printf("%s %-32s %s%s\n", s.lab.c_str(), s.name.c_str(), s.summary.c_str(),
                s.sp_only       ? " [SP]"
                : s.sp_variants ? " [SP off and on]"
                                : "");
}

std::string stale_sources(const std::vector<std::string>& labs, const std::string& bin_dir) {
  const fs::path manifest = fs::path(bin_dir).parent_path() / "lab_sources.json";
  if (!fs::exists(manifest)) return "";
  const json m = json::parse(std::ifstream(manifest), nullptr, false);
  if (!m.is_object()) return "";
  std::string out;
  for (const std::string& lab : labs) {
    if (!m.contains(lab)) continue;
    const fs::path bin = fs::path(bin_dir) / m[lab].value("binary", "");
    if (!fs::exists(bin)) continue;
    const auto built = fs::last_write_time(bin);
    std::string newer;
    for (const json& src : m[lab]["sources"]) {
      const fs::path p = src.get<std::string>();
      if (fs::exists(p) && fs::last_write_time(p) > built) newer += "  " + p.string() + "\n";
    }
    if (!newer.empty())
      out += fmt::format(
          "./check: these files changed after {} was built, so its verdict would be stale:\n{}"
          "run `make {}` first (./check rebuilds by itself unless it is given --no-build or run as "
          "build/bin/tpsp-check)\n",
          bin.filename().string(), newer, lab);
  }
  return out;
}

}  // namespace tpsp::checkers
