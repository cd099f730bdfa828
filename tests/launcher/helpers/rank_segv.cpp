// Test helper: rank 1 prints two lines and dies of a real segmentation fault; the other ranks sleep 60 s.
#include <signal.h>

#include <cstdint>

#include "rank_common.h"

// Under AddressSanitizer, let SIGSEGV kill the process instead of turning it into an ASan report.
extern "C" const char* __asan_default_options() {
  return "handle_segv=0";
}

int main() {
  using namespace tpsp::test;
  const int rank = my_rank();
  if (rank != 1) {
    say("rank " + std::to_string(rank) + " sleeping 60 s");
    sleep_s(60);
    return 0;
  }
  sleep_s(0.2);
  say("rank 1 is about to crash");
  say("rank 1 writes through a bad pointer");
  signal(SIGSEGV, SIG_DFL);
  volatile std::uintptr_t address = 16;  // opaque to the compiler: a real invalid store at run time
  *reinterpret_cast<volatile int*>(address) = 42;
  return 0;
}
