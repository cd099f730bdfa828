// Test support: start a command (the launcher) with a controlled environment, capture its stdout and
// stderr, and wait for it with a deadline, so that no launcher test can hang.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tpsp::test {

// How a finished (or abandoned) child ended.
struct RunResult {
  bool exited = false;     // ended by exit(); else by a signal
  int code = -1;           // exit code, or the signal number when !exited
  bool timed_out = false;  // the deadline passed; the child was SIGKILLed
  double seconds = 0.0;    // wall time from start to end
  std::string out;         // everything it wrote to stdout
  std::string err;         // everything it wrote to stderr
};

// Environment changes for a child: a value sets the variable, nullopt removes it.
using EnvChanges = std::map<std::string, std::optional<std::string>>;

// A running child process with captured output.
class Child {
 public:
  // Starts argv[0] (a path) with this process's environment, minus the variables that would change the
  // launcher's behaviour (SLURM_*, OPENBLAS_NUM_THREADS, TPSP_STORE_DIR, MASTER_ADDR, MASTER_PORT),
  // plus `env`. Throws std::runtime_error when it cannot be started.
  Child(const std::vector<std::string>& argv, const EnvChanges& env = {});
  ~Child();  // SIGKILLs and reaps the child if still running
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }

  // Reads output until stdout+stderr contain `needle` `count` times or `timeout_s` seconds pass.
  // Returns whether it was found.
  bool wait_for_output(const std::string& needle, int count, double timeout_s);

  // Reads all output until the child exits; after `timeout_s` seconds it is SIGKILLed and the result
  // says timed_out.
  RunResult wait(double timeout_s);

  // Output captured so far.
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  // Waits up to `ms` milliseconds for output and reads what is there. Returns false when both pipes
  // have reached end of file.
  bool pump(int ms);

  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};
  std::string out_, err_;
  double start_ = 0.0;
  bool reaped_ = false;
};

// Starts a child and waits for it (see Child).
RunResult run(const std::vector<std::string>& argv, const EnvChanges& env = {}, double timeout_s = 20.0);

// Seconds on a monotonic clock.
double now_s();

// The lines of `text` (without newlines).
std::vector<std::string> split_lines(const std::string& text);

// True while process `pid` exists and is not a zombie (reads /proc on Linux; kill(pid, 0) elsewhere).
bool process_alive(pid_t pid);

// A fresh empty directory under $TMPDIR or /tmp for one test (the test removes it).
std::string make_temp_dir();

}  // namespace tpsp::test
