// Starting a check's runs (launch.h).
#include "checkers/grader/launch.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
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

#include "checkers/grader/witness_judge.h"
#include "launch/env.h"
#include "launch/launcher.h"
#include "launch/relay_process.h"
#include "launch/report.h"

namespace fs = std::filesystem;

namespace tpsp::checkers {

namespace {

std::optional<run::Confinement> g_confine;         // set by confine_launches
bool g_relay = false;                              // set by use_relay
std::string g_device = "cpu", g_backend = "gloo";  // set by set_device
long g_launches = 0;                               // launches so far (each confined one gets its own uids)
constexpr int kMaxWorld = 16;                      // uids per launch: rank w of a launch runs as its uid + w

/// The confinement of the next launch: its own block of kMaxWorld uids, one per rank (ranks of one launch
/// cannot signal, trace or inspect each other: their only way to each other is the witness relay).
std::optional<run::Confinement> next_confinement() {
  if (!g_confine) return std::nullopt;
  run::Confinement c = *g_confine;
  c.uid += (g_launches++ % 6000) * kMaxWorld;
  return c;
}

/// Gives `dir` to `uid`, closed to everyone else; false (with errno) when it cannot.
bool hand_over(const std::string& dir, long uid) {
  return ::chown(dir.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(uid)) == 0 &&
         ::chmod(dir.c_str(), 0700) == 0;
}

/// In the launcher of a confined launch (root, before any rank starts): new mount, network and IPC
/// namespaces, so that what the ranks leave in /tmp, /dev/shm, System V IPC or on a socket is seen by no
/// other launch; with `loopback` the loopback interface up (Gloo connects the ranks through it), else no
/// network at all (the witness relay's sockets are the ranks' only way to each other). Returns "" or what
/// failed.
std::string isolate_launcher(bool loopback) {
  if (::unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC) != 0)
    return fmt::format("unshare(mount, network, IPC namespaces): {}", std::strerror(errno));
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return fmt::format("making / private: {}", std::strerror(errno));
  for (const char* dir : {"/tmp", "/dev/shm"})
    if (::access(dir, F_OK) == 0 &&
        ::mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=256m,mode=1777") != 0)
      return fmt::format("a private tmpfs on {}: {}", dir, std::strerror(errno));
  if (!loopback) return "";
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq req{};
  std::snprintf(req.ifr_name, IFNAMSIZ, "lo");
  const bool up =
      fd >= 0 && ::ioctl(fd, SIOCGIFFLAGS, &req) == 0 &&
      (req.ifr_flags = static_cast<short>(req.ifr_flags | IFF_UP), ::ioctl(fd, SIOCSIFFLAGS, &req) == 0);
  const int err = errno;
  if (fd >= 0) ::close(fd);
  return up ? "" : fmt::format("bringing up the loopback interface: {}", std::strerror(err));
}

/// After a confined launch: takes `dir` back from the ranks' uid (every entry owned by root again, so
/// nothing left running could change it while it is graded) and removes anything in it that is not a
/// plain file or directory (a link to a file of the grader's, a FIFO that would block its read).
void take_back(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> odd;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const fs::file_status st = it->symlink_status(ec);
    if (fs::is_regular_file(st) || fs::is_directory(st)) {
      [[maybe_unused]] const int r = ::lchown(it->path().c_str(), 0, 0);
    } else {
      odd.push_back(it->path());
    }
  }
  for (const fs::path& p : odd) fs::remove(p, ec);
  [[maybe_unused]] const int r = ::chown(dir.c_str(), 0, 0);
}

/// After a confined launch: SIGKILLs every process left running as its uid (a spinner that left its
/// process group with setsid, a daemon), from a child that takes that uid: kill(-1) reaches exactly them.
void kill_uid(long uid) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgid(static_cast<gid_t>(uid)) == 0 && ::setuid(static_cast<uid_t>(uid)) == 0) ::kill(-1, SIGKILL);
    ::_exit(0);
  }
  int st = 0;
  while (pid > 0 && ::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

void use_relay(bool on) {
  g_relay = on;
}

void set_device(const std::string& device, const std::string& backend) {
  g_device = device;
  g_backend = backend;
}

void confine_launches(const run::Confinement& limits) {
  g_confine = limits;
  require_witness();
}

int run_ranks(const std::vector<std::string>& argv, int world, double budget,
              const std::vector<std::string>& env, const std::string& store, const std::string& log_path,
              const run::Confinement* confine, const std::string& relay_log,
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
  // Always both: a TPSP_DEVICE exported in the caller's shell must not change a plain ./check (attack12).
  set["TPSP_DEVICE"] = g_device;
  set["TPSP_BACKEND"] = g_backend;
  if (!run::env_nonempty("OPENBLAS_NUM_THREADS"))
    set["OPENBLAS_NUM_THREADS"] = std::to_string(run::default_blas_threads(run::usable_cpus(), world));
  // Every library's symbols bound once at the rank program's start, not again in each scenario's forked
  // child (the program's own are, by -z now): 5 % of ./check --all --solution's wall (0.92–0.95, farm-bench,
  // 3 pairs). Not for the CUDA build, whose libraries (cuBLAS, NCCL) hold far more symbols than a check uses.
  if (g_device != "cuda" && !run::env_nonempty("LD_BIND_NOW")) set["LD_BIND_NOW"] = "1";
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
      spec.ranks.back().isolate = true;
      for (const std::string& d : run_dirs)
        spec.ranks.back().own_dirs.push_back(d + "/rank" + std::to_string(r));
    }
    ranks.push_back(r);
  }
  std::error_code ec;
  if (!fs::create_directory(store, ec) || (confine && !hand_over(store, confine->uid))) return 1;
  // The grader's logs are root's alone (0600): a rank under ./grade's confinement reads neither its peers'
  // lines nor the witness relay's record.
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (log < 0) return 1;
  if (!relay_log.empty()) {
    if (!relay.start(world, relay_log)) {
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
    if (confine)
      if (const std::string error = isolate_launcher(relay_log.empty()); !error.empty()) {
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

namespace {

std::vector<std::string> dirs_of(const std::vector<const PlannedRun*>& runs) {
  std::vector<std::string> dirs;
  for (const PlannedRun* r : runs) dirs.push_back(r->dir);
  return dirs;
}

}  // namespace

int launch_runs(const std::string& bin, const std::vector<const PlannedRun*>& runs, uint64_t seed,
                double budget, const std::string& scratch) {
  const PlannedRun& first = *runs.front();
  std::vector<std::string> argv{bin, "--tp", std::to_string(first.layout.tp), "--seed", std::to_string(seed)};
  for (const PlannedRun* r : runs) {  // SP per scenario: one launch serves a layout's runs with and without
    argv.insert(argv.end(), {"--scenario", r->sc->id(), "--sp", r->sp ? "1" : "0", "--out", r->dir});
  }
  const std::optional<run::Confinement> confine = next_confinement();
  const int world = first.layout.world();
  if (confine) {  // each rank writes only DIR/rank<w>/, its own (root keeps DIR, 0711)
    if (world > kMaxWorld) {
      std::fprintf(stderr, "tpsp-check: a confined launch has at most %d ranks, not %d\n", kMaxWorld, world);
      return 1;
    }
    for (const PlannedRun* r : runs)
      for (int w = 0; w < world; ++w) {
        const std::string d = r->dir + "/rank" + std::to_string(w);
        std::error_code ec;
        fs::create_directories(d, ec);
        if (::chmod(r->dir.c_str(), 0711) != 0 || !hand_over(d, confine->uid + w)) {
          std::fprintf(stderr, "tpsp-check: cannot give %s to uid %ld: %s\n", d.c_str(), confine->uid + w,
                       std::strerror(errno));
          return 1;
        }
      }
  }
  // A confined launch's ranks talk only through the witness relay, whose log lies beside `scratch` in
  // the grader's own directory (never in a directory a rank owns, where it could be replaced).
  const std::string relay_log = confine || g_relay ? scratch + ".relay.jsonl" : "";
  const int code = run_ranks(
      argv, world, budget,
      {fmt::format("TPSP_COMM_TIMEOUT={}", budget + 10), "TPSP_COMM_CHECK_BUFFERS=1", "TPSP_POISON_EMPTY=1"},
      scratch + "/store", scratch + "/launcher.log", confine ? &*confine : nullptr, relay_log, dirs_of(runs));
  if (confine) {
    for (int w = 0; w < world; ++w) kill_uid(confine->uid + w);
    take_back(scratch);
    for (const PlannedRun* r : runs) take_back(r->dir);
    judge_witness(relay_log, runs);
  }
  return code;
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
