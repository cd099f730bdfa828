// Test helper: prints the environment the launcher gave this rank, one KEY=VALUE per line, then sleeps
// argv[1] seconds (default 0) so that launches can overlap.
#include <sys/stat.h>

#include "rank_common.h"

int main(int argc, char** argv) {
  using namespace tpsp::test;
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TPSP_STORE_DIR",
                           "OPENBLAS_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT"}) {
    const char* value = std::getenv(name);
    say(std::string(name) + "=" + (value != nullptr ? value : "<unset>"));
  }
  struct stat st {};
  const char* store = std::getenv("TPSP_STORE_DIR");
  const bool exists = store != nullptr && stat(store, &st) == 0 && S_ISDIR(st.st_mode);
  say(std::string("STORE_EXISTS=") + (exists ? "1" : "0"));
  if (argc > 1) sleep_s(std::atof(argv[1]));
  say("DONE");
  return 0;
}
