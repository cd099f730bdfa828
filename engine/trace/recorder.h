// Recorder: every call a ProcessGroup makes is appended here, so checkers can assert *how* a model
// communicated (which collectives, along which dim, how many bytes) and traces can be plotted.
//
// One Recorder is shared by a world group and every group created from it (new_group), so one
// process has one timeline; filter by group name to look at one group. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "engine/trace/op_kind.h"

namespace tpsp {
struct DeviceHooks;
}

namespace tpsp::trace {

/// One recorded call. Times are seconds since the Recorder was created (steady clock).
struct CommRecord {
  uint64_t id = 0;   ///< Unique per Recorder, in issue order.
  uint64_t seq = 0;  ///< Per-group call number (0, 1, 2, ...): the fingerprint's sequence number.
  OpKind op = OpKind::barrier;
  std::string group;   ///< Group name: "world", "tp", "dp", ...
  int group_rank = 0;  ///< This process's rank inside the group.
  int group_size = 1;
  int global_rank = 0;  ///< This process's rank in the world.
  int64_t dim = 0;      ///< Gather/scatter dimension (0 for ops without one).
  int peer = -1;        ///< Group rank of the other side: send dst, recv src, broadcast root (else -1).
  ReduceOp reduce = ReduceOp::sum;  ///< all_reduce / reduce_scatter: the reduction.
  DType dtype = DType::f32;
  Shape shape;                ///< Shape of the caller's input tensor (all_gather: the local shard).
  uint64_t tensor_bytes = 0;  ///< Bytes of the tensor S of cost_model.h (all_gather: the output).
  uint64_t bytes = 0;         ///< Payload bytes this rank sends on the wire (cost_model.h wire_bytes).
  /// all_to_all: bytes this rank sends to / receives from each group rank (its own included), in group
  /// rank order; empty for other ops and for an equal all_to_all of an empty tensor (nothing moved).
  std::vector<uint64_t> send_bytes, recv_bytes;
  double t_issue = 0;  ///< When the caller issued the call (seconds).
  double t_start = 0;  ///< When the comm worker started it (after earlier calls of the group).
  double t_end = 0;    ///< When it completed, including any emulated link delay.
  std::string label;   ///< The caller's CallOpts::label, e.g. "layer3.mlp.fc2.g".
  bool async = false;  ///< Issued through an *_async form.
  bool waited = true;  ///< False for an async call whose Work has not been waited (yet, or ever).
  /// When the caller's wait() returned (seconds): t_end for a blocking call, the first wait() of an
  /// async one, -1 while it was never waited. An overlapped call is waited after the GEMM it hides.
  double t_waited = -1;
  bool ok = true;  ///< False if the call failed (it is still recorded).
};

/// One span of computation on this rank (a GEMM, attention, a layer's phase), on the same clock.
struct ComputeRecord {
  std::string name;   ///< what ran: "gemm", "attention", "layer.forward", ...
  std::string label;  ///< the caller's words, e.g. "decoder.layers.0.mlp.linear_fc1.dgrad"
  double t_start = 0;
  double t_end = 0;
};

/// Time during which communication and computation coincide, over the time spent communicating:
/// |(∪ comm intervals) ∩ (∪ compute intervals)| / |∪ comm intervals| (Holistic Trace Analysis'
/// communication–computation overlap). 0 when there is no communication time.
double overlap_fraction(const std::vector<CommRecord>& comm, const std::vector<ComputeRecord>& compute);

/// Which records a query returns; empty / unset fields match everything.
struct RecordFilter {
  std::optional<OpKind> op;
  std::string group;         ///< Exact group name.
  std::string label_prefix;  ///< Records whose label starts with this.
};

/// Append-only, queryable log of communication calls; exports Chrome trace JSON (Perfetto opens it).
class Recorder {
 public:
  /// `global_rank` becomes the trace's pid.
  explicit Recorder(int global_rank = 0);

  /// Seconds since this Recorder was created (the time base of every record).
  double now() const;
  /// A fresh record id (ids are unique per Recorder and increase in issue order).
  uint64_t next_id();
  /// Appends one record (thread-safe). Does nothing while disabled.
  void append(CommRecord r);
  /// Notes a call at issue time (its record without start/end): until its record is appended it is
  /// listed by pending() — a call still in flight, or one whose Work nobody will ever wait for.
  void issued(const CommRecord& r);
  /// Calls issued whose record has not been appended yet, in issue order.
  std::vector<CommRecord> pending() const;
  /// Marks async call `id` as waited at now() (t_waited), now or when its record is appended. Until
  /// then an async record says waited = false — also while its Work is still alive, never waited.
  void mark_waited(uint64_t id);
  /// Appends one compute span (thread-safe). Does nothing while disabled.
  void append_compute(ComputeRecord r);
  /// Appends a compute span of device work given by two device markers (DeviceHooks::event_record of
  /// `hooks`, recorded around the queued work); it owns them. Its times are resolved onto this clock
  /// when compute_records() next runs: now() of a marker that the device reached, plus the device's
  /// seconds from that marker (set_device_anchor).
  void append_device_compute(std::string name, std::string label, void* start, void* end,
                             const DeviceHooks* hooks);
  /// Records the device marker that device spans are timed from, once (the first call waits for the
  /// device to reach it, then reads now()); a span calls it before recording its start marker.
  void set_device_anchor(const DeviceHooks* hooks);
  ~Recorder();
  /// Copy of the compute spans, in completion order.
  std::vector<ComputeRecord> compute_records() const;
  /// Turns recording on (default) or off (benchmarks).
  void set_enabled(bool on);
  bool enabled() const;

  /// Copy of all records, in completion order.
  std::vector<CommRecord> records() const;
  /// Records matching `f`, in completion order.
  std::vector<CommRecord> query(const RecordFilter& f) const;
  /// Sum of `bytes` over the records matching `f`.
  uint64_t total_bytes(const RecordFilter& f = {}) const;
  std::size_t size() const;
  /// Drops every record and compute span (the time base is kept).
  void clear();

  /// Chrome trace JSON: {"traceEvents": [...], "displayTimeUnit": "ms"} with one complete ("X")
  /// event per record (pid = global rank, tid = 0 for compute spans and one per group, ts/dur in
  /// microseconds since the Unix epoch so several ranks' traces line up), plus "M" metadata events
  /// naming the process and the threads. Every record field is kept under "args".
  nlohmann::json chrome_trace() const;
  /// Writes chrome_trace() to `path`. Throws std::runtime_error naming the path if it cannot.
  void write_chrome_trace(const std::string& path) const;

 private:
  int global_rank_;
  std::chrono::steady_clock::time_point epoch_;
  int64_t epoch_unix_us_;
  mutable std::mutex mu_;
  bool enabled_ = true;
  uint64_t next_id_ = 0;
  std::vector<CommRecord> records_;
  std::map<uint64_t, double> waited_early_;  // async ids waited before their record was appended → when
  std::map<uint64_t, CommRecord> pending_;   // issued, not appended yet
  mutable std::vector<ComputeRecord> compute_;
  struct DeviceSpan {
    std::string name, label;
    void* start;
    void* end;
    const DeviceHooks* hooks;
  };
  mutable std::vector<DeviceSpan> device_spans_;  // not resolved yet
  void* anchor_ = nullptr;                        // a device marker the device reached at anchor_t_
  const DeviceHooks* anchor_hooks_ = nullptr;
  double anchor_t_ = 0;
  void resolve_device_spans() const;  // under mu_
};

/// A record as JSON (every field; op and dtype as names).
nlohmann::json to_json(const CommRecord& r);

}  // namespace tpsp::trace
