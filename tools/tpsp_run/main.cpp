// tpsp-run: the command line. Starts N ranks of a program on this machine (local mode) or runs one task
// of a Slurm step (Slurm mode), sets the rank environment, relays output with rank prefixes and exits
// with a code that says how the job ended. See --help, and launcher.h / env.h for the details.
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launch/child.h"
#include "launch/env.h"
#include "launch/launcher.h"
#include "launch/output.h"
#include "launch/relay_process.h"
#include "launch/report.h"
#include "launch/store_dir.h"

namespace {

using namespace tpsp::run;

constexpr int kUsageError = 2;

// The transport when --backend is not given: Gloo where the build has it, else the relay.
#if defined(TPSP_WITH_GLOO) && TPSP_WITH_GLOO
constexpr const char* kDefaultBackend = "gloo";
#else
constexpr const char* kDefaultBackend = "relay";
#endif

// Everything the command line says.
struct Options {
  std::optional<int> nproc;
  double timeout_s = 0.0;
  int tail = 20;
  std::optional<int> blas_threads;
  bool slurm = false;
  std::string store_base = "/tmp";
  bool no_file_store = false;
  double grace_s = 2.0;
  bool verbose = false;
  std::string backend = kDefaultBackend;
  std::vector<std::string> command;
};

// CLI11's help layout with a usage line that shows where the program goes.
class UsageFormatter : public CLI::Formatter {
 public:
  // Returns the usage line for --help (`app` and `name` are unused: there is one command).
  std::string make_usage(const CLI::App* /*app*/, std::string /*name*/) const override {
    return "\nUsage: tpsp-run [OPTIONS] [--] PROG [ARGS...]\n";
  }
};

// Prints "tpsp-run: error: <message>" and a pointer to --help on stderr; returns the usage exit code.
int usage_error(const std::string& message) {
  write_all(2, fmt::format("tpsp-run: error: {}\nRun 'tpsp-run --help' for usage.\n", message));
  return kUsageError;
}

// Parses argv into *opts. Returns -1 to go on, or the exit code to return right away (0 after --help,
// 2 for bad usage, with the message already printed).
int parse_command_line(int argc, char** argv, Options* opts) {
  CLI::App app{
      "tpsp-run: start the ranks of a tpsp program, relay their output with rank prefixes, and stop the\n"
      "whole job loudly when one rank fails.\n\n"
      "  tpsp-run -n 4 -- ./build/bin/demo --steps 10      (4 local processes)\n"
      "  srun -K -n 4 tpsp-run -- ./build/bin/demo         (one task of a Slurm step; -K stops\n"
      "                                                     the other tasks when one fails)\n\n"
      "Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, TPSP_STORE_DIR (--backend relay:\n"
      "TPSP_RELAY_FD=3 instead) and OPENBLAS_NUM_THREADS. Exit code: 0 when all ranks exit 0; else the first "
      "failed rank's code\n"
      "(128+signal if it was killed), 124 on --timeout, 128+signal when interrupted, 2 for bad usage.",
      "tpsp-run"};
  app.add_option("-n,--nproc", opts->nproc, "number of ranks to start on this machine (local mode)");
  app.add_option("--timeout", opts->timeout_s, "wall-clock limit for the whole job in seconds (0 = none)")
      ->capture_default_str();
  app.add_option("--tail", opts->tail, "lines of each rank kept for the failure summary")
      ->capture_default_str();
  app.add_option("--blas-threads", opts->blas_threads,
                 "OPENBLAS_NUM_THREADS for every rank (default: cores / local ranks, or the value already "
                 "in the environment)");
  app.add_flag("--slurm", opts->slurm,
               "run as one task of a Slurm step (automatic when SLURM_PROCID and SLURM_NTASKS are set and "
               "-n is not given)");
  app.add_option("--store-base", opts->store_base,
                 "Slurm mode: directory, shared by all tasks, under which the step's store directory is made")
      ->capture_default_str();
  app.add_flag("--no-file-store", opts->no_file_store,
               "do not set TPSP_STORE_DIR; the ranks rendezvous over TCP at MASTER_ADDR:MASTER_PORT "
               "(both must be set)");
  app.add_option("--grace", opts->grace_s, "seconds between SIGTERM and SIGKILL when stopping ranks")
      ->capture_default_str();
  app.add_flag("-v,--verbose", opts->verbose, "report the plan and each rank's start and end on stderr");
  app.add_option("--backend", opts->backend,
                 "how the ranks reach each other: gloo (TCP between the ranks, a rendezvous in the store "
                 "directory) or relay (local mode: every byte through a relay process of tpsp-run's, over a "
                 "socket each rank gets as descriptor 3 with TPSP_RELAY_FD=3; no Gloo needed)")
      ->check(CLI::IsMember({"gloo", "relay"}))
      ->capture_default_str();
  app.footer(
      "When a rank ends, anything it left running in its process group is killed; when one fails, the\n"
      "others get SIGTERM, then SIGKILL after --grace seconds, and its last --tail lines are printed.");
  app.prefix_command();  // everything from the first positional on belongs to the program
  app.formatter(std::make_shared<UsageFormatter>());

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    return usage_error(e.what());
  }

  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() == "--") {
    rest.erase(rest.begin());
  } else if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
    return usage_error(fmt::format("unknown option '{}' (put the program after '--')", rest.front()));
  }
  opts->command = rest;
  if (opts->command.empty()) return usage_error("no program given: tpsp-run -n N -- PROG ARGS...");
  if (opts->nproc && *opts->nproc < 1)
    return usage_error(fmt::format("-n must be at least 1, got {}", *opts->nproc));
  if (opts->nproc && opts->slurm) return usage_error("-n and --slurm exclude each other");
  if (!(opts->timeout_s >= 0 && opts->timeout_s <= 1e9)) return usage_error("--timeout must be >= 0 seconds");
  if (opts->tail < 0) return usage_error("--tail must be >= 0");
  if (!(opts->grace_s >= 0 && opts->grace_s <= 1e6)) return usage_error("--grace must be >= 0 seconds");
  if (opts->blas_threads && *opts->blas_threads < 1) return usage_error("--blas-threads must be at least 1");
  if (opts->backend == "relay" && opts->no_file_store)
    return usage_error("--backend relay needs no store: drop --no-file-store");
  if (opts->no_file_store && (!env_nonempty("MASTER_ADDR") || !env_nonempty("MASTER_PORT"))) {
    return usage_error("--no-file-store needs MASTER_ADDR and MASTER_PORT in the environment");
  }
  if (!opts->nproc && !opts->slurm) {
    if (!slurm_detected()) {
      return usage_error("-n N is required (or run under srun, or pass --slurm)");
    }
    opts->slurm = true;
  }
  if (opts->backend == "relay" && opts->slurm)
    return usage_error("--backend relay serves the ranks of one machine: local mode (-n N) only");
  return -1;
}

// OPENBLAS_NUM_THREADS to set, or nullopt to keep the user's own value: --blas-threads wins, then an
// OPENBLAS_NUM_THREADS already in the environment (non-empty), then `default_threads`.
std::optional<int> blas_threads_to_set(const Options& opts, int default_threads) {
  if (opts.blas_threads) return opts.blas_threads;
  if (env_nonempty("OPENBLAS_NUM_THREADS")) return std::nullopt;
  return default_threads;
}

// Runs the job described by `spec` and prints the summary, followed by `failure_note` (when not empty)
// if a rank failed or timed out. Returns the launcher's exit code.
int run_and_report(const JobSpec& spec, const std::string& failure_note = "") {
  std::vector<int> ranks;
  for (const auto& r : spec.ranks) ranks.push_back(r.rank);
  LineRelay relay(ranks, spec.tail_lines);
  const JobOutcome outcome = run_job(spec, relay);
  std::string summary = format_summary(outcome, relay, spec.timeout_s, spec.verbose);
  if (!failure_note.empty() &&
      (outcome.ending == Ending::kRankFailed || outcome.ending == Ending::kTimedOut)) {
    summary += failure_note;
  }
  write_all(2, summary);
  return exit_code(outcome);
}

pid_t g_launcher = -1;  // the launcher child of run_through_relay, which gets the signals tpsp-run gets

extern "C" void forward_signal(int sig) {
  if (g_launcher > 0) ::kill(g_launcher, sig);
}

// --backend relay: the relay in one child (RelayProcess), the job in another that runs run_and_report,
// as ./check's launches do; this process forwards SIGINT, SIGTERM and SIGHUP to the launcher child and
// exits with its code. The launcher must not be the relay's parent: it kills every child of its own that
// is not a rank once the job ends (strays.h).
int run_through_relay(JobSpec spec) {
  RelayProcess relay;
  if (!relay.start(static_cast<int>(spec.ranks.size()), "")) {
    write_all(2, fmt::format("tpsp-run: error: cannot start the relay: {}\n", std::strerror(errno)));
    return 1;
  }
  for (RankSpec& r : spec.ranks) {
    r.pass_fd = relay.rank_end(r.rank);
    r.env.push_back("TPSP_RELAY_FD=3");
  }
  std::fflush(nullptr);
  const pid_t self = ::getpid();
  g_launcher = ::fork();
  if (g_launcher == 0) {
    // A tpsp-run killed by a signal it cannot forward (SIGKILL) still stops its job: the launcher gets
    // SIGTERM, which it forwards to the ranks as it does a user's.
    end_with_parent(self, SIGTERM, 1);
    ::_exit(run_and_report(spec));
  }
  relay.release_rank_ends();
  if (g_launcher < 0) {
    write_all(2, fmt::format("tpsp-run: error: cannot start the launcher: {}\n", std::strerror(errno)));
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  int st = 0;
  while (::waitpid(g_launcher, &st, 0) < 0 && errno == EINTR) {
  }
  relay.finish();
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Local mode: N processes on this machine, one fresh store directory removed at the end.
int run_local(const Options& opts) {
  const int n = *opts.nproc;
  std::string store_dir;
  const bool relay = opts.backend == "relay";
  if (!opts.no_file_store && !relay) {
    std::string error;
    const auto dir = make_private_store_dir(&error);
    if (!dir) {
      write_all(2, fmt::format("tpsp-run: error: {}\n", error));
      return 1;
    }
    store_dir = *dir;
  }
  const int cpus = usable_cpus();
  const std::optional<int> blas = blas_threads_to_set(opts, default_blas_threads(cpus, n));

  JobSpec spec;
  spec.argv = opts.command;
  spec.timeout_s = opts.timeout_s;
  spec.grace_s = opts.grace_s;
  spec.tail_lines = static_cast<std::size_t>(opts.tail);
  spec.stdin_from_null = true;
  spec.verbose = opts.verbose;
  for (int rank = 0; rank < n; ++rank) {
    std::map<std::string, std::string> set = {{"RANK", std::to_string(rank)},
                                              {"WORLD_SIZE", std::to_string(n)},
                                              {"LOCAL_RANK", std::to_string(rank)},
                                              {"LOCAL_WORLD_SIZE", std::to_string(n)}};
    std::vector<std::string> unset{"TPSP_RELAY_FD"};  // only the relay's own descriptor, never inherited
    if (store_dir.empty()) {
      unset.push_back("TPSP_STORE_DIR");
    } else {
      set["TPSP_STORE_DIR"] = store_dir;
    }
    if (blas) set["OPENBLAS_NUM_THREADS"] = std::to_string(*blas);
    spec.ranks.push_back(RankSpec{rank, build_environment(set, unset)});
  }
  if (opts.verbose) {
    write_all(
        2, fmt::format("tpsp-run: {} rank(s) of '{}', {}, OPENBLAS_NUM_THREADS={} ({} cpus)\n", n,
                       opts.command.front(),
                       relay               ? std::string("through the relay (fd 3)")
                       : store_dir.empty() ? std::string("store TCP (MASTER_ADDR:MASTER_PORT)")
                                           : "store " + store_dir,
                       blas ? std::to_string(*blas) : get_env("OPENBLAS_NUM_THREADS").value_or("?"), cpus));
  }
  if (relay) return run_through_relay(std::move(spec));
  const int code = run_and_report(spec);
  remove_tree(store_dir);
  return code;
}

// Slurm mode: this process is one task of a step; run the program once as that rank.
int run_slurm(const Options& opts) {
  std::string error;
  const auto task = read_slurm_task(&error);
  if (!task) return usage_error(fmt::format("Slurm mode: {}", error));

  std::optional<SlurmStoreLayout> layout;
  if (!opts.no_file_store) {
    layout = slurm_store_layout(opts.store_base, task->job_id, task->step_id, task->cluster, task->srun_port);
    if (!create_slurm_store(*layout, &error)) {
      write_all(2,
                fmt::format("tpsp-run: error: {} (--store-base must exist on a filesystem all tasks share)\n",
                            error));
      return 1;
    }
  }
  // CPUs: Slurm's own count when given; a task bound to a subset of the machine keeps its subset;
  // otherwise the local tasks share this machine's CPUs.
  const int cpus = usable_cpus();
  int default_threads = default_blas_threads(cpus, task->local_world_size);
  if (task->cpus_per_task) {
    default_threads = *task->cpus_per_task;
  } else if (cpus < online_cpus()) {
    default_threads = cpus;
  }
  const std::optional<int> blas = blas_threads_to_set(opts, default_threads);

  std::map<std::string, std::string> set = {{"RANK", std::to_string(task->rank)},
                                            {"WORLD_SIZE", std::to_string(task->world_size)},
                                            {"LOCAL_RANK", std::to_string(task->local_rank)},
                                            {"LOCAL_WORLD_SIZE", std::to_string(task->local_world_size)}};
  std::vector<std::string> unset{"TPSP_RELAY_FD"};  // only tpsp-run's own relay descriptor, never inherited
  if (layout) {
    set["TPSP_STORE_DIR"] = layout->store;
  } else {
    unset.push_back("TPSP_STORE_DIR");
  }
  if (blas) set["OPENBLAS_NUM_THREADS"] = std::to_string(*blas);

  JobSpec spec;
  spec.argv = opts.command;
  spec.timeout_s = opts.timeout_s;
  spec.grace_s = opts.grace_s;
  spec.tail_lines = static_cast<std::size_t>(opts.tail);
  spec.stdin_from_null = false;  // srun decides what stdin each task gets
  spec.verbose = opts.verbose;
  spec.ranks.push_back(RankSpec{task->rank, build_environment(set, unset)});
  if (opts.verbose) {
    write_all(2, fmt::format("tpsp-run: Slurm task rank {}/{} (local {}/{}), store {}\n", task->rank,
                             task->world_size, task->local_rank, task->local_world_size,
                             layout ? layout->store : "TCP (MASTER_ADDR:MASTER_PORT)"));
  }
  // This launcher sees only its own task; stopping the others is srun's job.
  const int code = run_and_report(spec,
                                  "tpsp-run: (Slurm) the other tasks are stopped at once only under "
                                  "'srun --kill-on-bad-exit' (-K) or KillOnBadExit=1 in slurm.conf\n");
  if (layout) release_slurm_store(*layout, task->rank, task->world_size);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  if (const int code = parse_command_line(argc, argv, &opts); code >= 0) return code;
  return opts.slurm ? run_slurm(opts) : run_local(opts);
}
