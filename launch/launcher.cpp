// tpsp-run: process management (see launcher.h).
#include "launch/launcher.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include "launch/child.h"
#include "launch/strays.h"

extern char** environ;

namespace tpsp::run {
namespace {

using Clock = std::chrono::steady_clock;

// Signals the launcher handles itself (SIGCHLD wakes the loop; the others stop the job).
constexpr int kHandledSignals[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
// How long to wait for a rank to vanish after SIGKILL before reporting it as left behind.
constexpr auto kSigkillWait = std::chrono::seconds(5);
// How long to keep reading pipes after every rank ended (a process outside the rank's group may still
// hold one open; it is not waited for longer than this).
constexpr auto kDrainWait = std::chrono::seconds(1);
// Upper bound of one poll() wait in milliseconds (a safety net; SIGCHLD normally wakes the loop).
constexpr int kMaxPollMs = 250;
/// After the first rank fails, the others get this long to end on their own before they are stopped: ranks
/// that raise the same error (every rank of a scenario meeting the same TODO or bad input) then report it
/// themselves instead of being killed mid-exit and reported as stopped inside a collective.
constexpr auto kPeerLinger = std::chrono::milliseconds(500);

// Write end of the self-pipe; the signal handler writes the signal number there as one byte.
int g_signal_pipe_write = -1;

// Signal handler: records `sig` in the self-pipe (async-signal-safe, keeps errno).
void on_signal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (g_signal_pipe_write >= 0) {
    [[maybe_unused]] const ssize_t n = write(g_signal_pipe_write, &byte, 1);
  }
  errno = saved;
}

// Sets O_NONBLOCK on `fd`. Returns false on fcntl failure.
bool set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

// Makes sure descriptors 0, 1 and 2 are open (on /dev/null when closed), so pipes created later never
// land on them and get confused with the standard streams in a child.
void ensure_std_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0) continue;
    const int null_fd = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (null_fd >= 0 && null_fd != fd) {
      dup2(null_fd, fd);
      close(null_fd);
    }
  }
}

// Owns the self-pipe and the signal dispositions for the lifetime of run_job: installs on_signal for
// kHandledSignals and SIG_IGN for SIGPIPE; the destructor restores what was there before.
class SignalScope {
 public:
  SignalScope() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      error_ = fmt::format("cannot create the signal pipe: {}", std::strerror(errno));
      return;
    }
    read_fd_ = fds[0];
    g_signal_pipe_write = fds[1];
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    for (std::size_t i = 0; i < std::size(kHandledSignals); ++i) {
      sigaction(kHandledSignals[i], &action, &saved_[i]);
    }
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, &saved_pipe_);
  }
  ~SignalScope() {
    if (read_fd_ < 0) return;
    for (std::size_t i = 0; i < std::size(kHandledSignals); ++i)
      sigaction(kHandledSignals[i], &saved_[i], nullptr);
    sigaction(SIGPIPE, &saved_pipe_, nullptr);
    close(g_signal_pipe_write);
    g_signal_pipe_write = -1;
    close(read_fd_);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  // Empty when the scope is active; else why it could not be set up.
  const std::string& error() const { return error_; }
  // The read end of the self-pipe (poll it for POLLIN).
  int read_fd() const { return read_fd_; }
  // Reads every pending signal number from the self-pipe, in arrival order.
  std::vector<int> drain() {
    std::vector<int> signals;
    unsigned char buffer[64];
    for (;;) {
      const ssize_t n = read(read_fd_, buffer, sizeof(buffer));
      if (n > 0) {
        signals.insert(signals.end(), buffer, buffer + n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return signals;
    }
  }

 private:
  int read_fd_ = -1;
  std::string error_;
  struct sigaction saved_[std::size(kHandledSignals)]{};
  struct sigaction saved_pipe_ {};
};

// Launcher-side state of one rank.
struct Proc {
  pid_t pid = -1;
  int fds[2] = {-1, -1};                        // read ends of its stdout and stderr pipes (-1 once closed)
  std::optional<Clock::time_point> sigkill_at;  // when SIGKILL was sent to its group
};

// In the child after fork: joins a new process group, wires stdin/stdout/stderr, applies the
// confinement, restores default signal handling and the caller's mask, then execs. Never returns; exits
// 127 (not found) or 126 (other exec errors) after writing the reason to the rank's stderr (so it shows
// up in the relay).
[[noreturn]] void exec_child(char* const* argv, char* const* envp, int in_fd, int out_fd, int err_fd,
                             int pass_fd, pid_t launcher_pid, const sigset_t& mask,
                             const Confinement& confine, const RankSpec& rank) {
  setpgid(0, 0);
  dup2(err_fd, 2);
  if (rank.isolate) isolate_child(rank.own_dirs);
  confine_child(confine);
  end_with_parent(launcher_pid, SIGKILL, 126);  // a launcher killed outright takes the rank down with it
  if (in_fd >= 0) dup2(in_fd, 0);
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  if (pass_fd == 3)
    fcntl(3, F_SETFD, 0);  // keep it across exec
  else if (pass_fd >= 0)
    dup2(pass_fd, 3);  // the copy has no close-on-exec flag
  for (int sig : kHandledSignals) signal(sig, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  environ = const_cast<char**>(envp);
  execvp(argv[0], argv);
  const int err = errno;
  child_fail(fmt::format("tpsp-run: cannot execute '{}': {}\n", argv[0], std::strerror(err)),
             err == ENOENT ? 127 : 126);
}

// Sends `sig` to the process group of the rank whose leader is `pid`, and to the leader itself in case
// it moved to another group (setsid). Errors (nothing left to signal) are ignored.
void signal_rank(pid_t pid, int sig) {
  kill(-pid, sig);
  kill(pid, sig);
}

// Seconds between two time points, as a double.
double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

JobOutcome run_job(const JobSpec& spec, LineRelay& relay) {
  const auto t0 = Clock::now();
  JobOutcome outcome;
  outcome.ranks.resize(spec.ranks.size());
  for (std::size_t i = 0; i < spec.ranks.size(); ++i) outcome.ranks[i].rank = spec.ranks[i].rank;

  ensure_std_fds();
  SignalScope signals;
  if (!signals.error().empty()) {
    outcome.ending = Ending::kLaunchError;
    outcome.launch_error = signals.error();
    return outcome;
  }

  begin_adopting_strays();

  // Everything exec needs is prepared before fork.
  std::vector<char*> argv;
  for (const auto& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<std::vector<char*>> envps(spec.ranks.size());
  for (std::size_t i = 0; i < spec.ranks.size(); ++i) {
    for (const auto& item : spec.ranks[i].env) envps[i].push_back(const_cast<char*>(item.c_str()));
    envps[i].push_back(nullptr);
  }
  const int null_fd = spec.stdin_from_null ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;

  std::vector<Proc> procs(spec.ranks.size());
  bool stopping = false;
  Clock::time_point escalate_at{};
  int interrupts = 0;

  // Sends `sig` to the process group of every rank still running and arms the SIGKILL escalation.
  auto begin_stop = [&](int sig) {
    stopping = true;
    escalate_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(std::max(0.0, spec.grace_s)));
    for (std::size_t i = 0; i < procs.size(); ++i) {
      if (procs[i].pid <= 0 || outcome.ranks[i].finished) continue;
      signal_rank(procs[i].pid, sig);
      outcome.ranks[i].stop_signal = sig;
      outcome.ranks[i].running_at_stop = true;
    }
  };
  // The pids of the started ranks.
  auto rank_pids = [&]() {
    std::vector<pid_t> pids;
    for (const auto& p : procs) {
      if (p.pid > 0) pids.push_back(p.pid);
    }
    return pids;
  };
  // Sends SIGKILL to every rank still running that has not had one yet.
  auto escalate = [&]() {
    for (std::size_t i = 0; i < procs.size(); ++i) {
      if (procs[i].pid <= 0 || outcome.ranks[i].finished || procs[i].sigkill_at) continue;
      signal_rank(procs[i].pid, SIGKILL);
      procs[i].sigkill_at = Clock::now();
      outcome.ranks[i].escalated =
          outcome.ranks[i].stop_signal != 0 && outcome.ranks[i].stop_signal != SIGKILL;
      if (outcome.ranks[i].stop_signal == 0) outcome.ranks[i].running_at_stop = true;
      if (outcome.ranks[i].stop_signal == 0) outcome.ranks[i].stop_signal = SIGKILL;
    }
  };

  // Start the ranks. Handled signals stay blocked across fork so a child never runs our handler.
  sigset_t block, old_mask;
  sigemptyset(&block);
  for (int sig : kHandledSignals) sigaddset(&block, sig);
  sigprocmask(SIG_BLOCK, &block, &old_mask);
  const pid_t launcher_pid = getpid();
  for (std::size_t i = 0; i < procs.size(); ++i) {
    int out_pipe[2], err_pipe[2];
    if (pipe2(out_pipe, O_CLOEXEC) != 0) {
      outcome.launch_error =
          fmt::format("rank {}: pipe failed: {}", spec.ranks[i].rank, std::strerror(errno));
      break;
    }
    if (pipe2(err_pipe, O_CLOEXEC) != 0) {
      outcome.launch_error =
          fmt::format("rank {}: pipe failed: {}", spec.ranks[i].rank, std::strerror(errno));
      close(out_pipe[0]);
      close(out_pipe[1]);
      break;
    }
    Confinement confine = spec.confine;
    if (spec.ranks[i].uid >= 0) confine.uid = spec.ranks[i].uid;
    const pid_t pid = fork();
    if (pid == 0) {
      exec_child(argv.data(), envps[i].data(), null_fd, out_pipe[1], err_pipe[1], spec.ranks[i].pass_fd,
                 launcher_pid, old_mask, confine, spec.ranks[i]);
    }
    const int fork_errno = errno;
    close(out_pipe[1]);
    close(err_pipe[1]);
    if (pid < 0) {
      close(out_pipe[0]);
      close(err_pipe[0]);
      outcome.launch_error =
          fmt::format("rank {}: fork failed: {}", spec.ranks[i].rank, std::strerror(fork_errno));
      break;
    }
    // The rank holds its relay socket now: the launcher's copy would keep the socket open after the rank
    // ended, so the relay would not see it go and its peers would wait for it until their timeout.
    if (spec.ranks[i].pass_fd >= 0) close(spec.ranks[i].pass_fd);
    setpgid(pid, pid);  // also done by the child; whichever runs first wins, both agree
    procs[i].pid = pid;
    outcome.ranks[i].pid = pid;
    procs[i].fds[0] = out_pipe[0];
    procs[i].fds[1] = err_pipe[0];
    set_nonblocking(out_pipe[0]);
    set_nonblocking(err_pipe[0]);
    if (spec.verbose) {
      const std::string line = fmt::format("tpsp-run: started rank {} (pid {})\n", spec.ranks[i].rank, pid);
      write_all(2, line);
    }
  }
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (null_fd >= 0) close(null_fd);
  if (!outcome.launch_error.empty()) {
    outcome.ending = Ending::kLaunchError;
    begin_stop(SIGTERM);
  }

  const bool has_deadline = spec.timeout_s > 0;
  const Clock::time_point deadline = t0 + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(std::max(0.0, spec.timeout_s)));
  std::optional<Clock::time_point> drain_until;
  std::optional<Clock::time_point> stop_peers_at;  // a rank failed: stop the others then (kPeerLinger)
  std::vector<char> buffer(64 * 1024);

  for (;;) {
    // 1. Which ranks have ended? (WNOWAIT keeps the zombie, so its process group id cannot be reused
    //    while we kill what is left in the group.) Among ranks found failed in the same round, one killed
    //    by a signal is named first: a crash is the likelier cause of the others' errors.
    int first_failed = -1;
    for (std::size_t i = 0; i < procs.size(); ++i) {
      RankOutcome& r = outcome.ranks[i];
      if (procs[i].pid <= 0 || r.finished) continue;
      siginfo_t info{};
      const int rc = waitid(P_PID, static_cast<id_t>(procs[i].pid), &info, WEXITED | WNOHANG | WNOWAIT);
      if (rc == 0 && info.si_pid == 0) continue;  // still running
      if (rc != 0 && errno == EINTR) continue;    // look again next round
      r.finished = true;
      r.end_s = seconds_between(t0, Clock::now());
      if (rc != 0) {  // cannot happen for our own child; report it as a failure rather than hang
        r.exited = true;
        r.code = 255;
      } else {
        r.exited = info.si_code == CLD_EXITED;
        r.code = info.si_status;
      }
      kill(-procs[i].pid, SIGKILL);  // whatever the rank left running in its group
      const bool failed = !r.exited || r.code != 0;
      if (spec.verbose) {
        write_all(2, fmt::format("tpsp-run: rank {} {} after {:.2f} s\n", r.rank,
                                 r.exited ? fmt::format("exited with code {}", r.code)
                                          : fmt::format("was killed by signal {}", r.code),
                                 r.end_s));
      }
      if (failed && !stopping && outcome.ending == Ending::kAllSucceeded) {
        const bool better =
            first_failed < 0 || (!r.exited && outcome.ranks[static_cast<std::size_t>(first_failed)].exited);
        if (better) first_failed = static_cast<int>(i);
      }
    }
    if (first_failed >= 0) {
      outcome.ending = Ending::kRankFailed;
      outcome.failed_slot = first_failed;
      stop_peers_at = Clock::now() + kPeerLinger;
    }

    // 2. Deadlines: the linger after a failure, the job's time limit, SIGKILL escalation, giving up on
    //    unkillable ranks.
    const auto now = Clock::now();
    if (stop_peers_at && !stopping && now >= *stop_peers_at) begin_stop(SIGTERM);
    if (has_deadline && now >= deadline && !stopping && outcome.ending == Ending::kAllSucceeded) {
      outcome.ending = Ending::kTimedOut;
      begin_stop(SIGTERM);
    }
    if (stopping && now >= escalate_at) escalate();
    bool all_settled = true;
    for (std::size_t i = 0; i < procs.size(); ++i) {
      RankOutcome& r = outcome.ranks[i];
      if (procs[i].pid <= 0 || r.finished || r.unkillable) continue;
      if (procs[i].sigkill_at && now >= *procs[i].sigkill_at + kSigkillWait) {
        r.unkillable = true;
        continue;
      }
      all_settled = false;
    }

    // 3. Once every rank has ended, read what is left in the pipes, but not forever.
    bool pipes_open = false;
    for (const auto& p : procs) pipes_open = pipes_open || p.fds[0] >= 0 || p.fds[1] >= 0;
    if (all_settled && !drain_until) {
      // Whatever escaped a rank's group and still holds a pipe (or not) goes now.
      for (pid_t pid : kill_strays(rank_pids(), 2.0)) outcome.strays.push_back(pid);
      drain_until = Clock::now() + kDrainWait;
    }
    if (all_settled && (!pipes_open || now >= *drain_until)) break;

    // 4. Wait for output, a signal or the next deadline.
    std::vector<Clock::time_point> wakeups;
    if (has_deadline && !stopping) wakeups.push_back(deadline);
    if (stop_peers_at && !stopping) wakeups.push_back(*stop_peers_at);
    if (stopping) wakeups.push_back(escalate_at);
    for (const auto& p : procs) {
      if (p.sigkill_at) wakeups.push_back(*p.sigkill_at + kSigkillWait);
    }
    if (drain_until) wakeups.push_back(*drain_until);
    int wait_ms = kMaxPollMs;
    for (const auto& t : wakeups) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - now).count() + 1;
      wait_ms = std::clamp(static_cast<int>(std::min<long long>(ms, kMaxPollMs)), 0, wait_ms);
    }
    std::vector<pollfd> pfds;
    std::vector<std::pair<std::size_t, int>> owners;  // (slot, stream) for pfds[1..]
    pfds.push_back(pollfd{signals.read_fd(), POLLIN, 0});
    for (std::size_t i = 0; i < procs.size(); ++i) {
      for (int s = 0; s < 2; ++s) {
        if (procs[i].fds[s] < 0) continue;
        pfds.push_back(pollfd{procs[i].fds[s], POLLIN, 0});
        owners.emplace_back(i, s);
      }
    }
    if (poll(pfds.data(), pfds.size(), wait_ms) < 0 && errno != EINTR) {
      // Cannot wait for events (out of memory?): stop everything and keep checking at a slow pace.
      if (!stopping) begin_stop(SIGKILL);
      escalate();
      usleep(10000);
      continue;
    }

    // 5. Signals: SIGCHLD only wakes us; SIGINT/SIGTERM/SIGHUP are forwarded (a second one kills).
    for (int sig : signals.drain()) {
      if (sig == SIGCHLD) continue;
      ++interrupts;
      if (interrupts == 1 && !stopping) {
        if (outcome.ending == Ending::kAllSucceeded) {
          outcome.ending = Ending::kInterrupted;
          outcome.interrupt_signal = sig;
        }
        begin_stop(sig);
      } else {
        escalate();
      }
    }

    // 6. Relay output: one read per ready descriptor per round keeps the ranks fair.
    for (std::size_t k = 0; k < owners.size(); ++k) {
      if (pfds[k + 1].revents == 0) continue;
      auto [slot, s] = owners[k];
      int& fd = procs[slot].fds[s];
      const ssize_t n = read(fd, buffer.data(), buffer.size());
      if (n > 0) {
        relay.feed(slot, static_cast<Stream>(s),
                   std::string_view(buffer.data(), static_cast<std::size_t>(n)));
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        relay.finish(slot, static_cast<Stream>(s));
        close(fd);
        fd = -1;
      }
    }
  }

  // Pipes still held open by a stray process: relay what was read and let go.
  for (std::size_t i = 0; i < procs.size(); ++i) {
    for (int s = 0; s < 2; ++s) {
      if (procs[i].fds[s] < 0) continue;
      relay.finish(i, static_cast<Stream>(s));
      close(procs[i].fds[s]);
      procs[i].fds[s] = -1;
    }
  }
  for (pid_t pid : kill_strays(rank_pids(), 1.0)) outcome.strays.push_back(pid);
  end_adopting_strays();
  // Reap the zombies we kept (they are dead: this does not block).
  for (std::size_t i = 0; i < procs.size(); ++i) {
    if (procs[i].pid > 0 && outcome.ranks[i].finished) {
      int status = 0;
      while (waitpid(procs[i].pid, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  outcome.elapsed_s = seconds_between(t0, Clock::now());
  return outcome;
}

}  // namespace tpsp::run
