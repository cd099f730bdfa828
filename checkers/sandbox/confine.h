// The confinement of ./grade's launches (tpsp-check --confine-uid), apart from launching itself: the
// directories handed to a rank's uid and taken back, the launcher's namespaces, the processes left
// behind. Root only; the launcher applies the rest (launch/launcher.h Confinement, RankSpec::isolate).
// The witness relay and its judge (launch/relay_server.h, checkers/sandbox/witness_judge.h) complete it.
#pragma once

#include <string>

namespace tpsp::checkers::sandbox {

/// Uids per confined launch: rank w of a launch runs as the launch's first uid + w, so the ranks of one
/// launch cannot signal, trace or inspect each other (a launch of more ranks is refused).
inline constexpr int kMaxWorld = 16;

/// The first uid of the `launch`-th confined launch from `base`: blocks of kMaxWorld uids, reused after
/// 6000 launches.
inline long launch_uid(long base, long launch) {
  return base + (launch % 6000) * kMaxWorld;
}

/// Gives `dir` to `uid`, closed to everyone else (0700); false (with errno) when it cannot.
bool hand_over(const std::string& dir, long uid);

/// In the launcher of a confined launch (root, before any rank starts): new mount, network and IPC
/// namespaces, so that what the ranks leave in /tmp, /dev/shm, System V IPC or on a socket is seen by no
/// other launch; with `loopback` the loopback interface up (Gloo connects the ranks through it), else no
/// network at all (the witness relay's sockets are the ranks' only way to each other). Returns "" or what
/// failed.
std::string isolate_launcher(bool loopback);

/// After a confined launch: takes `dir` back from the ranks' uid (every entry owned by root again, so
/// nothing left running could change it while it is graded) and removes anything in it that is not a
/// plain file or directory (a link to a file of the grader's, a FIFO that would block its read).
void take_back(const std::string& dir);

/// After a confined launch: SIGKILLs every process left running as `uid` (a spinner that left its
/// process group with setsid, a daemon), from a child that takes that uid: kill(-1) reaches exactly them.
void kill_uid(long uid);

}  // namespace tpsp::checkers::sandbox
