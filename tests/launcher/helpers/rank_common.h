// Shared bits of the launcher's test helper programs: read the rank from the environment, print lines
// that reach the launcher at once, sleep.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace tpsp::test {

// The integer value of environment variable `name`, or `fallback` when it is unset.
inline int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : fallback;
}

// This process's RANK (-1 when the launcher did not set it).
inline int my_rank() {
  return env_int("RANK", -1);
}

// Prints `line` plus a newline to stdout (err = false) or stderr and flushes, so the launcher sees it
// right away even though stdout is a pipe.
inline void say(const std::string& line, bool err = false) {
  std::FILE* stream = err ? stderr : stdout;
  std::fputs(line.c_str(), stream);
  std::fputc('\n', stream);
  std::fflush(stream);
}

// Sleeps for `seconds` (fractions allowed).
inline void sleep_s(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

}  // namespace tpsp::test
