// Test helper: rank 1 prints a line and then spins forever (a hung rank); the others exit 0 at once.
#include "rank_common.h"

int main() {
  using namespace tpsp::test;
  const int rank = my_rank();
  if (rank != 1) {
    say("rank " + std::to_string(rank) + " done");
    return 0;
  }
  say("rank 1 enters an endless loop");
  volatile unsigned long spin = 0;
  for (;;) {
    spin = spin + 1;
    if ((spin & 0xfffff) == 0) sleep_s(0.001);  // hung, but not hogging the shared cores
  }
}
