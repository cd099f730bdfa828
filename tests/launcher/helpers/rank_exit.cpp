// Test helper: rank argv[1] prints a few lines and exits with code argv[2]; every other rank says it is
// sleeping and sleeps 60 s (the launcher must stop it long before that). argv[1] = -1: EVERY rank fails
// with code argv[2], rank r after 0.2 + 0.1·r s (the same error met by all ranks, a little apart).
#include "rank_common.h"

int main(int argc, char** argv) {
  using namespace tpsp::test;
  if (argc < 3) return 100;
  const int failing = std::atoi(argv[1]);
  const int code = std::atoi(argv[2]);
  const int rank = my_rank();
  if (failing == -1) {
    sleep_s(0.2 + 0.1 * rank);
    say("rank " + std::to_string(rank) + " raised the same error", true);
    return code;
  }
  if (rank == failing) {
    sleep_s(0.2);  // let the others start sleeping first
    for (int i = 0; i < 30; ++i) say("working line " + std::to_string(i));
    say("about to fail", true);
    say("last words of rank " + std::to_string(rank));
    return code;
  }
  say("rank " + std::to_string(rank) + " sleeping 60 s");
  sleep_s(60);
  return 0;
}
