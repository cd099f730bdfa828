// tpsp-run: stray processes. A rank's descendants normally die with its process group, but one that
// moved to its own group or session (setsid, a daemonizing helper) escapes that. On Linux the launcher
// makes itself a "child subreaper", so such orphans are re-parented to it instead of to init; at the end
// of the job it finds them (processes whose parent is the launcher but which are not ranks), kills them
// and reaps them. Elsewhere these functions do nothing.
#pragma once

#include <sys/types.h>

#include <vector>

namespace tpsp::run {

// Makes this process the subreaper of its descendants (prctl PR_SET_CHILD_SUBREAPER). Returns false
// when the platform does not support it (nothing else changes then).
bool begin_adopting_strays();

// Undoes begin_adopting_strays (best effort).
void end_adopting_strays();

// Finds processes whose parent is this process and whose pid is not in `ranks` (the rank pids, which are
// also their process group ids), sends them SIGKILL and reaps them; repeats (their own children are
// adopted in turn) until none are left or `max_wait_s` seconds have passed. Returns the pids of those
// that were alive outside every rank's process group (the escapees worth reporting), in the order found;
// members of a rank's group (already killed with it) are reaped silently. Errors reading /proc are
// ignored.
std::vector<pid_t> kill_strays(const std::vector<pid_t>& ranks, double max_wait_s);

}  // namespace tpsp::run
