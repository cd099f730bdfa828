// Test helper for stopping and signal forwarding. Usage: rank_sleep SECONDS [OPTION...]
//   grandchild       fork a child that sleeps too (it must not outlive the job)
//   escape           fork a child that leaves the rank's process group (setsid) and sleeps too
//   ignore-term=R    rank R ignores SIGTERM (the launcher has to escalate to SIGKILL)
//   exit=R:CODE      rank R exits with CODE after 0.3 s instead of sleeping
// Each rank prints "ready pid=<pid> [grandchild=<pid>] store=<TPSP_STORE_DIR>" and then sleeps.
#include <signal.h>
#include <sys/types.h>

#include <cstring>

#include "rank_common.h"

int main(int argc, char** argv) {
  using namespace tpsp::test;
  if (argc < 2) return 100;
  const double seconds = std::atof(argv[1]);
  const int rank = my_rank();
  bool grandchild = false, escape = false;
  int exit_rank = -1, exit_code = 0;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "grandchild") == 0) grandchild = true;
    if (std::strcmp(argv[i], "escape") == 0) escape = true;
    if (std::strncmp(argv[i], "ignore-term=", 12) == 0 && std::atoi(argv[i] + 12) == rank) {
      signal(SIGTERM, SIG_IGN);
    }
    if (std::strncmp(argv[i], "exit=", 5) == 0 &&
        std::sscanf(argv[i] + 5, "%d:%d", &exit_rank, &exit_code) != 2) {
      return 100;
    }
  }
  std::string line = "ready pid=" + std::to_string(getpid());
  if (grandchild) {
    const pid_t child = fork();
    if (child == 0) {
      sleep_s(seconds);
      _exit(0);
    }
    line += " grandchild=" + std::to_string(child);
  }
  if (escape) {
    const pid_t child = fork();
    if (child == 0) {
      setsid();
      sleep_s(seconds);
      _exit(0);
    }
    line += " escaped=" + std::to_string(child);
  }
  const char* store = std::getenv("TPSP_STORE_DIR");
  line += std::string(" store=") + (store != nullptr ? store : "<unset>");
  say(line);
  if (rank == exit_rank) {
    sleep_s(0.3);
    say("rank " + std::to_string(rank) + " exits with code " + std::to_string(exit_code));
    return exit_code;
  }
  sleep_s(seconds);
  return 0;
}
