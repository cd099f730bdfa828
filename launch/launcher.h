// tpsp-run: process management. Starts the ranks (fork + exec, each in its own process group, output
// through pipes), relays their output, watches them, and tears the whole job down when one rank fails,
// when the wall-clock limit expires or when the launcher is interrupted. Everything runs in one thread
// around one poll() loop; signals reach the loop through a self-pipe.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "launch/output.h"

namespace tpsp::run {

// One process to start.
struct RankSpec {
  int rank = 0;                  // shown in the "[rank R]" prefix and the summary
  std::vector<std::string> env;  // its complete environment, "KEY=VALUE"
  int pass_fd = -1;              // a descriptor the rank gets as its fd 3 (a relay socket), or -1; run_job
                                 // closes it once the rank is started (the rank holds the only copy)
  long uid = -1;                 // a confined rank's own uid (overrides JobSpec::confine.uid), or -1
  // With `isolate` (root only): the rank gets mount, network and IPC namespaces of its own before it
  // starts (and no new privileges: a setuid program does not raise them): a private /tmp and /dev/shm,
  // no network, and in the parent of each of `own_dirs` only that directory visible (its siblings, the
  // other ranks' folders, hidden under an empty tmpfs).
  bool isolate = false;
  std::vector<std::string> own_dirs = {};
};

// What each rank is confined to (./grade's confined runs, never tpsp-run's own). Applied in the child
// between fork and exec, so that no learner code runs before it. Every zero leaves that limit as it is.
struct Confinement {
  long uid = -1;                        // run as this uid and gid, no supplementary groups (the launcher
                                        // must be root); -1 keeps the launcher's identity
  unsigned long long memory_bytes = 0;  // RLIMIT_AS of each process, bytes
  unsigned long long cpu_seconds = 0;   // RLIMIT_CPU of each process, seconds (SIGXCPU, then SIGKILL)
  unsigned long long file_bytes = 0;    // RLIMIT_FSIZE: the largest file a rank may write, bytes (SIGXFSZ)
  unsigned long long processes = 0;     // RLIMIT_NPROC: processes and threads of the uid (needs uid)
  bool namespaces = true;               // fresh mount, network and IPC namespaces for the launcher and each
                                        // rank; false where a container forbids them (Gradescope)
};

// What to run and the limits to run it under.
struct JobSpec {
  std::vector<std::string> argv;  // program (looked up in PATH like execvp) and its arguments
  std::vector<RankSpec> ranks;    // one process per entry
  double timeout_s = 0.0;         // wall-clock limit for the whole job in seconds; 0 = none
  double grace_s = 2.0;           // seconds between SIGTERM and SIGKILL when stopping ranks
  std::size_t tail_lines = 20;    // K: lines kept per rank for the summary
  bool stdin_from_null = true;    // ranks read /dev/null (true) or inherit the launcher's stdin
  bool verbose = false;           // report each rank's start and end on stderr
  Confinement confine;            // identity and resource limits of the ranks (default: none)
};

// How the job as a whole ended.
enum class Ending {
  kAllSucceeded,  // every rank exited 0
  kRankFailed,    // a rank exited non-zero or by a signal first; the others were stopped
  kTimedOut,      // the wall-clock limit expired; all ranks were stopped
  kInterrupted,   // the launcher received SIGINT/SIGTERM/SIGHUP and forwarded it
  kLaunchError,   // a rank could not be started (fork or pipe failed)
};

// What became of one rank.
struct RankOutcome {
  int rank = 0;
  pid_t pid = -1;                // -1 when it was never started
  bool finished = false;         // it ended and was reaped
  bool exited = false;           // ended by exit(); else by a signal (when finished)
  int code = 0;                  // exit code (exited) or signal number (signaled)
  int stop_signal = 0;           // the last signal the launcher sent its group (0 = none)
  bool escalated = false;        // the launcher had to send SIGKILL after the grace period
  bool unkillable = false;       // it did not end even after SIGKILL (left behind, reported)
  bool running_at_stop = false;  // it was still running when the launcher began stopping the job
  double end_s = 0.0;            // seconds since the job started at which it ended
};

// Everything the summary needs to know about a finished job.
struct JobOutcome {
  Ending ending = Ending::kAllSucceeded;
  int failed_slot = -1;      // index into ranks of the first failed rank (kRankFailed)
  int interrupt_signal = 0;  // the signal received (kInterrupted)
  std::string launch_error;  // what went wrong (kLaunchError)
  double elapsed_s = 0.0;    // wall time of the whole job, seconds
  std::vector<RankOutcome> ranks;
  std::vector<pid_t> strays;  // processes that outlived their rank outside its group, killed at the end
};

// Runs the job to its end and returns its outcome. Rank output goes through `relay` (whose slots must
// match spec.ranks). Installs handlers for SIGCHLD, SIGINT, SIGTERM and SIGHUP and ignores SIGPIPE for
// the duration of the call, restoring the previous dispositions before returning. Never throws for
// process errors: a failed fork or pipe ends the job as kLaunchError with the started ranks stopped.
// When a rank ends, whatever it left running in its process group is SIGKILLed at once (no orphans).
// On Linux the call makes the launcher a child subreaper, so that descendants which escaped their rank's
// process group are found and killed once every rank has ended (see strays.h).
JobOutcome run_job(const JobSpec& spec, LineRelay& relay);

}  // namespace tpsp::run
