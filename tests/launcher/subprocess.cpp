// Test support: child processes with captured output and deadlines (see subprocess.h).
#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

extern char** environ;

namespace tpsp::test {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {

// True for variables the tests must not inherit from whoever runs ctest.
bool scrubbed(const std::string& name) {
  return name.rfind("SLURM_", 0) == 0 || name == "OPENBLAS_NUM_THREADS" || name == "TPSP_STORE_DIR" ||
         name == "MASTER_ADDR" || name == "MASTER_PORT";
}

}  // namespace

Child::Child(const std::vector<std::string>& argv, const EnvChanges& env) {
  std::vector<std::string> env_items;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string item(*e);
    const std::string name = item.substr(0, item.find('='));
    if (scrubbed(name) || env.count(name) != 0) continue;
    env_items.push_back(item);
  }
  for (const auto& [name, value] : env) {
    if (value) env_items.push_back(name + "=" + *value);
  }
  std::vector<char*> envp, args;
  for (auto& item : env_items) envp.push_back(item.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  start_ = now_s();
  const int rc = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  fds_[0] = out_pipe[0];
  fds_[1] = err_pipe[0];
  if (rc != 0) {
    close(fds_[0]);
    close(fds_[1]);
    throw std::runtime_error(std::string("posix_spawn ") + argv[0] + ": " + std::strerror(rc));
  }
}

Child::~Child() {
  if (!reaped_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

bool Child::pump(int ms) {
  pollfd pfds[2];
  int n = 0;
  int which[2];
  for (int s = 0; s < 2; ++s) {
    if (fds_[s] < 0) continue;
    pfds[n] = pollfd{fds_[s], POLLIN, 0};
    which[n++] = s;
  }
  if (n == 0) return false;
  if (poll(pfds, static_cast<nfds_t>(n), ms) <= 0) return true;
  char buffer[65536];
  for (int k = 0; k < n; ++k) {
    if (pfds[k].revents == 0) continue;
    const int s = which[k];
    const ssize_t got = read(fds_[s], buffer, sizeof(buffer));
    if (got > 0) {
      (s == 0 ? out_ : err_).append(buffer, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      close(fds_[s]);
      fds_[s] = -1;
    }
  }
  return fds_[0] >= 0 || fds_[1] >= 0;
}

bool Child::wait_for_output(const std::string& needle, int count, double timeout_s) {
  const double deadline = now_s() + timeout_s;
  for (;;) {
    const std::string all = out_ + err_;
    int found = 0;
    for (std::size_t pos = all.find(needle); pos != std::string::npos; pos = all.find(needle, pos + 1))
      ++found;
    if (found >= count) return true;
    if (now_s() >= deadline) return false;
    if (!pump(50) && now_s() >= deadline) return false;
  }
}

RunResult Child::wait(double timeout_s) {
  RunResult result;
  const double deadline = start_ + timeout_s;
  int status = 0;
  for (;;) {
    const bool open = pump(20);
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      reaped_ = true;
      result.seconds = now_s() - start_;
      // Collect what is still in the pipes (bounded: grandchildren holding them must not hang us).
      const double drain_until = now_s() + 2.0;
      while (pump(20) && now_s() < drain_until) {
      }
      break;
    }
    (void)open;
    if (now_s() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      reaped_ = true;
      result.timed_out = true;
      result.seconds = now_s() - start_;
      break;
    }
  }
  result.exited = WIFEXITED(status);
  result.code = WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status);
  result.out = out_;
  result.err = err_;
  return result;
}

RunResult run(const std::vector<std::string>& argv, const EnvChanges& env, double timeout_s) {
  Child child(argv, env);
  return child.wait(timeout_s);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

bool process_alive(pid_t pid) {
#ifdef __linux__
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string line;
  std::getline(stat, line);
  const std::size_t close_paren = line.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= line.size()) return false;
  const char state = line[close_paren + 2];
  return state != 'Z' && state != 'X';
#else
  return kill(pid, 0) == 0;
#endif
}

std::string make_temp_dir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ =
      std::string(base != nullptr && base[0] != '\0' ? base : "/tmp") + "/tpsp-launcher-test.XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return templ;
}

}  // namespace tpsp::test
