// "Where was this rank when it was stopped?" for the checker's rank programs: a learner's endless loop
// or a rank waiting for a call its peers never make is reported with the functions on its main
// thread's stack, not just "killed".
#pragma once

namespace tpsp::checkers {

/// Blocks SIGTERM in this thread (and so in every thread started later) and starts a watcher thread
/// that, on SIGTERM, interrupts the main thread to print "rank R was stopped while in:" and its
/// call stack (function at file:line) on stderr, then exits with 128+SIGTERM. A crash (SIGSEGV,
/// SIGBUS, SIGFPE, SIGILL, SIGABRT) prints "rank R crashed with SEGV in:" and the faulting thread's
/// stack, then takes the signal's default action. Call first thing in main.
void report_where_on_sigterm();
/// The rank shown in that report (once the world is known).
void set_where_rank(int rank);

}  // namespace tpsp::checkers
