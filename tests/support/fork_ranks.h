// Test helper: run N ranks as forked child processes of the test, without the launcher.
// Each child gets RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE and a TPSP_STORE_DIR shared by the
// ranks of one launch (a fresh mkdtemp directory), runs the body, and exits 0, or 1 with the message
// of the exception it threw. The parent collects every rank's outcome with a deadline and SIGKILLs
// stragglers, so no test can hang.
#pragma once

#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tpsp::testing {

/// What happened to one forked rank.
struct RankResult {
  int rank = 0;
  bool ok = false;     ///< Exited with status 0.
  int exit_code = -1;  ///< Exit status, or -1 if killed by a signal.
  int signal = 0;      ///< Terminating signal, 0 if it exited.
  bool killed_at_deadline = false;
  std::string message;  ///< What the body threw (empty on success).
  double seconds = 0;   ///< Fork to exit, measured by the parent.
};

/// How to launch.
struct LaunchOptions {
  double deadline_s = 30;                  ///< Kill every rank still running after this (seconds).
  bool slurm_names = false;                ///< Set SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID instead.
  bool store_dir = true;                   ///< Set TPSP_STORE_DIR (else only `env` decides the store).
  std::map<std::string, std::string> env;  ///< Extra variables for every child.
};

/// Forks `world` ranks running body(rank); returns their outcomes in rank order.
std::vector<RankResult> run_ranks(int world, const std::function<void(int rank)>& body,
                                  const LaunchOptions& opts = {});

/// One line per rank ("rank 1: exit 1 after 0.52 s: <message>") for failure reports.
std::string summary(const std::vector<RankResult>& results);
/// True if every rank exited 0.
bool all_ok(const std::vector<RankResult>& results);

/// Throws std::runtime_error(msg) unless cond (for use inside a rank body).
inline void expect(bool cond, const std::string& msg) {
  if (!cond) throw std::runtime_error(msg);
}

/// Throws naming `what`, the actual and the expected value unless they are equal.
template <typename A, typename B>
void expect_eq(const A& actual, const B& expected, const std::string& what) {
  if (!(actual == expected)) {
    std::ostringstream os;
    os << what << ": got " << actual << ", expected " << expected;
    throw std::runtime_error(os.str());
  }
}

/// True if `s` contains `part`.
inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace tpsp::testing
