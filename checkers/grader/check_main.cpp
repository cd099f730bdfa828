// tpsp-check (run as ./check): runs each scenario of a lab at several TP sizes, SP off and on, and in
// a dp=2 × tp=2 world, as processes through the launcher, and grades the ranks' dumps against the
// single-process answer from reference/ in this process, which links no learner code and no
// lab-owned engine code. The last line is "N passed, N failed"; the exit status is 0 when every run
// passed, 1 otherwise, 2 for a usage error.
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string_view>
#include <tuple>

#include "checkers/grader/grade.h"
#include "checkers/grader/hints.h"
#include "checkers/grader/launch.h"
#include "checkers/grader/prediction.h"
#include "checkers/grader/report.h"
#include "checkers/grader/runner.h"
#include "checkers/scenario.h"

namespace fs = std::filesystem;
using namespace tpsp::checkers;
using nlohmann::json;

namespace {

struct Options {
  std::vector<std::string> labs;
  bool all = false, solution = false, verbose = false, list = false, no_dp = false, predict = false;
  std::string only, json_path, binary, seed_text, backend = "relay", device = "cpu", prediction_file;
  std::vector<int> tps;
  bool hint = false;                        // --hint: print a task's hint instead of checking
  std::vector<std::string> hint_words;      // its NAME (may be several words: --hint f forward)
  double timeout = 0;                       // 0: each scenario's own budget
  long confine_uid = -1;                    // ./grade: confined ranks (launch.h LaunchSettings::confine)
  bool confine_without_namespaces = false;  // a container that forbids namespaces (the Gradescope autograder)
  double rank_memory_mib = 4096, rank_cpu_s = 120, rank_file_mib = 64, rank_procs = 256;
  uint64_t seed = 0;
};

constexpr int kUsage = 2;

/// Asks rank program `bin` to make `device` usable (--probe-device): "" when it can, else its reason.
std::string probe_device(const std::string& bin, const std::string& device) {
  std::string quoted = "'";  // the path in single quotes for the shell, a quote in it as '\''
  for (const char c : bin) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  const std::string cmd = quoted + "' --probe-device " + device + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return "cannot start " + bin + " to probe --device " + device;
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int status = ::pclose(p);
  while (!out.empty() && out.back() == '\n') out.pop_back();
  if (status == 0) return "";
  return out.empty() ? bin + " --probe-device " + device + " failed (status " + std::to_string(status) + ")"
                     : out;
}

/// Strict decimal parse of a seed in [0, 2^64): no sign, no clamping.
bool parse_seed(const std::string& s, uint64_t& out) {
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

/// Parses the command line; returns -1 to go on, or an exit code (0 after --help, 2 on bad usage).
int parse(int argc, char** argv, Options& o) {
  CLI::App app{
      "./check: grade a lab against the single-process reference.\n"
      "  ./check lab01              your code for lab01 (./check rebuilds it first)\n"
      "  ./check lab01 --solution   the solutions (self-test; in a learner copy only with solutions/)\n"
      "  ./check --all [--solution] every lab\n"
      "  ./check lab01 --hint [NAME] the lab's tasks, or the hint of one (stuck on a TODO)"};
  app.add_option("labs", o.labs, "labs to check, e.g. lab01");
  app.add_flag("--all", o.all, "every lab");
  app.add_flag("--solution", o.solution, "check the engine's own solution instead of your code");
  app.add_option("--only", o.only, "run only the scenario with this name (e.g. column_linear)");
  std::string tp_text;  // one argument: "2" or "1,2" (a following lab name is not swallowed)
  app.add_option("--tp", tp_text, "TP sizes to run, comma-separated (default: each scenario's own, 1,2,3,4)");
  app.add_flag("--no-dp", o.no_dp, "skip the dp=2 × tp=2 run of each scenario");
  app.add_option("--seed", o.seed_text, "seed of the inputs, 0 .. 2^64−1 (default: drawn now, and printed)");
  app.add_option("--json", o.json_path, "also write the results as JSON");
  app.add_flag("--verbose,-v", o.verbose, "print every run, passed or not, and keep its dumps");
  app.add_option("--binary", o.binary,
                 "rank program to check (default: tpsp-lab-ranks-<lab>, or tpsp-lab-ranks)");
  app.add_option("--timeout", o.timeout,
                 "seconds one run may take (default: each scenario's budget, 10–20 s)")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option(
      "--backend", o.backend,
      "how the ranks talk: relay (default: through a relay in the checker, which carries every byte; "
      "starts in microseconds), gloo (Gloo over loopback TCP, as tpsp-train; a full-mesh rendezvous "
      "per run) or nccl (--device cuda, one GPU per rank); device tensors go through host memory on "
      "relay and gloo, so the ranks may share one GPU");
  app.add_option("--device", o.device,
                 "where the scenarios' tensors live: cpu (default), cuda (a GPU build on a GPU machine), "
                 "cuda-emulated (cuda tensors kept in host memory with the CPU's ops: checks without a "
                 "GPU that your code keeps device tensors on the device)");
  app.add_option("--hint", o.hint_words,
                 "list the lab's tasks, or with NAME (a unique prefix is enough) print that task's hint "
                 "from the lab's HINTS.md, then exit")
      ->expected(0, -1);
  app.add_flag("--list", o.list, "list the labs and their scenarios, then exit");
  app.add_flag("--predict", o.predict,
               "compare the lab's prediction (labs/<lab dir>/prediction.txt) with the calls of its step, "
               "line by line; runs no code");
  app.add_option("--prediction", o.prediction_file, "(with --predict, one lab) read this file instead");
  app.add_option("--confine-uid", o.confine_uid,
                 "(./grade) run each launch's ranks as uid N + k, in their own namespaces (needs root)")
      ->check(CLI::Range(1000L, 4200000000L));
  app.add_flag("--confine-without-namespaces", o.confine_without_namespaces,
               "(with --confine-uid) where namespaces are not allowed (a container): the ranks still run as "
               "their own uids, under the limits, through the witness relay, but share /tmp, /dev/shm and "
               "the network with each other");
  app.add_option("--rank-memory-mib", o.rank_memory_mib, "(with --confine-uid) address space of a rank, MiB")
      ->check(CLI::Range(256.0, 1048576.0));
  app.add_option("--rank-cpu-s", o.rank_cpu_s, "(with --confine-uid) CPU seconds of a rank process")
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--rank-file-mib", o.rank_file_mib, "(with --confine-uid) largest file a rank writes, MiB")
      ->check(CLI::Range(1.0, 65536.0));
  app.add_option("--rank-procs", o.rank_procs, "(with --confine-uid) processes + threads of one launch's uid")
      ->check(CLI::Range(16.0, 100000.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kUsage;
  }
  o.hint = app.count("--hint") > 0;
  // An option given with an empty value is a mistake (a shell variable that was not set), not "default".
  for (const char* name : {"--seed", "--only", "--json", "--binary", "--tp", "--prediction"})
    if (app.count(name) > 0 && app[name]->as<std::string>().empty()) {
      std::fprintf(stderr, "./check: %s was given an empty value\n", name);
      return kUsage;
    }
  {  // a lab named twice is checked once
    std::vector<std::string> unique;
    for (const std::string& l : o.labs)
      if (std::find(unique.begin(), unique.end(), l) == unique.end()) unique.push_back(l);
    o.labs = unique;
  }
  for (std::size_t pos = 0; !tp_text.empty() && pos <= tp_text.size();) {
    const std::size_t comma = std::min(tp_text.find(',', pos), tp_text.size());
    const std::string item = tp_text.substr(pos, comma - pos);
    int tp = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), tp);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size()) {
      std::fprintf(stderr, "./check: --tp '%s': '%s' is not a TP size (write e.g. --tp 2 or --tp 1,2)\n",
                   tp_text.c_str(), item.c_str());
      return kUsage;
    }
    o.tps.push_back(tp);
    pos = comma + 1;
  }
  for (int tp : o.tps)
    if (tp < 1 || tp > 4) {
      std::fprintf(stderr,
                   "./check: --tp %d is outside 1..4 (the scenarios' sizes are divisible by 1, 2, 3 and 4)\n",
                   tp);
      return kUsage;
    }
  if (!o.prediction_file.empty() && (!o.predict || o.labs.size() != 1 || o.all)) {
    std::fprintf(stderr,
                 "./check: --prediction FILE goes with --predict and one lab (./check lab01 --predict "
                 "--prediction FILE)\n");
    return kUsage;
  }
  if (!std::isfinite(o.timeout)) {
    std::fprintf(stderr, "./check: --timeout must be a number of seconds in [0.1, 3600]\n");
    return kUsage;
  }
  if (!o.json_path.empty() &&
      !std::ofstream(o.json_path, std::ios::app)) {  // fail before the runs, not after
    std::fprintf(stderr, "./check: cannot write %s\n", o.json_path.c_str());
    return kUsage;
  }
  if (o.backend != "relay" && o.backend != "gloo" && o.backend != "nccl") {
    std::fprintf(stderr, "./check: backend '%s' is not one of relay, gloo, nccl\n", o.backend.c_str());
    return kUsage;
  }
  if (o.device != "cpu" && o.device != "cuda" && o.device != "cuda-emulated") {
    std::fprintf(stderr, "./check: device '%s' is not one of cpu, cuda, cuda-emulated\n", o.device.c_str());
    return kUsage;
  }
  if (o.backend == "nccl" && o.device != "cuda") {
    std::fprintf(
        stderr, "./check: --backend nccl needs --device cuda (nccl moves GPU memory only; got --device %s)\n",
        o.device.c_str());
    return kUsage;
  }
  if (o.device != "cpu" && o.confine_uid >= 0) {
    std::fprintf(
        stderr,
        "./check: --confine-uid (./grade) runs on the CPU only; --device %s is not allowed with it (a "
        "device run starts the rank program once outside the confinement to probe the device)\n",
        o.device.c_str());
    return kUsage;
  }
  if (o.backend != "relay" && o.confine_uid >= 0) {
    std::fprintf(stderr,
                 "./check: --confine-uid runs the ranks through the grader's witness relay only; "
                 "--backend %s is not allowed with it\n",
                 o.backend.c_str());
    return kUsage;
  }
  if (!o.seed_text.empty() && !parse_seed(o.seed_text, o.seed)) {
    std::fprintf(stderr, "./check: --seed '%s' is not an integer in 0 .. 18446744073709551615\n",
                 o.seed_text.c_str());
    return kUsage;
  }
  if (o.seed_text.empty()) o.seed = std::random_device{}() % 1000000;
  if (o.confine_without_namespaces && o.confine_uid < 0) {
    std::fprintf(stderr, "./check: --confine-without-namespaces goes with --confine-uid (./grade's runs)\n");
    return kUsage;
  }
  if (o.confine_uid >= 0 && ::geteuid() != 0) {
    std::fprintf(stderr,
                 "./check: --confine-uid needs root (it runs the ranks as other users, in namespaces)\n");
    return kUsage;
  }
#ifdef TPSP_LEARNER_COPY
  if (o.solution) {
    std::fprintf(
        stderr,
        "./check: --solution needs the solutions, which this learner copy does not hold (make release "
        "stripped them): ask your instructor for the prebuilt solutions/ folder (make solutions-lib)\n");
    return kUsage;
  }
#endif
  return -1;
}

/// Set by SIGINT/SIGTERM sent to ./check itself (Ctrl-C), as opposed to a rank that exits 130/143.
volatile std::sig_atomic_t g_interrupted = 0;

void on_interrupt(int) {
  g_interrupted = 1;
}

/// The layouts a scenario runs in: each selected tp, then dp=2 × tp=2.
std::vector<Layout> layouts(const Scenario& sc, const Options& o) {
  std::vector<Layout> out;
  auto selected = [&](int tp) {
    return o.tps.empty() || std::find(o.tps.begin(), o.tps.end(), tp) != o.tps.end();
  };
  for (int tp : sc.tp_sizes)
    if (selected(tp)) out.push_back({tp, 1});
  if (sc.dp_layout && !o.no_dp && selected(2)) out.push_back({2, 2});
  return out;
}

/// The SP settings a scenario runs with in `layout`: both for a scenario with SP variants, in the dp
/// layout too. The dp layout's SP-off run needs no later lab (lab03 owns SP), so a lab's own world-rank
/// mistake (a head offset from RANK in lab02) fails in a copy where lab03 is not written yet; the SP-on
/// run alone would stop at lab03's TODO there.
std::vector<bool> sp_settings(const Scenario& sc, const Layout&) {
  if (sc.sp_only) return {true};
  if (!sc.sp_variants) return {false};
  return {false, true};
}

/// Where the runs' files go. Each run creates a few dozen small files (the rendezvous keys, every rank's
/// dumps, the launcher's log) and deletes them soon after; on a disk file system creating them is most
/// of the kernel's work in a check, so they go to memory (/dev/shm, a tmpfs) when it can be written.
/// --verbose keeps the files for reading later, so they go to $TMPDIR (else /tmp) as before.
/// Confined launches mount their own /tmp and /dev/shm, so their runs go to $TMPDIR when it is elsewhere,
/// else /var/tmp.
std::string scratch_base(bool keep, bool confined) {
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string env = tmpdir ? tmpdir : "";
  if (confined)
    return !env.empty() && env.rfind("/tmp", 0) != 0 && env.rfind("/dev/shm", 0) != 0 ? env : "/var/tmp";
  if (!keep && ::access("/dev/shm", W_OK | X_OK) == 0) return "/dev/shm";
  return !env.empty() ? env : "/tmp";
}

/// Removes what checks that were killed (SIGKILL, a ctest timeout) left in memory: the directories
/// "tpsp-check-<pid>-*" of `base` whose process is gone and that belong to this user. Memory is not
/// freed until they are removed; a directory named after a live process is left alone.
void remove_abandoned_scratch(const std::string& base) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(base, ec)) {
    const std::string name = entry.path().filename().string();
    constexpr std::string_view prefix = "tpsp-check-";
    if (name.rfind(prefix, 0) != 0) continue;
    pid_t pid = 0;
    const char* first = name.data() + prefix.size();
    const auto [end, err] = std::from_chars(first, name.data() + name.size(), pid);
    struct stat st {};
    if (err != std::errc() || end == first || *end != '-' || pid <= 0) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to tell
    if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid()) continue;
    fs::remove_all(entry.path(), ec);
  }
}

/// The Python that draws the timelines: $TPSP_PLOT_PYTHON (tests point it at one without matplotlib),
/// else /usr/bin/python3 (Debian's, with python3-matplotlib; the python3 first on PATH may lack it).
std::string plot_python() {
  const char* p = std::getenv("TPSP_PLOT_PYTHON");
  return p && *p ? p : "/usr/bin/python3";
}

/// Whether plot_python() can draw (it runs and finds matplotlib; no import, so it takes milliseconds).
bool can_plot() {
  const std::string py = plot_python();
  return ::access(py.c_str(), X_OK) == 0 &&
         run_logged({py, "-c",
                     "import importlib.util,sys; sys.exit(importlib.util.find_spec('matplotlib') is None)"},
                    "/dev/null") == 0;
}

/// --verbose: draws every run's timeline (its ranks' trace.json: one lane per rank for compute and
/// for communication) into <run>/timeline.png with tools/plot_timeline.py --each, in one Python start
/// for the whole check (about a second of CPU each). Without matplotlib prints the one line that says
/// so; the traces stay. A failed drawing is said with its log.
void plot_timelines(const std::vector<std::string>& dirs, bool drawable, const std::string& work) {
  if (dirs.empty()) return;
  if (!drawable) {
    std::printf(
        "\n./check --verbose: no timeline pictures: %s has no matplotlib (Debian: apt install "
        "python3-matplotlib); each run's trace.json is written all the same\n",
        plot_python().c_str());
    return;
  }
  std::vector<std::string> argv{plot_python(), std::string(TPSP_SOURCE_DIR) + "/tools/plot_timeline.py",
                                "--each"};
  argv.insert(argv.end(), dirs.begin(), dirs.end());
  if (run_logged(argv, work + "/plot.log") != 0)
    std::printf("\n./check --verbose: drawing the timelines failed: see %s/plot.log\n", work.c_str());
}

/// Ctrl-C (or SIGTERM) reached ./check: says so, removes the scratch files, returns 130.
int interrupted(const std::string& work) {
  std::printf("\ninterrupted\n");
  fs::remove_all(work);
  return 130;
}

/// The runs of `lab` to check (each scenario × layout × SP setting, --only and --tp applied), each
/// dumping under WORK/<lab>-<scenario>-dp<d>-tp<t>-sp<s>; `on_host` gets the names of the scenarios of
/// host code by design among them (Scenario::host_code).
std::vector<PlannedRun> plan_lab(const std::string& lab, const Options& o, const std::string& work,
                                 std::string& on_host) {
  std::vector<PlannedRun> plan;
  for (const Scenario& sc : all_scenarios()) {
    if (sc.lab != lab || (!o.only.empty() && sc.name != o.only)) continue;
    if (sc.host_code) on_host += (on_host.empty() ? "" : ", ") + sc.name;
    for (const Layout& layout : layouts(sc, o))
      for (const bool sp : sp_settings(sc, layout))
        plan.push_back(
            {&sc, layout, sp,
             fmt::format("{}/{}-{}-dp{}-tp{}-sp{}", work, lab, sc.name, layout.dp, layout.tp, sp)});
  }
  return plan;
}

/// ./check LAB --hint [NAME]: the words given (the positional ones and those after --hint, in any
/// order) are one known lab and the task's name; returns the exit status.
int hint_main(const Options& o, const std::set<std::string>& known) {
  std::vector<std::string> labs;
  std::string query;
  std::vector<std::string> given = o.labs;
  given.insert(given.end(), o.hint_words.begin(), o.hint_words.end());
  for (const std::string& w : given)
    if (known.count(w))
      labs.push_back(w);
    else
      query += (query.empty() ? "" : " ") + w;
  if (labs.size() != 1 || o.all) {
    std::fprintf(stderr, "./check: --hint needs exactly one lab: ./check lab01 --hint [NAME]\n");
    return kUsage;
  }
  return run_hint(TPSP_SOURCE_DIR, labs[0], query);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const int code = parse(argc, argv, o); code >= 0) return code;
  const std::string bin_dir = fs::canonical("/proc/self/exe").parent_path().string();
  std::set<std::string> known;
  for (const Scenario& s : all_scenarios()) known.insert(s.lab);
  if (o.hint) return hint_main(o, known);
  if (o.list) {
    print_scenario_list();
    return 0;
  }
  if (o.all) o.labs.assign(known.begin(), known.end());
  if (o.labs.empty()) {
    std::fprintf(stderr,
                 "./check: name a lab (e.g. ./check lab01) or --all; ./check --help lists the options\n");
    return kUsage;
  }
  for (const std::string& l : o.labs)
    if (!known.count(l)) {
      std::string k;
      for (const auto& x : known) k += " " + x;
      std::fprintf(stderr, "./check: unknown lab '%s' (known:%s)\n", l.c_str(), k.c_str());
      return kUsage;
    }
#ifdef TPSP_RELEASED_LABS
  // A learner copy with the instructor's prebuilt solutions of some labs (solutions/released.json).
  if (o.solution) {
    const std::string released = TPSP_RELEASED_LABS;
    for (const std::string& l : o.labs)
      if (("," + released + ",").find("," + l + ",") == std::string::npos) {
        std::fprintf(
            stderr,
            "./check: --solution %s: your instructor's prebuilt solutions (solutions/) hold only %s; "
            "%s's solution is not released yet\n",
            l.c_str(), released.empty() ? "no lab" : released.c_str(), l.c_str());
        return kUsage;
      }
  }
#endif
  if (!o.only.empty()) {  // before the banner: a typo in --only is a usage error, not a run
    bool found = false;
    for (const Scenario& s : all_scenarios())
      found = found || (s.name == o.only && std::find(o.labs.begin(), o.labs.end(), s.lab) != o.labs.end());
    if (!found) {
      std::fprintf(stderr, "./check: no scenario named '%s' in the labs checked (see ./check --list)\n",
                   o.only.c_str());
      return kUsage;
    }
  }
  if (o.predict) return check_predictions(o.labs, TPSP_SOURCE_DIR, o.prediction_file);
  LaunchSettings launch;  // confined runs (./grade) always use the relay: it is their witness
  launch.relay = o.backend == "relay";
  launch.device = o.device;
  launch.backend = o.backend == "nccl" ? "nccl" : "gloo";
  Report report(o.seed, o.solution, o.binary,
                o.device == "cpu" ? o.backend : o.backend + ", device " + o.device, o.labs, o.verbose);
  if (!o.solution && o.binary.empty())
    if (const std::string stale = stale_sources(o.labs, bin_dir); !stale.empty()) {
      std::fprintf(stderr, "%s", stale.c_str());
      return kUsage;
    }
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  const std::string scratch = scratch_base(o.verbose, o.confine_uid >= 0);
  if (!o.verbose) remove_abandoned_scratch(scratch);
  std::string tmpl = fmt::format("{}/tpsp-check-{}-XXXXXX", scratch, ::getpid());
  if (!mkdtemp(tmpl.data())) {
    std::fprintf(stderr, "./check: cannot create a directory in %s: %s\n", scratch.c_str(),
                 std::strerror(errno));
    return kUsage;
  }
  const std::string work = tmpl;
  if (o.confine_uid >= 0) {  // each launch's ranks reach their own directories under WORK, nothing else
    ::chmod(work.c_str(), 0711);
    constexpr double kMiB = 1024.0 * 1024.0;
    launch.confine = tpsp::run::Confinement{o.confine_uid,
                                            static_cast<unsigned long long>(o.rank_memory_mib * kMiB),
                                            static_cast<unsigned long long>(o.rank_cpu_s),
                                            static_cast<unsigned long long>(o.rank_file_mib * kMiB),
                                            static_cast<unsigned long long>(o.rank_procs),
                                            !o.confine_without_namespaces};
  }
  RunLauncher launcher(std::move(launch));
  const bool drawable = o.verbose && can_plot();
  LabRunner runner(launcher, report, {o.seed, o.timeout, o.verbose, drawable}, g_interrupted);
  for (const std::string& lab : o.labs) {
    // --device cuda: the rank programs' GPU build (checkers/CMakeLists.txt, tpsp_rank_program_cuda).
    const std::string gpu = o.device == "cuda" ? "-cuda" : "";
    const std::string bin = !o.binary.empty() ? o.binary
                            : o.solution      ? bin_dir + "/tpsp-lab-ranks" + gpu
                                              : bin_dir + "/tpsp-lab-ranks-" + lab + gpu;
    if (!gpu.empty() && o.binary.empty() && !fs::exists(bin)) {
      std::fprintf(stderr,
                   "./check: --device cuda needs the GPU build of the rank programs, %s, which a build makes "
                   "only where nvcc is found and TPSP_WITH_CUDA is on (the default); without a GPU, "
                   "--device cuda-emulated checks the device paths\n",
                   bin.c_str());
      return kUsage;
    }
    if (o.device != "cpu")  // once, before the runs: no device means one line, not a failure per run
      if (const std::string why = probe_device(bin, o.device); !why.empty()) {
        std::fprintf(stderr, "./check: %s\n", why.c_str());
        return kUsage;
      }
    if (!report.begin_lab(lab, bin)) continue;
    std::string on_host;
    const std::vector<PlannedRun> plan = plan_lab(lab, o, work, on_host);
    if (o.device != "cpu" && !on_host.empty())
      report.lab_note(
          fmt::format("on the host under --device {} (host code by design): {}", o.device, on_host));
    if (!runner.run_lab(lab, bin, plan, work)) return interrupted(work);
  }
  if (report.runs() == 0 && report.failed() == 0) {
    std::fprintf(stderr, "./check: no scenario matches%s%s (see ./check --list)\n",
                 o.only.empty() ? "" : (" --only " + o.only).c_str(),
                 o.tps.empty() ? "" : " at the --tp sizes");
    fs::remove_all(work);
    return kUsage;
  }
  plot_timelines(runner.traced(), drawable, work);
  // The prediction of each lab checked (learner's code only): its own line, not counted in the runs.
  if (!o.solution && o.binary.empty() && o.confine_uid < 0)
    for (const std::string& lab : o.labs)
      if (const std::string line = prediction_summary(TPSP_SOURCE_DIR, lab); !line.empty())
        report.add_note(line);
  if (!o.json_path.empty() && !report.write_json(o.json_path)) {
    std::fprintf(stderr, "./check: cannot write %s\n", o.json_path.c_str());
    return kUsage;
  }
  if (!o.verbose) fs::remove_all(work);
  return report.finish();
}
