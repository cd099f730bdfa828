// What a rank's process does between fork and exec (see child.h).
#include "launch/child.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <fmt/format.h>

#include <cstring>

namespace tpsp::run {

// Writes `message` to fd 2 and ends the child with `code` (between fork and exec: no stdio, no exit
// handlers).
[[noreturn]] void child_fail(const std::string& message, int code) {
  [[maybe_unused]] const ssize_t n = write(2, message.data(), message.size());
  _exit(code);
}

// In the child after fork, as root: namespaces of the rank's own (RankSpec::isolate). Ends the child with
// 126 when one cannot be made.
void isolate_child(const std::vector<std::string>& own_dirs) {
  auto check = [](bool ok, const std::string& what) {
    if (!ok)
      child_fail(fmt::format("tpsp-run: cannot isolate the rank ({}): {}\n", what, std::strerror(errno)),
                 126);
  };
  check(unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC) == 0, "unshare");
  // No setuid program it may reach (the system's su, mount, ...) can raise its rights again.
  check(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "no new privileges");
  check(mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0, "making / private");
  for (const char* dir : {"/tmp", "/dev/shm"})
    if (access(dir, F_OK) == 0)
      check(mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777") == 0,
            std::string("a tmpfs on ") + dir);
  for (std::size_t i = 0; i < own_dirs.size(); ++i) {
    const std::string& own = own_dirs[i];
    const std::size_t slash = own.find_last_of('/');
    if (slash == std::string::npos || slash == 0) continue;
    const std::string parent = own.substr(0, slash), stage = "/tmp/.own" + std::to_string(i);
    check(
        mkdir(stage.c_str(), 0700) == 0 && mount(own.c_str(), stage.c_str(), nullptr, MS_BIND, nullptr) == 0,
        "keeping " + own);
    check(mount("tmpfs", parent.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0711") == 0,
          "hiding the rest of " + parent);
    check(mkdir(own.c_str(), 0700) == 0 &&
              mount(stage.c_str(), own.c_str(), nullptr, MS_BIND, nullptr) == 0 &&
              umount2(stage.c_str(), MNT_DETACH) == 0 && rmdir(stage.c_str()) == 0,
          "showing " + own);
  }
}

// In the child after fork: applies `c` (limits first, then the identity: a uid change clears the
// parent-death signal, which is therefore set after it). Ends the child with 126 when one cannot be applied.
void confine_child(const Confinement& c) {
  auto limit = [](int resource, unsigned long long value, const char* name) {
    if (value == 0) return;
    const rlimit lim{static_cast<rlim_t>(value), static_cast<rlim_t>(value)};
    if (setrlimit(resource, &lim) != 0)
      child_fail(fmt::format("tpsp-run: cannot set {} to {}: {}\n", name, value, std::strerror(errno)), 126);
  };
  limit(RLIMIT_AS, c.memory_bytes, "RLIMIT_AS");
  limit(RLIMIT_CPU, c.cpu_seconds, "RLIMIT_CPU");
  limit(RLIMIT_FSIZE, c.file_bytes, "RLIMIT_FSIZE");
  limit(RLIMIT_NPROC, c.processes, "RLIMIT_NPROC");
  if (c.uid < 0) return;
  const rlimit no_core{0, 0};  // a confined rank leaves no core file
  setrlimit(RLIMIT_CORE, &no_core);
  const auto id = static_cast<uid_t>(c.uid);
  if (setgroups(0, nullptr) != 0 || setgid(static_cast<gid_t>(id)) != 0 || setuid(id) != 0)
    child_fail(fmt::format("tpsp-run: cannot run as uid {}: {}\n", c.uid, std::strerror(errno)), 126);
}

void end_with_parent(pid_t parent, int sig, int exit_code) {
#ifdef __linux__
  ::prctl(PR_SET_PDEATHSIG, sig);
  if (::getppid() != parent) ::_exit(exit_code);  // it died before the request: end now
#else
  (void)parent, (void)sig, (void)exit_code;
#endif
}

}  // namespace tpsp::run
