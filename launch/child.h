// What a process does between fork and exec, or right after fork (launch/launcher.cpp's ranks, the relay
// process, tpsp-run's launcher child): no stdio and no exit handlers there, only system calls.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "launch/launcher.h"

namespace tpsp::run {

/// Writes `message` to fd 2 and ends the child with `code` (_exit: no stdio, no exit handlers).
[[noreturn]] void child_fail(const std::string& message, int code);

/// As root, in a rank's child: mount, network and IPC namespaces of its own, no new privileges, a
/// private /tmp and /dev/shm, and in the parent of each of `own_dirs` only that directory visible
/// (RankSpec::isolate). Ends the child with 126 (child_fail) when one cannot be made.
void isolate_child(const std::vector<std::string>& own_dirs);

/// In a rank's child: the resource limits of `c`, then its identity (a uid change clears the parent-death
/// signal, so end_with_parent comes after). Ends the child with 126 when one cannot be applied.
void confine_child(const Confinement& c);

/// In a child forked by `parent`: the kernel sends it `sig` when the parent dies, even of SIGKILL (Linux
/// PR_SET_PDEATHSIG; elsewhere nothing: the portable build has no such request), and a parent that died
/// already ends it at once with `exit_code`.
void end_with_parent(pid_t parent, int sig, int exit_code);

}  // namespace tpsp::run
