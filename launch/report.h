// tpsp-run: turning a finished job into words and an exit code. The summary is what a learner sees when
// something went wrong: which rank failed first and how, what happened to the others, and the failed
// rank's last lines.
#pragma once

#include <string>

#include "launch/launcher.h"
#include "launch/output.h"

namespace tpsp::run {

// "SIGSEGV" for 11 etc. (sigabbrev_np on glibc); "signal N" when the number has no name.
std::string signal_name(int sig);

// One-line description of how a rank ended, e.g. "exited with code 3" or
// "was killed by SIGSEGV (Segmentation fault)". Adds a hint for the shell's 126/127 codes.
std::string describe_end(const RankOutcome& rank);

// A hint on who sent the signal that killed a rank, when it was not the launcher and the signal is one
// that usually comes from outside (SIGKILL: the OOM killer; SIGTERM/SIGINT/SIGHUP: srun, scancel, kill).
// Empty when there is nothing to say.
std::string end_hint(const RankOutcome& rank);

// The launcher's exit code: 0 when every rank succeeded; the failed rank's exit code, or 128 + its
// signal; 124 on timeout; 128 + the received signal when interrupted; 1 when a rank could not start.
int exit_code(const JobOutcome& outcome);

// The multi-line summary printed on stderr after the job (empty when every rank succeeded and `verbose`
// is false). Lines start with "tpsp-run: "; a rank's remembered lines are shown "  [rank R] text".
// `timeout_s` is the limit that was set (printed on timeout).
std::string format_summary(const JobOutcome& outcome, const LineRelay& relay, double timeout_s, bool verbose);

}  // namespace tpsp::run
