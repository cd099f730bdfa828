// Starting a check's runs (launch.h).
#include "checkers/grader/launch.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "checkers/input_server.h"
#include "checkers/inputs.h"
#include "checkers/sandbox/confine.h"
#include "checkers/sandbox/witness_judge.h"
#include "launch/env.h"
#include "launch/launcher.h"
#include "launch/relay_process.h"
#include "launch/report.h"

namespace fs = std::filesystem;

namespace tpsp::checkers {

namespace {

/// Runs the `world` ranks of `argv` as processes with the launch library's launcher in a forked child
/// (RunLauncher::launch_runs says what each rank gets); returns the launcher's exit code. `env` holds
/// the ranks' extra variables ("NAME=value"), `store` their rendezvous directory (made and removed
/// here), `log_path` the launcher's combined output. With `confine`, the ranks run under it, `store` is
/// given to its uid and the launcher first enters its own namespaces; each rank also gets namespaces of
/// its own (launcher.h RankSpec::isolate): a private /tmp and /dev/shm, no network, and of `run_dirs`
/// only its rank<r>/. With a `relay_log`, the ranks' only transport is a relay writing that file.
int run_ranks(const std::vector<std::string>& argv, int world, double budget,
              const std::vector<std::string>& env, const std::string& store, const std::string& log_path,
              const run::Confinement* confine, const std::string& relay_log, const run::InputServer& inputs,
              const std::vector<std::string>& run_dirs) {
  run::JobSpec spec;
  if (confine) spec.confine = *confine;
  spec.argv = argv;
  spec.timeout_s = budget;
  spec.tail_lines = 12;
  spec.stdin_from_null = true;
  std::map<std::string, std::string> set;
  for (const std::string& e : env) set[e.substr(0, e.find('='))] = e.substr(e.find('=') + 1);
  set["TPSP_STORE_DIR"] = store;
  set["WORLD_SIZE"] = set["LOCAL_WORLD_SIZE"] = std::to_string(world);
  if (!run::env_nonempty("OPENBLAS_NUM_THREADS"))
    set["OPENBLAS_NUM_THREADS"] = std::to_string(run::default_blas_threads(run::usable_cpus(), world));
  // Every library's symbols bound once at the rank program's start, not again in each scenario's forked
  // child (the program's own are, by -z now): 5 % of ./check --all --solution's wall (0.92–0.95, farm-bench,
  // 3 pairs). Not for the CUDA build, whose libraries (cuBLAS, NCCL) hold far more symbols than a check uses.
  if (set["TPSP_DEVICE"] != "cuda" && !run::env_nonempty("LD_BIND_NOW")) set["LD_BIND_NOW"] = "1";
  run::RelayProcess relay;
  if (!relay_log.empty()) {
    set["TPSP_RELAY_FD"] = "3";
    // A witness's log must hold only the calls the ranks' code made; the relay compares the calls itself.
    if (confine) set["TPSP_COMM_FINGERPRINT"] = "0";
  }
  std::vector<int> ranks;
  for (int r = 0; r < world; ++r) {
    set["RANK"] = set["LOCAL_RANK"] = std::to_string(r);
    spec.ranks.push_back({r, run::build_environment(set, {})});
    if (confine) {  // its own uid, namespaces, /tmp; of the run folders only its own rank<r>/ visible
      spec.ranks.back().uid = confine->uid + r;
      spec.ranks.back().isolate = confine->namespaces;
      for (const std::string& d : run_dirs)
        spec.ranks.back().own_dirs.push_back(d + "/rank" + std::to_string(r));
    }
    ranks.push_back(r);
  }
  std::error_code ec;
  if (!fs::create_directory(store, ec) || (confine && !sandbox::hand_over(store, confine->uid))) return 1;
  // The grader's logs are root's alone (0600): a rank under ./grade's confinement reads neither its peers'
  // lines nor the witness relay's record.
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log < 0) return 1;
  if (!relay_log.empty()) {
    if (!relay.start(world, relay_log, inputs)) {
      run::write_all(
          log, "tpsp-check: cannot start the witness relay: " + std::string(std::strerror(errno)) + "\n");
      ::close(log);
      return 1;
    }
    for (int r = 0; r < world; ++r) spec.ranks[static_cast<std::size_t>(r)].pass_fd = relay.rank_end(r);
  }
  std::fflush(nullptr);  // the child must not inherit unwritten output
  const pid_t pid = ::fork();
  if (pid == 0) {  // the launcher: runs the job, writes its summary, ends without ./check's exit handlers
    if (confine && confine->namespaces)
      if (const std::string error = sandbox::isolate_launcher(relay_log.empty()); !error.empty()) {
        run::write_all(log, "tpsp-check: cannot confine the run: " + error + "\n");
        ::_exit(1);
      }
    run::LineRelay relay(ranks, spec.tail_lines, log, log);
    relay.limit_bytes_per_rank(1 << 20);  // the log is read back whole by the grader
    const run::JobOutcome outcome = run::run_job(spec, relay);
    run::write_all(log, run::format_summary(outcome, relay, spec.timeout_s, false));
    ::_exit(run::exit_code(outcome));
  }
  ::close(log);
  relay.release_rank_ends();
  int code = 1;
  if (pid > 0) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  relay.finish();
  fs::remove_all(store, ec);
  return code;
}

std::vector<std::string> dirs_of(const std::vector<const PlannedRun*>& runs) {
  std::vector<std::string> dirs;
  for (const PlannedRun* r : runs) dirs.push_back(r->dir);
  return dirs;
}

}  // namespace

LaunchOutcome RunLauncher::launch_runs(const std::string& bin, const std::vector<const PlannedRun*>& runs,
                                       uint64_t seed, double budget, const std::string& scratch) {
  const PlannedRun& first = *runs.front();
  // A confined launch's ranks talk only through the witness relay, whose log lies beside `scratch` in
  // the grader's own directory (never in a directory a rank owns, where it could be replaced).
  const std::string relay_log = s_.confine || s_.relay ? scratch + ".relay.jsonl" : "";
  // Under a relay the ranks never get the seed of the inputs: they ask the relay for each, which gives a
  // rank only its own part (checkers/input_server.h); without one (--backend gloo) they draw them.
  std::vector<std::string> argv{bin, "--tp", std::to_string(first.layout.tp), "--model-seed",
                                std::to_string(model_seed_of(seed))};
  if (relay_log.empty()) argv.insert(argv.end(), {"--seed", std::to_string(seed)});
  for (const PlannedRun* r : runs) {  // SP per scenario: one launch serves a layout's runs with and without
    argv.insert(argv.end(), {"--scenario", r->sc->id(), "--sp", r->sp ? "1" : "0", "--out", r->dir});
  }
  std::optional<run::Confinement> confine = s_.confine;
  if (confine) confine->uid = sandbox::launch_uid(confine->uid, confined_launches_++);
  const int world = first.layout.world();
  if (confine) {  // each rank writes only DIR/rank<w>/, its own (root keeps DIR, 0711)
    if (world > sandbox::kMaxWorld) {
      std::fprintf(stderr, "tpsp-check: a confined launch has at most %d ranks, not %d\n", sandbox::kMaxWorld,
                   world);
      return {};
    }
    for (const PlannedRun* r : runs)
      for (int w = 0; w < world; ++w) {
        const std::string d = r->dir + "/rank" + std::to_string(w);
        std::error_code ec;
        fs::create_directories(d, ec);
        if (::chmod(r->dir.c_str(), 0711) != 0 || !sandbox::hand_over(d, confine->uid + w)) {
          std::fprintf(stderr, "tpsp-check: cannot give %s to uid %ld: %s\n", d.c_str(), confine->uid + w,
                       std::strerror(errno));
          return {};
        }
      }
  }
  LaunchOutcome out;
  // TPSP_DEVICE and TPSP_BACKEND always: one exported in the caller's shell must not change a plain
  // ./check (attack12).
  out.code = run_ranks(
      argv, world, budget,
      {fmt::format("TPSP_COMM_TIMEOUT={}", budget + 10), "TPSP_COMM_CHECK_BUFFERS=1", "TPSP_POISON_EMPTY=1",
       "TPSP_DEVICE=" + s_.device, "TPSP_BACKEND=" + (relay_log.empty() ? s_.backend : std::string("relay"))},
      scratch + "/store", scratch + "/launcher.log", confine ? &*confine : nullptr, relay_log,
      input_server(seed, first.layout.tp), dirs_of(runs));
  if (confine) {
    for (int w = 0; w < world; ++w) sandbox::kill_uid(confine->uid + w);
    sandbox::take_back(scratch);
    for (const PlannedRun* r : runs) sandbox::take_back(r->dir);
    out.witness = judge_witness(relay_log, runs);
  }
  return out;
}

double batch_budget(const std::vector<const PlannedRun*>& runs) {
  double largest = 0;
  for (const PlannedRun* r : runs) largest = std::max(largest, r->sc->budget_s);
  return largest + 2.0 * static_cast<double>(runs.size());
}

int run_logged(const std::vector<std::string>& argv, const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) return 127;
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

double run_seconds(const std::string& dir) {
  const auto j = nlohmann::json::parse(read_file(dir + "/rank0/result.json"), nullptr, false);
  return j.is_object() && j.contains("seconds") && j["seconds"].is_number() ? j["seconds"].get<double>() : -1;
}

}  // namespace tpsp::checkers
