#include "engine/trace/recorder.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <stdexcept>

#include "engine/device_hooks.h"

namespace tpsp::trace {

Recorder::Recorder(int global_rank)
    : global_rank_(global_rank),
      epoch_(std::chrono::steady_clock::now()),
      epoch_unix_us_(std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count()) {}

double Recorder::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_).count();
}

uint64_t Recorder::next_id() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_id_++;
}

void Recorder::issued(const CommRecord& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (enabled_) pending_[r.id] = r;
}

std::vector<CommRecord> Recorder::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CommRecord> out;
  for (const auto& [id, r] : pending_) out.push_back(r);
  return out;
}

void Recorder::append(CommRecord r) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.erase(r.id);
  if (!enabled_) return;
  if (r.async) {
    const auto it = waited_early_.find(r.id);
    r.waited = it != waited_early_.end();
    r.t_waited = r.waited ? it->second : -1;
    if (it != waited_early_.end()) waited_early_.erase(it);
  } else {
    r.t_waited = r.t_end;
  }
  records_.push_back(std::move(r));
}

void Recorder::mark_waited(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = records_.rbegin(); it != records_.rend(); ++it)
    if (it->id == id) {
      if (!it->waited) it->t_waited = now();
      it->waited = true;
      return;
    }
  waited_early_.emplace(id, now());
}

void Recorder::append_compute(ComputeRecord r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (enabled_) compute_.push_back(std::move(r));
}

void Recorder::set_device_anchor(const DeviceHooks* hooks) {
  std::lock_guard<std::mutex> lock(mu_);
  if (anchor_) return;
  anchor_ = hooks->event_record();
  anchor_hooks_ = hooks;
  hooks->event_elapsed_s(anchor_, anchor_);  // waits until the device reached it
  anchor_t_ = now();
}

void Recorder::append_device_compute(std::string name, std::string label, void* start, void* end,
                                     const DeviceHooks* hooks) {
  std::lock_guard<std::mutex> lock(mu_);
  if (enabled_ && anchor_) {
    device_spans_.push_back({std::move(name), std::move(label), start, end, hooks});
    return;
  }
  hooks->event_release(start);
  hooks->event_release(end);
}

void Recorder::resolve_device_spans() const {
  // Oldest first, each span out of the list before its markers are released: if reading a marker throws
  // (a device error), the spans left are still owned exactly once (attack12: a double release).
  std::size_t done = 0;
  try {
    for (; done < device_spans_.size(); ++done) {
      const DeviceSpan& d = device_spans_[done];
      const double t0 = anchor_t_ + d.hooks->event_elapsed_s(anchor_, d.start);
      const double t1 = anchor_t_ + d.hooks->event_elapsed_s(anchor_, d.end);
      compute_.push_back({d.name, d.label, t0, t1});
      d.hooks->event_release(d.start);
      d.hooks->event_release(d.end);
    }
  } catch (...) {
    device_spans_.erase(device_spans_.begin(), device_spans_.begin() + static_cast<std::ptrdiff_t>(done));
    throw;
  }
  device_spans_.clear();
}

Recorder::~Recorder() {
  for (const DeviceSpan& d : device_spans_) {
    d.hooks->event_release(d.start);
    d.hooks->event_release(d.end);
  }
  if (anchor_) anchor_hooks_->event_release(anchor_);
}

std::vector<ComputeRecord> Recorder::compute_records() const {
  std::lock_guard<std::mutex> lock(mu_);
  resolve_device_spans();
  return compute_;
}

void Recorder::set_enabled(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  enabled_ = on;
}

bool Recorder::enabled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return enabled_;
}

std::vector<CommRecord> Recorder::records() const {
  std::lock_guard<std::mutex> lock(mu_);
  return records_;
}

namespace {
bool matches(const CommRecord& r, const RecordFilter& f) {
  if (f.op && r.op != *f.op) return false;
  if (!f.group.empty() && r.group != f.group) return false;
  if (!f.label_prefix.empty() && r.label.rfind(f.label_prefix, 0) != 0) return false;
  return true;
}
}  // namespace

std::vector<CommRecord> Recorder::query(const RecordFilter& f) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CommRecord> out;
  for (const auto& r : records_)
    if (matches(r, f)) out.push_back(r);
  return out;
}

uint64_t Recorder::total_bytes(const RecordFilter& f) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = 0;
  for (const auto& r : records_)
    if (matches(r, f)) total += r.bytes;
  return total;
}

std::size_t Recorder::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return records_.size();
}

void Recorder::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  records_.clear();
  compute_.clear();
  for (const DeviceSpan& d : device_spans_) {
    d.hooks->event_release(d.start);
    d.hooks->event_release(d.end);
  }
  device_spans_.clear();
  pending_.clear();
}

nlohmann::json to_json(const CommRecord& r) {
  return nlohmann::json{{"id", r.id},
                        {"seq", r.seq},
                        {"op", op_name(r.op)},
                        {"group", r.group},
                        {"group_rank", r.group_rank},
                        {"group_size", r.group_size},
                        {"global_rank", r.global_rank},
                        {"dim", r.dim},
                        {"peer", r.peer},
                        {"reduce", reduce_op_name(r.reduce)},
                        {"dtype", dtype_name(r.dtype)},
                        {"shape", r.shape},
                        {"tensor_bytes", r.tensor_bytes},
                        {"bytes", r.bytes},
                        {"t_issue", r.t_issue},
                        {"t_start", r.t_start},
                        {"t_end", r.t_end},
                        {"label", r.label},
                        {"async", r.async},
                        {"waited", r.waited},
                        {"t_waited", r.t_waited},
                        {"ok", r.ok}};
}

nlohmann::json Recorder::chrome_trace() const {
  const auto recs = records();
  const auto spans = compute_records();
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", global_rank_},
                    {"args", {{"name", "rank " + std::to_string(global_rank_)}}}});
  events.push_back({{"name", "thread_name"},
                    {"ph", "M"},
                    {"pid", global_rank_},
                    {"tid", 0},
                    {"args", {{"name", "compute"}}}});
  for (const auto& s : spans)
    events.push_back({{"name", s.label.empty() ? s.name : s.name + " " + s.label},
                      {"cat", "compute"},
                      {"ph", "X"},
                      {"pid", global_rank_},
                      {"tid", 0},
                      {"ts", static_cast<double>(epoch_unix_us_) + s.t_start * 1e6},
                      {"dur", (s.t_end - s.t_start) * 1e6},
                      {"args", {{"name", s.name}, {"label", s.label}}}});
  std::map<std::string, int> tids;  // one trace thread per group, in order of first appearance
  for (const auto& r : recs) {
    if (tids.count(r.group)) continue;
    const int tid = static_cast<int>(tids.size()) + 1;
    tids[r.group] = tid;
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", global_rank_},
                      {"tid", tid},
                      {"args", {{"name", "group " + r.group}}}});
  }
  for (const auto& r : recs) {
    std::string name = op_name(r.op);
    if (!r.label.empty()) name += " " + r.label;
    events.push_back({{"name", name},
                      {"cat", "comm"},
                      {"ph", "X"},
                      {"pid", global_rank_},
                      {"tid", tids[r.group]},
                      {"ts", static_cast<double>(epoch_unix_us_) + r.t_start * 1e6},
                      {"dur", (r.t_end - r.t_start) * 1e6},
                      {"args", to_json(r)}});
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

void Recorder::write_chrome_trace(const std::string& path) const {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write the Chrome trace to '" + path + "'");
  f << chrome_trace().dump() << '\n';
  if (!f) throw std::runtime_error("error while writing the Chrome trace to '" + path + "'");
}

namespace {
/// The union of [start, end) intervals, as sorted disjoint intervals.
std::vector<std::pair<double, double>> merged(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<double, double>> out;
  for (const auto& [a, b] : v) {
    if (b <= a) continue;
    if (!out.empty() && a <= out.back().second)
      out.back().second = std::max(out.back().second, b);
    else
      out.emplace_back(a, b);
  }
  return out;
}
}  // namespace

double overlap_fraction(const std::vector<CommRecord>& comm, const std::vector<ComputeRecord>& compute) {
  std::vector<std::pair<double, double>> c, k;
  for (const CommRecord& r : comm) c.emplace_back(r.t_start, r.t_end);
  for (const ComputeRecord& r : compute) k.emplace_back(r.t_start, r.t_end);
  const auto cu = merged(std::move(c)), ku = merged(std::move(k));
  double total = 0, both = 0;
  for (const auto& [a, b] : cu) total += b - a;
  // Both lists are sorted and disjoint: sweep them together.
  for (std::size_t i = 0, j = 0; i < cu.size() && j < ku.size();) {
    const double lo = std::max(cu[i].first, ku[j].first), hi = std::min(cu[i].second, ku[j].second);
    if (hi > lo) both += hi - lo;
    if (cu[i].second < ku[j].second)
      ++i;
    else
      ++j;
  }
  return total > 0 ? both / total : 0.0;
}

}  // namespace tpsp::trace
