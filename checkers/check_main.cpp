// tpsp-check (run as ./check): runs each scenario of a lab at several TP sizes, SP off and on, as
// processes through the launcher, and grades the ranks' dumps against the single-process answer in
// this process, which links no learner code. The last line is "N passed, N failed"; the exit status
// is non-zero on any failure.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "checkers/grade.h"
#include "checkers/scenario.h"
#include "engine/io/npy.h"

namespace fs = std::filesystem;
using namespace tpsp::checkers;
using nlohmann::json;

namespace {

struct Style {
  bool color = false;
  std::string green(const std::string& s) const { return color ? "\033[32m" + s + "\033[0m" : s; }
  std::string red(const std::string& s) const { return color ? "\033[31m" + s + "\033[0m" : s; }
  std::string yellow(const std::string& s) const { return color ? "\033[33m" + s + "\033[0m" : s; }
  std::string bold(const std::string& s) const { return color ? "\033[1m" + s + "\033[0m" : s; }
};

/// Runs `cmd` with output to `log_path`; returns its exit status (128+signal for a signal).
int run_logged(const std::string& cmd, const std::string& log_path) {
  const int st = std::system((cmd + " >'" + log_path + "' 2>&1").c_str());
  if (st == -1) return 127;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Writes the expected whole tensors of a run as .npy beside the ranks' dumps (--verbose).
void write_expected(const Scenario& sc, int tp, bool sp, uint64_t seed, const std::string& dir) {
  try {
    fs::create_directories(dir);
    const Outputs want = sc.expected ? sc.expected(seed, tp, sp) : run_single_process(sc, seed, sp);
    for (const auto& [name, o] : want) tpsp::io::save_npy(dir + "/" + name + ".npy", o.local);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "could not write the expected tensors to %s: %s\n", dir.c_str(), e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "./check: grade a lab against the single-process reference.\n"
      "  ./check lab01              your code for lab01 (build it first: make lab01)\n"
      "  ./check lab01 --solution   the engine's own solution (self-test)\n"
      "  ./check --all [--solution] every lab"};
  std::vector<std::string> labs;
  bool all = false, solution = false, verbose = false;
  std::string only, json_path, binary, bin_dir = (fs::canonical("/proc/self/exe").parent_path()).string();
  std::vector<int> tps;
  int64_t seed_opt = -1;
  int timeout = 60;
  std::string backend = "gloo";
  app.add_option("labs", labs, "labs to check, e.g. lab01");
  app.add_flag("--all", all, "every lab");
  app.add_flag("--solution", solution, "check the engine's own solution instead of your code");
  app.add_option("--only", only, "run only the scenario with this name (e.g. column_linear)");
  app.add_option("--tp", tps, "TP sizes to run (default: each scenario's own, typically 1,2,3,4)")
      ->delimiter(',');
  app.add_option("--seed", seed_opt, "seed of the inputs (default: drawn now, and printed)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--json", json_path, "also write the results as JSON");
  app.add_flag("--verbose,-v", verbose, "print every run, passed or not, and where its dumps are");
  app.add_option("--binary", binary,
                 "rank program to check (default: tpsp-lab-ranks-<lab>, or tpsp-lab-ranks)");
  app.add_option("--timeout", timeout, "seconds one run may take before it is killed")
      ->check(CLI::Range(1, 3600));
  app.add_option("--backend", backend, "communication backend (gloo; nccl needs a GPU build)");
  bool list = false;
  app.add_flag("--list", list, "list the labs and their scenarios, then exit");
  CLI11_PARSE(app, argc, argv);
  for (int tp : tps)
    if (tp < 1 || tp > 4) {
      std::fprintf(stderr,
                   "./check: --tp %d is outside 1..4 (the scenarios' sizes are divisible by 1, 2, 3 and 4)\n",
                   tp);
      return 2;
    }
  if (backend != "gloo") {
    std::fprintf(stderr, "./check: backend '%s' is not available in this build (only gloo)\n",
                 backend.c_str());
    return 2;
  }
  std::set<std::string> known;
  for (const Scenario& s : all_scenarios()) known.insert(s.lab);
  if (list) {
    for (const Scenario& s : all_scenarios())
      std::printf("%s %-30s %s%s\n", s.lab.c_str(), s.name.c_str(), s.summary.c_str(),
                  s.sp_only       ? " [SP]"
                  : s.sp_variants ? " [SP off and on]"
                                  : "");
    return 0;
  }
  if (all) labs.assign(known.begin(), known.end());
  if (labs.empty()) {
    std::fprintf(stderr, "%s\n./check: name a lab (e.g. ./check lab01) or --all\n", app.help().c_str());
    return 2;
  }
  for (const std::string& l : labs)
    if (!known.count(l)) {
      std::string k;
      for (const auto& x : known) k += " " + x;
      std::fprintf(stderr, "./check: unknown lab '%s' (known:%s)\n", l.c_str(), k.c_str());
      return 2;
    }
  const uint64_t seed = seed_opt >= 0 ? static_cast<uint64_t>(seed_opt) : std::random_device{}() % 1000000;
  Style st{isatty(1) != 0};
  char tmpl[] = "/tmp/tpsp-check-XXXXXX";
  const std::string work = mkdtemp(tmpl);
  std::printf("%s\n", st.bold(fmt::format("tpsp check — seed {} ({}), backend {}", seed,
                                          solution ? "engine's solution" : "your code", backend))
                          .c_str());

  int passed = 0, failed = 0, todo = 0, runs = 0;
  std::set<std::string> todo_seen;  // each TODO message is printed once
  json report = json::array();
  for (const std::string& lab : labs) {
    const std::string bin = !binary.empty() ? binary
                            : solution      ? bin_dir + "/tpsp-lab-ranks"
                                            : bin_dir + "/tpsp-lab-ranks-" + lab;
    if (!fs::exists(bin)) {
      std::printf("%s %s: %s is not built — run `make %s` first\n", st.red("FAIL").c_str(), lab.c_str(),
                  bin.c_str(), lab.c_str());
      ++failed;
      continue;
    }
    std::printf("\n%s\n", st.bold(lab).c_str());
    for (const Scenario& sc : all_scenarios()) {
      if (sc.lab != lab || (!only.empty() && sc.name != only)) continue;
      for (int tp : sc.tp_sizes) {
        if (!tps.empty() && std::find(tps.begin(), tps.end(), tp) == tps.end()) continue;
        for (int sp = sc.sp_only ? 1 : 0; sp <= (sc.sp_variants || sc.sp_only ? 1 : 0); ++sp) {
          const auto t0 = std::chrono::steady_clock::now();
          const std::string dir = fmt::format("{}/{}-{}-tp{}-sp{}", work, lab, sc.name, tp, sp);
          fs::create_directories(dir);
          const std::string cmd = fmt::format(
              "TPSP_COMM_TIMEOUT=10 '{}/tpsp-run' -n {} --timeout {} --tail 12 -- '{}' --scenario {}/{} --sp "
              "{} "
              "--seed {} --out '{}'",
              bin_dir, tp, timeout, bin, lab, sc.name, sp, seed, dir);
          const int code = run_logged(cmd, dir + "/launcher.log");
          if (code == 128 + SIGINT || code == 128 + SIGTERM) {  // Ctrl-C: stop checking, do not grade
            std::printf("\ninterrupted\n");
            fs::remove_all(work);
            return 130;
          }
          ++runs;
          GradeResult g = grade(sc, tp, sp != 0, seed, dir, code, read_file(dir + "/launcher.log"));
          if (verbose) write_expected(sc, tp, sp != 0, seed, dir + "/expected");
          g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          const std::string tag = fmt::format("{:<28} tp={} sp={}", sc.name, tp, sp ? "on " : "off");
          if (g.passed) {
            ++passed;
            if (verbose)
              std::printf("  %s %s  (%.2f s, %s)\n", st.green("PASS").c_str(), tag.c_str(), g.seconds,
                          dir.c_str());
          } else {
            ++failed;
            todo += g.todo ? 1 : 0;
            std::printf("  %s %s\n", (g.todo ? st.yellow("TODO") : st.red("FAIL")).c_str(), tag.c_str());
            for (const std::string& p : g.problems) {
              if (g.todo && !todo_seen.insert(p).second) continue;  // shown above already
              std::printf("    %s\n", p.c_str());
            }
            if (verbose) std::printf("    dumps and launcher log: %s\n", dir.c_str());
          }
          report.push_back({{"scenario", g.id},
                            {"tp", tp},
                            {"sp", sp != 0},
                            {"passed", g.passed},
                            {"todo", g.todo},
                            {"problems", g.problems},
                            {"seconds", g.seconds},
                            {"seed", seed}});
        }
      }
      if (!verbose) std::fflush(stdout);
    }
  }
  if (runs == 0 && failed == 0) {
    std::fprintf(stderr, "./check: no scenario matches%s%s (see ./check --list)\n",
                 only.empty() ? "" : (" --only " + only).c_str(), tps.empty() ? "" : " at the --tp sizes");
    fs::remove_all(work);
    return 2;
  }
  if (!json_path.empty()) {
    const json doc = {{"seed", seed},
                      {"source", solution         ? "solution"
                                 : binary.empty() ? "learner"
                                                  : binary},
                      {"backend", backend},
                      {"labs", labs},
                      {"passed", passed},
                      {"failed", failed},
                      {"not_implemented", todo},
                      {"results", report}};
    std::ofstream out(json_path);
    out << doc.dump(1) << "\n";
    if (!out) {
      std::fprintf(stderr, "./check: cannot write %s\n", json_path.c_str());
      return 2;
    }
  }
  if (failed && !verbose)
    std::printf(
        "\n(rerun a failing scenario with --seed %llu --only NAME --tp N --verbose to keep the ranks' dumps "
        "and the expected tensors as .npy)\n",
        static_cast<unsigned long long>(seed));
  if (!verbose) fs::remove_all(work);
  const std::string summary = fmt::format("{} passed, {} failed", passed, failed);
  std::printf("\n%s\n", (failed ? st.red(summary) : st.green(summary)).c_str());
  return failed ? 1 : 0;
}
