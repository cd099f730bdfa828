#include "checkers/sandbox/confine.h"

#include <fmt/format.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

namespace fs = std::filesystem;

namespace tpsp::checkers::sandbox {

bool hand_over(const std::string& dir, long uid) {
  return ::chown(dir.c_str(), static_cast<uid_t>(uid), static_cast<gid_t>(uid)) == 0 &&
         ::chmod(dir.c_str(), 0700) == 0;
}

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

}  // namespace tpsp::checkers::sandbox
