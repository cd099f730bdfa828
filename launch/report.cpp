// tpsp-run: the end-of-job summary and exit code (see report.h).
#include "launch/report.h"

#include <fmt/format.h>

#include <csignal>
#include <cstring>
#include <vector>

namespace tpsp::run {

std::string signal_name(int sig) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  if (const char* abbrev = sigabbrev_np(sig); abbrev != nullptr) return std::string("SIG") + abbrev;
#endif
  return fmt::format("signal {}", sig);
}

namespace {

// strsignal's description ("Segmentation fault"), or an empty string when there is none.
std::string signal_description(int sig) {
  const char* text = strsignal(sig);
  return text != nullptr ? std::string(text) : std::string();
}

// "rank 0 (SIGTERM)" style note on how a stopped rank ended.
std::string stopped_note(const RankOutcome& r) {
  if (r.unkillable)
    return fmt::format("rank {} (still alive after SIGKILL, pid {} left behind)", r.rank, r.pid);
  if (!r.finished) return fmt::format("rank {} (state unknown)", r.rank);
  std::string how = r.exited ? fmt::format("exit {}", r.code) : "killed by " + signal_name(r.code);
  if (r.escalated) how += fmt::format(" after ignoring {}", signal_name(r.stop_signal));
  return fmt::format("rank {} ({})", r.rank, how);
}

// Appends "tpsp-run: last N lines of rank R:" and the lines themselves (or that it printed nothing).
void append_tail(std::string& out, const LineRelay& relay, std::size_t slot) {
  const auto& tail = relay.tail(slot);
  const int rank = relay.rank_of(slot);
  if (relay.line_count(slot) == 0) {
    out += fmt::format("tpsp-run: rank {} printed nothing\n", rank);
    return;
  }
  if (tail.empty()) return;  // --tail 0
  if (tail.size() < relay.line_count(slot)) {
    out += fmt::format("tpsp-run: last {} lines of rank {}:\n", tail.size(), rank);
  } else {
    out += fmt::format("tpsp-run: output of rank {} ({} line{}):\n", rank, tail.size(),
                       tail.size() == 1 ? "" : "s");
  }
  for (const auto& line : tail) out += fmt::format("  [rank {}] {}\n", rank, line.text);
}

// "0, 1, 3" from a list of rank numbers.
std::string join_ranks(const std::vector<int>& ranks) {
  std::string text;
  for (std::size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

}  // namespace

std::string describe_end(const RankOutcome& r) {
  if (r.unkillable) return "did not end even after SIGKILL";
  if (!r.finished) return "is still running";
  if (r.exited) {
    std::string text = fmt::format("exited with code {}", r.code);
    if (r.code == 127) text += " (command not found?)";
    if (r.code == 126) text += " (command not executable?)";
    return text;
  }
  const std::string description = signal_description(r.code);
  if (description.empty()) return fmt::format("was killed by {}", signal_name(r.code));
  return fmt::format("was killed by {} ({})", signal_name(r.code), description);
}

std::string end_hint(const RankOutcome& r) {
  if (!r.finished || r.exited || r.stop_signal != 0) return "";
  if (r.code == SIGKILL)
    return "SIGKILL did not come from tpsp-run: out of memory (see dmesg), or killed from outside?";
  if (r.code == SIGTERM || r.code == SIGINT || r.code == SIGHUP) {
    return fmt::format("{} did not come from tpsp-run: sent by srun, scancel or kill from outside?",
                       signal_name(r.code));
  }
  return "";
}

int exit_code(const JobOutcome& outcome) {
  switch (outcome.ending) {
    case Ending::kAllSucceeded:
      return 0;
    case Ending::kRankFailed: {
      const RankOutcome& r = outcome.ranks[static_cast<std::size_t>(outcome.failed_slot)];
      if (r.exited) return r.code != 0 ? r.code : 1;
      return 128 + r.code;
    }
    case Ending::kTimedOut:
      return 124;
    case Ending::kInterrupted:
      return 128 + outcome.interrupt_signal;
    case Ending::kLaunchError:
      return 1;
  }
  return 1;
}

std::string format_summary(const JobOutcome& outcome, const LineRelay& relay, double timeout_s,
                           bool verbose) {
  std::string out;
  const int code = exit_code(outcome);
  std::vector<int> stopped_running;  // ranks that were still running when the job was stopped
  std::string stopped_notes;
  for (const auto& r : outcome.ranks) {
    if (!r.running_at_stop) continue;
    stopped_running.push_back(r.rank);
    stopped_notes += (stopped_notes.empty() ? "" : ", ") + stopped_note(r);
  }
  for (const auto& r : outcome.ranks) {
    if (r.unkillable) {
      out += fmt::format("tpsp-run: WARNING: rank {} (pid {}) did not end after SIGKILL and is left behind\n",
                         r.rank, r.pid);
    }
  }

  if (!outcome.strays.empty()) {
    std::string pids;
    for (pid_t pid : outcome.strays) pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
    out += fmt::format(
        "tpsp-run: killed {} process(es) that outlived their rank outside its process group (pid {})\n",
        outcome.strays.size(), pids);
  }

  switch (outcome.ending) {
    case Ending::kAllSucceeded:
      if (!verbose) return out;
      out += fmt::format("tpsp-run: all {} rank(s) exited 0 in {:.2f} s\n", outcome.ranks.size(),
                         outcome.elapsed_s);
      return out;
    case Ending::kRankFailed: {
      const auto slot = static_cast<std::size_t>(outcome.failed_slot);
      const RankOutcome& failed = outcome.ranks[slot];
      out += fmt::format("tpsp-run: ==== job failed: rank {} {} after {:.2f} s ====\n", failed.rank,
                         describe_end(failed), failed.end_s);
      if (const std::string hint = end_hint(failed); !hint.empty())
        out += fmt::format("tpsp-run: hint: {}\n", hint);
      if (!stopped_running.empty()) {
        out += fmt::format("tpsp-run: stopped the other ranks: {}\n", stopped_notes);
      }
      append_tail(out, relay, slot);
      break;
    }
    case Ending::kTimedOut: {
      out += fmt::format("tpsp-run: ==== timed out after {:g} s; ranks still running: {} ====\n", timeout_s,
                         stopped_running.empty() ? std::string("none") : join_ranks(stopped_running));
      for (std::size_t slot = 0; slot < outcome.ranks.size(); ++slot) {
        if (outcome.ranks[slot].running_at_stop) append_tail(out, relay, slot);
      }
      break;
    }
    case Ending::kInterrupted:
      out += fmt::format("tpsp-run: ==== received {}; forwarded it to the ranks still running: {} ====\n",
                         signal_name(outcome.interrupt_signal),
                         stopped_running.empty() ? std::string("none") : stopped_notes);
      break;
    case Ending::kLaunchError:
      out += fmt::format("tpsp-run: ==== could not start the job: {} ====\n", outcome.launch_error);
      if (!stopped_running.empty())
        out += fmt::format("tpsp-run: stopped the started ranks: {}\n", stopped_notes);
      break;
  }
  out += fmt::format("tpsp-run: exit code {}\n", code);
  return out;
}

}  // namespace tpsp::run
