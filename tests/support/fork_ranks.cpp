#include "tests/support/fork_ranks.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iomanip>

namespace tpsp::testing {

namespace {

/// Variables of the parent that would change how a child rendezvouses or behaves.
const char* const kScrubbed[] = {
    "RANK",         "WORLD_SIZE",       "LOCAL_RANK",        "LOCAL_WORLD_SIZE",
    "SLURM_PROCID", "SLURM_NTASKS",     "SLURM_LOCALID",     "MASTER_ADDR",
    "MASTER_PORT",  "TPSP_STORE_DIR",   "TPSP_COMM_TIMEOUT", "TPSP_COMM_FINGERPRINT",
    "TPSP_LINK",    "TPSP_GLOO_IFNAME", "TPSP_GLOO_HOSTNAME"};

[[noreturn]] void child_main(int rank, int world, int fd, const std::string& store,
                             const std::function<void(int)>& body, const LaunchOptions& opts) {
  for (const char* v : kScrubbed) ::unsetenv(v);
  const std::string r = std::to_string(rank), w = std::to_string(world);
  ::setenv(opts.slurm_names ? "SLURM_PROCID" : "RANK", r.c_str(), 1);
  ::setenv(opts.slurm_names ? "SLURM_NTASKS" : "WORLD_SIZE", w.c_str(), 1);
  ::setenv(opts.slurm_names ? "SLURM_LOCALID" : "LOCAL_RANK", r.c_str(), 1);
  if (!opts.slurm_names) ::setenv("LOCAL_WORLD_SIZE", w.c_str(), 1);
  if (opts.store_dir) ::setenv("TPSP_STORE_DIR", store.c_str(), 1);
  for (const auto& [k, v] : opts.env) ::setenv(k.c_str(), v.c_str(), 1);
  int code = 0;
  std::string msg;
  try {
    body(rank);
  } catch (const std::exception& e) {
    msg = e.what();
    code = 1;
  } catch (...) {
    msg = "unknown exception";
    code = 1;
  }
  if (!msg.empty()) {
    const char* p = msg.data();
    std::size_t n = msg.size();
    while (n > 0) {
      const ssize_t k = ::write(fd, p, n);
      if (k <= 0) break;
      p += k;
      n -= static_cast<std::size_t>(k);
    }
  }
  ::close(fd);
  std::fflush(nullptr);
  ::_exit(code);
}

}  // namespace

std::vector<RankResult> run_ranks(int world, const std::function<void(int)>& body,
                                  const LaunchOptions& opts) {
  char tmpl[] = "/tmp/tpsp-comm-test-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed: " + std::string(std::strerror(errno)));
  const std::string store = tmpl;
  std::fflush(nullptr);

  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  std::vector<RankResult> res(static_cast<std::size_t>(world));
  std::vector<pid_t> pids(static_cast<std::size_t>(world), -1);
  std::vector<int> fds(static_cast<std::size_t>(world), -1);
  for (int r = 0; r < world; ++r) {
    int p[2];
    if (::pipe(p) != 0) throw std::runtime_error("pipe failed");
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::close(p[0]);
      for (int q = 0; q < r; ++q) ::close(fds[static_cast<std::size_t>(q)]);
      child_main(r, world, p[1], store, body, opts);
    }
    ::close(p[1]);
    pids[static_cast<std::size_t>(r)] = pid;
    fds[static_cast<std::size_t>(r)] = p[0];
    res[static_cast<std::size_t>(r)].rank = r;
  }

  const auto deadline =
      t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(opts.deadline_s));
  int running = world;
  bool killed = false;
  while (running > 0) {
    // Drain whatever the children wrote (messages are small; this keeps pipes from filling).
    std::vector<pollfd> pfds;
    for (int fd : fds)
      if (fd >= 0) pfds.push_back({fd, POLLIN, 0});
    ::poll(pfds.data(), pfds.size(), 5);
    for (int r = 0; r < world; ++r) {
      auto& fd = fds[static_cast<std::size_t>(r)];
      if (fd < 0) continue;
      pollfd one{fd, POLLIN, 0};
      if (::poll(&one, 1, 0) > 0) {
        char buf[4096];
        const ssize_t k = ::read(fd, buf, sizeof(buf));
        if (k > 0) {
          res[static_cast<std::size_t>(r)].message.append(buf, static_cast<std::size_t>(k));
        } else {
          ::close(fd);
          fd = -1;
        }
      }
    }
    for (int r = 0; r < world; ++r) {
      auto& pid = pids[static_cast<std::size_t>(r)];
      if (pid < 0) continue;
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) != pid) continue;
      auto& out = res[static_cast<std::size_t>(r)];
      out.seconds = std::chrono::duration<double>(clock::now() - t0).count();
      if (WIFEXITED(status)) {
        out.exit_code = WEXITSTATUS(status);
        out.ok = out.exit_code == 0;
      } else if (WIFSIGNALED(status)) {
        out.signal = WTERMSIG(status);
      }
      pid = -1;
      --running;
    }
    if (!killed && running > 0 && clock::now() > deadline) {
      for (int r = 0; r < world; ++r) {
        if (pids[static_cast<std::size_t>(r)] < 0) continue;
        ::kill(pids[static_cast<std::size_t>(r)], SIGKILL);
        res[static_cast<std::size_t>(r)].killed_at_deadline = true;
      }
      killed = true;
    }
  }
  for (int r = 0; r < world; ++r) {  // rest of the messages
    auto& fd = fds[static_cast<std::size_t>(r)];
    if (fd < 0) continue;
    char buf[4096];
    ssize_t k;
    while ((k = ::read(fd, buf, sizeof(buf))) > 0)
      res[static_cast<std::size_t>(r)].message.append(buf, static_cast<std::size_t>(k));
    ::close(fd);
  }
  std::error_code ec;
  std::filesystem::remove_all(store, ec);
  return res;
}

std::string summary(const std::vector<RankResult>& results) {
  std::ostringstream os;
  for (const auto& r : results) {
    os << "rank " << r.rank << ": ";
    if (r.killed_at_deadline)
      os << "KILLED at the deadline";
    else if (r.signal)
      os << "signal " << r.signal;
    else
      os << "exit " << r.exit_code;
    os << " after " << std::fixed << std::setprecision(2) << r.seconds << " s";
    if (!r.message.empty()) os << ": " << r.message;
    os << '\n';
  }
  return os.str();
}

bool all_ok(const std::vector<RankResult>& results) {
  for (const auto& r : results)
    if (!r.ok) return false;
  return true;
}

}  // namespace tpsp::testing
