// tpsp-run: killing orphans adopted by the launcher (see strays.h).
#include "launch/strays.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <dirent.h>
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace tpsp::run {

bool begin_adopting_strays() {
#ifdef __linux__
  return prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
#else
  return false;
#endif
}

void end_adopting_strays() {
#ifdef __linux__
  prctl(PR_SET_CHILD_SUBREAPER, 0);
#endif
}

namespace {

#ifdef __linux__
// What /proc/<pid>/stat says about a process.
struct ProcStat {
  char state = 0;  // 'R', 'S', 'Z' (zombie), ...
  pid_t ppid = -1;
  pid_t pgrp = -1;
};

// Reads /proc/<pid>/stat; false when the process is gone or the file is unreadable.
bool read_stat(pid_t pid, ProcStat* out) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!stat || !std::getline(stat, line)) return false;
  // "pid (comm) state ppid pgrp ...": comm may contain spaces and parentheses, so parse after the last ')'.
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  long ppid = -1, pgrp = -1;
  if (std::sscanf(line.c_str() + close + 1, " %c %ld %ld", &out->state, &ppid, &pgrp) != 3) return false;
  out->ppid = static_cast<pid_t>(ppid);
  out->pgrp = static_cast<pid_t>(pgrp);
  return true;
}

// A child of this process that is not a rank.
struct Adopted {
  pid_t pid = -1;
  bool escaped = false;  // alive and outside every rank's process group
};

// This process's children that are not in `ranks`.
std::vector<Adopted> adopted_children(const std::vector<pid_t>& ranks) {
  std::vector<Adopted> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  const pid_t self = getpid();
  while (const dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long value = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || value <= 0) continue;
    const auto pid = static_cast<pid_t>(value);
    if (std::find(ranks.begin(), ranks.end(), pid) != ranks.end()) continue;
    ProcStat st;
    if (!read_stat(pid, &st) || st.ppid != self) continue;
    const bool in_rank_group = std::find(ranks.begin(), ranks.end(), st.pgrp) != ranks.end();
    found.push_back(Adopted{pid, st.state != 'Z' && !in_rank_group});
  }
  closedir(proc);
  return found;
}
#endif

}  // namespace

std::vector<pid_t> kill_strays(const std::vector<pid_t>& ranks, double max_wait_s) {
  std::vector<pid_t> killed;
#ifdef __linux__
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                             std::chrono::duration<double>(max_wait_s));
  std::vector<pid_t> pending;  // killed, not yet reaped
  for (;;) {
    for (const Adopted& child : adopted_children(ranks)) {
      if (std::find(pending.begin(), pending.end(), child.pid) != pending.end()) continue;
      kill(child.pid, SIGKILL);
      pending.push_back(child.pid);
      // Members of a rank's group were already killed with it; only escapees are worth a report.
      if (child.escaped && std::find(killed.begin(), killed.end(), child.pid) == killed.end()) {
        killed.push_back(child.pid);
      }
    }
    // Reap what has died; a reaped pid may only come back as a new stray if it is reused.
    std::erase_if(pending, [](pid_t pid) {
      int status = 0;
      const pid_t rc = waitpid(pid, &status, WNOHANG);
      return rc == pid || (rc < 0 && errno == ECHILD);
    });
    if (pending.empty() && adopted_children(ranks).empty()) break;
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
#else
  (void)ranks;
  (void)max_wait_s;
#endif
  return killed;
}

}  // namespace tpsp::run
