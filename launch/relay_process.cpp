#include "launch/relay_process.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "launch/child.h"
#include "launch/relay_server.h"

namespace tpsp::run {

RelayProcess::~RelayProcess() {
  finish();
}

bool RelayProcess::start(int world, const std::string& log, const InputServer& inputs) {
  std::vector<int> relay_ends;
  const auto fail = [&] {
    const int e = errno;
    for (int fd : relay_ends) ::close(fd);
    release_rank_ends();
    errno = e;
    return false;
  };
  for (int r = 0; r < world; ++r) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return fail();
    relay_ends.push_back(sv[0]);
    rank_ends_.push_back(sv[1]);
  }
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    // The relay ends with the process that started it, even one killed by SIGKILL: its ranks then see
    // their sockets close instead of waiting for a relay nobody will stop.
    end_with_parent(parent, SIGKILL, 1);
    for (int fd : rank_ends_) ::close(fd);
    serve_relay(relay_ends, log, inputs);
    ::_exit(0);
  }
  if (pid_ < 0) return fail();
  for (int fd : relay_ends) ::close(fd);
  return true;
}

int RelayProcess::rank_end(int r) const {
  return r >= 0 && r < static_cast<int>(rank_ends_.size()) ? rank_ends_[static_cast<std::size_t>(r)] : -1;
}

void RelayProcess::release_rank_ends() {
  for (int fd : rank_ends_) ::close(fd);
  rank_ends_.clear();
}

void RelayProcess::finish() {
  release_rank_ends();
  for (int i = 0; pid_ > 0 && i < 100; ++i) {
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    ::usleep(10000);
  }
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
}

}  // namespace tpsp::run
