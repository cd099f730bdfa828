#include "checkers/rank/where.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace tpsp::checkers {

namespace {

pthread_t g_main;
std::atomic<int> g_rank{-1};
bool g_device_run = false;  // TPSP_DEVICE names a device: a SEGV may be a host access of device memory

struct Frame {
  std::string function;  // demangled, or "" when the symbol is not exported
  bool in_exe = false;   // in this executable (not a shared library)
  uintptr_t offset = 0;  // return address − 1, relative to the module's load address
};

void print_where(int);

Frame describe(void* pc) {
  Frame f;
  Dl_info info{}, self{};
  if (dladdr(pc, &info) == 0) return f;
  f.in_exe = dladdr(reinterpret_cast<void*>(&print_where), &self) != 0 && self.dli_fbase == info.dli_fbase;
  f.offset = reinterpret_cast<uintptr_t>(pc) - reinterpret_cast<uintptr_t>(info.dli_fbase) - 1;
  if (info.dli_sname) {
    int status = 0;
    char* name = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    f.function = status == 0 && name ? name : info.dli_sname;
    std::free(name);
  }
  return f;
}

/// A demangled name without its argument and template lists ("ns::Class::f", "…::{lambda#1}::operator"),
/// which are noise when the question is only "which function".
std::string short_name(const std::string& name) {
  std::string out;
  int depth = 0;
  for (char c : name) {
    if (c == '(' || c == '<')
      ++depth;
    else if ((c == ')' || c == '>') && depth > 0)
      --depth;
    else if (depth == 0)
      out += c;
  }
  if (const auto clone = out.find(" [clone"); clone != std::string::npos) out.resize(clone);
  return out;
}

/// The path from the project's top folders on ("labs/lab00_collectives/ring_collectives.cpp:60").
std::string short_path(const std::string& where) {
  for (const char* top : {"/labs/", "/engine/", "/checkers/", "/reference/", "/mutants/"})
    if (const auto p = where.rfind(top); p != std::string::npos) return where.substr(p + 1);
  return where;
}

/// "function at file:line" for the frames of this executable, from addr2line (binutils) when it is
/// installed; empty strings where it is not.
std::vector<std::string> source_lines(const std::vector<Frame>& frames, const std::string& exe) {
  std::vector<std::string> out(frames.size());
  std::string cmd = "addr2line -f -C -e '" + exe + "'";
  std::vector<std::size_t> which;
  for (std::size_t i = 0; i < frames.size(); ++i)
    if (frames[i].in_exe) {
      char hex[32];
      std::snprintf(hex, sizeof hex, " 0x%lx", static_cast<unsigned long>(frames[i].offset));
      cmd += hex;
      which.push_back(i);
    }
  if (which.empty()) return out;
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p) return out;
  char fn[4096], loc[4096];
  for (std::size_t k = 0; k < which.size() && std::fgets(fn, sizeof fn, p) && std::fgets(loc, sizeof loc, p);
       ++k) {
    fn[std::strcspn(fn, "\n")] = 0;
    loc[std::strcspn(loc, "\n")] = 0;
    std::string where = loc;
    if (const auto cut = where.find(" (discriminator"); cut != std::string::npos) where.resize(cut);
    if (where.rfind("??", 0) != 0) out[which[k]] = short_name(fn) + " at " + short_path(where);
  }
  pclose(p);
  return out;
}

/// Prints the calling thread's stack under `headline` (frames 0 and 1: the handler and the trampoline).
void print_stack(const char* headline);

/// Runs on the main thread (SIGUSR2 from the watcher): prints the stack and exits.
void print_where(int) {
  print_stack("was stopped (SIGTERM: its time budget ran out, or a peer failed) while in");
  _exit(128 + SIGTERM);
}

/// A crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) on any thread: where it happened, then the
/// default action, so the exit status still names the signal.
void print_crash(int sig) {
  char headline[256];
  std::snprintf(
      headline, sizeof headline, "crashed with %s%s in", sigabbrev_np(sig) ? sigabbrev_np(sig) : "a signal",
      sig == SIGSEGV && g_device_run
          ? " (on a device run, also what host code reading or writing a device tensor's memory does, "
            "e.g. through raw_data(): use ops, or to(Device::cpu))"
          : "");
  print_stack(headline);
  signal(sig, SIG_DFL);
  raise(sig);
}

void print_stack(const char* headline) {
  void* pcs[64];
  const int n = backtrace(pcs, 64);
  char exe_buf[4096] = {0};
  const ssize_t len = readlink("/proc/self/exe", exe_buf, sizeof exe_buf - 1);
  const std::string exe = len > 0 ? std::string(exe_buf, static_cast<std::size_t>(len)) : "";
  std::vector<Frame> frames;
  for (int i = 2; i < n; ++i) frames.push_back(describe(pcs[i]));  // 0: this handler, 1: the trampoline
  const std::vector<std::string> lines = source_lines(frames, exe);
  std::fprintf(stderr, "rank %d %s:\n", g_rank.load(), headline);
  int shown = 0;
  for (std::size_t i = 0; i < frames.size() && shown < 12; ++i) {
    const Frame& f = frames[i];
    if (f.function == "main" || f.function.rfind("__libc_start", 0) == 0) break;
    const std::string text = !lines[i].empty() ? lines[i] : short_name(f.function);
    // Skip what says nothing about the learner's code: unnamed libc internals, the standard library.
    if (text.empty() || text.find(" at /usr/") != std::string::npos || text.rfind("std::", 0) == 0) continue;
    std::fprintf(stderr, "  #%d %s\n", shown++, text.c_str());
  }
  std::fflush(stderr);
}

}  // namespace

void report_where_on_sigterm() {
  g_main = pthread_self();
  const char* device = std::getenv("TPSP_DEVICE");
  g_device_run = device && *device && std::string_view(device) != "cpu";
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);
  struct sigaction sa {};
  sa.sa_handler = print_where;
  sigaction(SIGUSR2, &sa, nullptr);
  // Crashes print where they happened; an alternate stack lets a stack overflow be reported too.
  static char alt_stack[1 << 16];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  sigaltstack(&ss, nullptr);
  struct sigaction crash {};
  crash.sa_handler = print_crash;
  crash.sa_flags = SA_ONSTACK | SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &crash, nullptr);
  // The batch parent forks a child per scenario after this: the thread must be blocked in sigwait before
  // any fork, or a fork during its start (which allocates) hands the child an allocator lock held by a
  // thread the child does not have (seen under ASan: the child's relay reader blocked forever in malloc).
  static std::atomic<bool> waiting{false};
  std::thread([term] {
    int sig = 0;
    waiting.store(true);
    sigwait(&term, &sig);
    pthread_kill(g_main, SIGUSR2);
    sleep(3);  // the main thread normally exits from print_where first
    _exit(128 + SIGTERM);
  }).detach();
  while (!waiting.load()) std::this_thread::yield();
}

void set_where_rank(int rank) {
  g_rank = rank;
}

}  // namespace tpsp::checkers
