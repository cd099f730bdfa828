// Test helper: prints argv[1] lines "r=<rank> i=<i> <payload>" to stdout (every 10th line to stderr),
// each line in several small write() calls, so a launcher that relays bytes instead of lines would
// interleave ranks mid-line.
#include <unistd.h>

#include "rank_common.h"

int main(int argc, char** argv) {
  using namespace tpsp::test;
  const int count = argc > 1 ? std::atoi(argv[1]) : 1000;
  const int rank = my_rank();
  for (int i = 0; i < count; ++i) {
    const int fd = i % 10 == 9 ? 2 : 1;
    const std::string line = "r=" + std::to_string(rank) + " i=" + std::to_string(i) + " " +
                             std::string(40 + i % 50, static_cast<char>('a' + rank)) + "\n";
    // Three pieces per line.
    const std::size_t a = line.size() / 3, b = 2 * line.size() / 3;
    for (auto [from, to] : {std::pair{std::size_t{0}, a}, std::pair{a, b}, std::pair{b, line.size()}}) {
      if (write(fd, line.data() + from, to - from) < 0) return 1;
    }
  }
  return 0;
}
