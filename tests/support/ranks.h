// Runs a function as N ranks in forked processes, for multi-process tests without the launcher.
// Each child gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and a fresh TPSP_STORE_DIR (the
// launcher's environment contract), runs the function, and reports an exception's message back.
// The parent waits with a deadline and kills every child that is still running after it.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace tpsp::testing {

/// What one rank did: exit code (or −signal), and the message of the exception it threw ("" if none).
struct RankResult {
  int code = 0;
  std::string message;
};

/// Forks `world_size` ranks running fn(rank). A rank that throws exits 1 with the exception's
/// message; one still running after timeout_s is killed (code −9, message "timed out").
std::vector<RankResult> run_ranks(int world_size, const std::function<void(int rank)>& fn,
                                  double timeout_s = 60);

/// "" when every rank exited 0; otherwise one line per failing rank: "rank 1: <message>".
std::string failures(const std::vector<RankResult>& results);

/// Throws std::runtime_error(what) unless cond (assertions inside a rank).
void expect(bool cond, const std::string& what);

}  // namespace tpsp::testing
