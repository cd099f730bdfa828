// Starting a check's runs (launch.h).
#include "checkers/grader/launch.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tools/tpsp_run/env.h"
#include "tools/tpsp_run/launcher.h"
#include "tools/tpsp_run/report.h"

namespace fs = std::filesystem;

namespace tpsp::checkers {

int run_ranks(const std::vector<std::string>& argv, int world, double budget,
              const std::vector<std::string>& env, const std::string& store, const std::string& log_path) {
  namespace run = tpsp::run;
  run::JobSpec spec;
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
  std::vector<int> ranks;
  for (int r = 0; r < world; ++r) {
    set["RANK"] = set["LOCAL_RANK"] = std::to_string(r);
    spec.ranks.push_back({r, run::build_environment(set, {})});
    ranks.push_back(r);
  }
  std::error_code ec;
  if (!fs::create_directory(store, ec)) return 1;
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) return 1;
  std::fflush(nullptr);  // the child must not inherit unwritten output
  const pid_t pid = ::fork();
  if (pid == 0) {  // the launcher: runs the job, writes its summary, ends without ./check's exit handlers
    run::LineRelay relay(ranks, spec.tail_lines, log, log);
    const run::JobOutcome outcome = run::run_job(spec, relay);
    run::write_all(log, run::format_summary(outcome, relay, spec.timeout_s, false));
    ::_exit(run::exit_code(outcome));
  }
  ::close(log);
  int code = 1;
  if (pid > 0) {
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  fs::remove_all(store, ec);
  return code;
}

int launch_runs(const std::string& bin, const std::vector<const PlannedRun*>& runs, uint64_t seed,
                double budget, const std::string& scratch) {
  const PlannedRun& first = *runs.front();
  std::vector<std::string> argv{bin,
                                "--tp",
                                std::to_string(first.layout.tp),
                                "--sp",
                                first.sp ? "1" : "0",
                                "--seed",
                                std::to_string(seed)};
  for (const PlannedRun* r : runs) {
    argv.insert(argv.end(), {"--scenario", r->sc->id(), "--out", r->dir});
  }
  return run_ranks(
      argv, first.layout.world(), budget,
      {fmt::format("TPSP_COMM_TIMEOUT={}", budget + 10), "TPSP_COMM_CHECK_BUFFERS=1", "TPSP_POISON_EMPTY=1"},
      scratch + "/store", scratch + "/launcher.log");
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
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
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
