#include "checkers/grader/timeline.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/comm/op.h"
#include "engine/trace/recorder.h"

namespace tpsp::checkers {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Start of the phase on this rank (its first issue or compute start), so reports read in ms from 0.
double phase_origin(const RankTimeline& r, const std::string& phase) {
  double t0 = 1e300;
  for (const TimedCall& c : r.calls)
    if (c.phase == phase) t0 = std::min(t0, c.rec.t_issue);
  for (const ComputeSpan& s : r.compute)
    if (s.phase == phase) t0 = std::min(t0, s.span.t_start);
  return t0 == 1e300 ? 0 : t0;
}

std::vector<const ComputeSpan*> gemms(const RankTimeline& r, const std::string& phase,
                                      const std::string& label) {
  std::vector<const ComputeSpan*> out;
  for (const ComputeSpan& s : r.compute)
    if (s.phase == phase && s.span.name == "gemm" && (label.empty() || s.span.label == label))
      out.push_back(&s);
  return out;
}

/// Why call c hid no GEMM of `gs` ("" if it hid one).
std::string why_not_hidden(const TimedCall& c, const std::vector<const ComputeSpan*>& gs,
                           const std::string& gemm, double t0) {
  for (const ComputeSpan* g : gs)
    if (c.rec.t_issue <= g->span.t_start && g->span.t_end <= c.rec.t_waited) return "";
  auto ms = [&](double t) { return fmt::format("{:.3f} ms", (t - t0) * 1e3); };
  const std::string name = gemm.empty() ? "a GEMM" : "the " + gemm + " GEMM";
  // The GEMM it was meant to hide: the first one that had not ended at the issue, else the last one.
  const ComputeSpan* g = nullptr;
  for (const ComputeSpan* s : gs)
    if (s->span.t_end >= c.rec.t_issue) {
      g = s;
      break;
    }
  if (!g && !gs.empty()) g = gs.back();
  if (!g) return fmt::format("no {} ran in this phase at all", name);
  const std::string ran = fmt::format("{} ran from {} to {}", name, ms(g->span.t_start), ms(g->span.t_end));
  if (c.rec.t_issue > g->span.t_start)
    return fmt::format(
        "issued at {}, after {} started ({}): issue the call first, then compute, so that it is in flight "
        "while the "
        "GEMM runs",
        ms(c.rec.t_issue), name, ran);
  if (c.rec.t_waited < g->span.t_end)
    return fmt::format(
        "issued at {} but waited at {}, before {} ended ({}): wait() blocks this thread, so nothing computes "
        "while "
        "you wait; wait after the GEMM",
        ms(c.rec.t_issue), ms(c.rec.t_waited), name, ran);
  return fmt::format("issued at {}, waited at {}; {}", ms(c.rec.t_issue), ms(c.rec.t_waited), ran);
}

}  // namespace

std::vector<std::string> check_hidden(const std::vector<RankTimeline>& ranks,
                                      const std::vector<HideRule>& rules) {
  std::vector<std::string> out;
  for (const HideRule& rule : rules)
    for (std::size_t w = 0; w < ranks.size(); ++w) {
      const RankTimeline& r = ranks[w];
      const auto gs = gemms(r, rule.phase, rule.gemm);
      std::string why;
      const TimedCall* bad = nullptr;
      for (const TimedCall& c : r.calls) {
        if (c.phase != rule.phase || c.rec.op != rule.op || !ends_with(c.rec.label, rule.label_suffix) ||
            !c.rec.waited)
          continue;
        if (why = why_not_hidden(c, gs, rule.gemm, phase_origin(r, rule.phase)); !why.empty()) {
          bad = &c;
          break;
        }
      }
      if (!bad) continue;
      out.push_back(fmt::format("{}: on rank {} the {} '{}' is not in flight across {}: {}", rule.phase, w,
                                comm::op_name(bad->rec.op), bad->rec.label, rule.what, why));
      break;  // one rank per rule is enough to read
    }
  return out;
}

double phase_overlap(const RankTimeline& rank, const std::string& phase) {
  std::vector<trace::CommRecord> comm;
  std::vector<trace::ComputeRecord> compute;
  for (const TimedCall& c : rank.calls)
    if (c.phase == phase) {
      comm.push_back(c.rec);
    }
  for (const ComputeSpan& s : rank.compute)
    if (s.phase == phase) compute.push_back(s.span);
  return trace::overlap_fraction(comm, compute);
}

std::string check_overlap(const std::vector<RankTimeline>& ranks, const std::vector<std::string>& phases,
                          double threshold, const std::string& link) {
  // The best (rank, repeat): a rank whose peer ran late waits for it, and that wait is imbalance,
  // not missing overlap; the slower rank's own view shows what the code overlaps.
  std::size_t w = 0;
  std::string phase;
  double f = -1;
  for (std::size_t k = 0; k < ranks.size(); ++k)
    for (const std::string& p : phases)
      if (const double fp = phase_overlap(ranks[k], p); fp > f) f = fp, phase = p, w = k;
  if (f >= threshold || ranks.empty()) return "";
  double comm_s = 0;
  std::vector<double> transfers, gemm_s;
  for (const TimedCall& c : ranks[w].calls)
    if (c.phase == phase) transfers.push_back(c.rec.t_end - c.rec.t_start);
  for (const ComputeSpan& s : ranks[w].compute)
    if (s.phase == phase && s.span.name == "gemm") gemm_s.push_back(s.span.t_end - s.span.t_start);
  for (double t : transfers) comm_s += t;
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::string why;
  if (transfers.empty())
    why = "there was no communication in this phase";
  else if (median(transfers) > median(gemm_s))
    why = fmt::format(
        "the median transfer took {:.3f} ms but the median GEMM only {:.3f} ms: the chunks are too small for "
        "the "
        "link (its latency and bandwidth), so most of each transfer is exposed — a ring costs about "
        "t_g + (tp−1)·max(t_c, t_g)",
        median(transfers) * 1e3, median(gemm_s) * 1e3);
  else
    why =
        "the transfers ran while nothing computed: a call waited right after its issue, or was issued after "
        "the "
        "GEMM it should hide (the lines above name the call)";
  return fmt::format(
      "{}: at best (rank {}, of {} ranks × {} repeats) only {:.0f}% of the communication time ran while a "
      "GEMM "
      "computed (needs ≥ {:.0f}% under the emulated link {}): about {:.3f} ms of communication exposed; {}",
      phase, w, ranks.size(), phases.size(), 100 * f, 100 * threshold, link, (1 - f) * comm_s * 1e3, why);
}

}  // namespace tpsp::checkers
