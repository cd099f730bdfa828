#include "tests/support/ranks.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <thread>

namespace tpsp::testing {

std::vector<RankResult> run_ranks(int world_size, const std::function<void(int rank)>& fn, double timeout_s) {
  char tmpl[] = "/tmp/tpsp-test-XXXXXX";
  const std::string store = mkdtemp(tmpl);
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  for (int r = 0; r < world_size; ++r) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world_size).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(world_size).c_str(), 1);
      setenv("TPSP_STORE_DIR", store.c_str(), 1);
      int code = 0;
      std::string msg;
      try {
        fn(r);
      } catch (const std::exception& e) {
        msg = e.what();
        code = 1;
      } catch (...) {
        msg = "unknown exception";
        code = 1;
      }
      if (!msg.empty()) (void)!write(fds[1], msg.data(), msg.size());
      close(fds[1]);
      _exit(code);
    }
    close(fds[1]);
    pids.push_back(pid);
    pipes.push_back(fds[0]);
  }
  std::vector<RankResult> results(static_cast<std::size_t>(world_size));
  std::vector<bool> done(static_cast<std::size_t>(world_size), false);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int remaining = world_size;
  while (remaining > 0 && std::chrono::steady_clock::now() < deadline) {
    for (int r = 0; r < world_size; ++r) {
      if (done[r]) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        done[r] = true;
        --remaining;
        results[r].code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
    }
    if (remaining > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < world_size; ++r) {
    if (!done[r]) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], nullptr, 0);
      results[r] = {-9, "timed out after " + std::to_string(timeout_s) + " s"};
      continue;
    }
    char buf[4096];
    ssize_t n;
    while ((n = read(pipes[r], buf, sizeof buf)) > 0)
      results[r].message.append(buf, static_cast<std::size_t>(n));
  }
  for (int fd : pipes) close(fd);
  std::error_code ec;
  std::filesystem::remove_all(store, ec);
  return results;
}

std::string failures(const std::vector<RankResult>& results) {
  std::string out;
  for (std::size_t r = 0; r < results.size(); ++r)
    if (results[r].code != 0)
      out += "rank " + std::to_string(r) + " (code " + std::to_string(results[r].code) +
             "): " + results[r].message + "\n";
  return out;
}

void expect(bool cond, const std::string& what) {
  if (!cond) throw std::runtime_error(what);
}

}  // namespace tpsp::testing
