// ProcessGroup: the communication interface of the engine in the shape of PyTorch c10d
// (torch/csrc/distributed/c10d/ProcessGroup.hpp), and the protocol that makes every call observable
// and safe. The transport underneath is a Backend (backend.h): Gloo today (gloo/gloo_backend.h),
// a test backend in tests/, NCCL and CUDA-over-Gloo later — each only moves bytes.
//
// What the protocol does for every call, on every backend:
//  - validates shapes, dtypes and devices in the caller and raises tpsp::ShapeError before anything is
//    sent or a sequence number is used;
//  - numbers the group's collectives (#seq) and, with fingerprints on, first checks across the ranks
//    that they all make the same call (CollectiveMismatchError naming both calls otherwise);
//  - runs the group's calls one at a time in issue order on one comm thread (a blocking call with nothing
//    before it on the caller's thread: CommWorker::claim_if_idle), bounded by the group's timeout
//    (CommTimeoutError naming rank, op, #seq, label and group), sleeping for the emulated link;
//  - records every call (op, group, dim, dtype, shape, bytes, issue/start/end times, label, async,
//    waited) in the Recorder (engine/trace), and marks an async call whose Work was never waited;
//  - reduces low-precision tensors in float32 (bf16 is widened, reduced, rounded once);
//  - with buffer checks on (TPSP_COMM_CHECK_BUFFERS=1, set by ./check), fingerprints the bytes an async
//    call reads at issue and raises in wait() if the caller modified them before waiting, and has an
//    async call write a staged buffer while the caller's output reads NaN until the call completes
//    (after the emulated link's delay), so a read before wait() never sees data that arrived early;
//  - on any failure kills every group of the world (so peers fail in about a second, not at their
//    timeout); later calls raise "group X is dead after an earlier failure".
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/comm/backend.h"
#include "engine/comm/comm_error.h"
#include "engine/comm/link_model.h"
#include "engine/comm/op.h"
#include "engine/comm/work.h"
#include "engine/tensor.h"
#include "engine/trace/recorder.h"

namespace tpsp::comm {

/// Per-call options. The label is recorded (and shown in errors); it does not affect communication.
struct CallOpts {
  std::string label;  ///< e.g. "layer3.mlp.fc2.g"
};

/// Behaviour of a group; a group created by new_group starts with its parent's options.
struct GroupOptions {
  /// How long one call may wait for its peers before raising CommTimeoutError (env TPSP_COMM_TIMEOUT).
  std::chrono::milliseconds timeout{60000};
  /// Before each collective, all ranks exchange (seq, op, count, dtype, dim/root, group) and raise
  /// CollectiveMismatchError on any difference. Costs one small all-gather per call; turn off for
  /// benchmarks (env TPSP_COMM_FINGERPRINT=0).
  bool fingerprints = true;
  /// Emulated link; disabled by default (env TPSP_LINK, see LinkModel::parse).
  LinkModel link;
  /// Fingerprint the buffers an async call reads and raise in wait() if they changed before it
  /// (env TPSP_COMM_CHECK_BUFFERS=1). Costs one pass over the bytes at issue and at wait.
  bool check_buffers = false;
};

/// A group of ranks that communicate. Shapes below: n = the group size, r = this group rank.
class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  /// The world group over `backend` (rank and size are the backend's), named "world", with a fresh
  /// Recorder. ShapeError on a non-positive timeout.
  static std::shared_ptr<ProcessGroup> create_world(std::unique_ptr<Backend> backend, GroupOptions options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  /// This process's rank in the group (0 .. size-1).
  int rank() const { return rank_; }
  /// Number of ranks in the group.
  int size() const { return size_; }
  /// Name of the group: "world", "tp", "dp", ... (recorded, used in errors).
  const std::string& name() const { return name_; }
  /// World ranks of the group's members, in group-rank order.
  const std::vector<int>& global_ranks() const { return global_ranks_; }
  /// This process's world rank.
  int global_rank() const { return global_ranks_[static_cast<std::size_t>(rank_)]; }
  /// The transport (for code that bypasses the protocol on purpose: a benchmark's raw baseline).
  Backend& backend() { return *backend_; }
  const Backend& backend() const { return *backend_; }

  // ---- blocking forms (issue + wait) -----------------------------------------------------------

  /// In place: t = op over all ranks of t. Any shape.
  void all_reduce(Tensor& t, ReduceOp op = ReduceOp::sum, const CallOpts& o = {});
  /// Concatenation of every rank's `in` along `dim`: [.., k, ..] -> [.., n*k, ..], rank-major.
  /// All ranks pass the same shape. dim 0 reads `in` in place (no copy); other dims copy.
  Tensor all_gather(const Tensor& in, int64_t dim = 0, const CallOpts& o = {});
  /// Reduce over ranks, then rank r keeps chunk r of `dim`: [.., n*k, ..] -> [.., k, ..].
  /// ShapeError if in.size(dim) % n != 0. dim 0 reads `in` in place; other dims copy.
  Tensor reduce_scatter(const Tensor& in, int64_t dim = 0, ReduceOp op = ReduceOp::sum,
                        const CallOpts& o = {});
  /// Equal splits along dim 0: [n*k, ..] -> [n*k, ..]; output chunk j = chunk r of rank j's input.
  Tensor all_to_all(const Tensor& in, const CallOpts& o = {});
  /// Uneven splits along dim 0 (torch.distributed.all_to_all_single with split sizes; what Megatron's
  /// MoEAlltoAllTokenDispatcher sends tokens with): in [Σ input_split_sizes, ..] -> out
  /// [Σ output_split_sizes, ..]. The next input_split_sizes[j] rows of `in` (in rank order) go to group
  /// rank j; out holds, in rank order, output_split_sizes[j] rows from rank j. The ranks first exchange
  /// their split sizes (one small all-gather, fingerprints on or off: a count the receiver does not expect
  /// would abort it inside Gloo or leave rows unwritten) and raise CollectiveMismatchError naming both
  /// ranks and both counts where rank i sends a different number of rows to j than j expects from i.
  /// ShapeError (before any communication) unless both lists have one entry per rank, none is negative,
  /// neither adds up to more than kMaxSplitElements elements (comm/shapes.h) and input_split_sizes add
  /// up to in.size(0).
  Tensor all_to_all(const Tensor& in, const std::vector<int64_t>& output_split_sizes,
                    const std::vector<int64_t>& input_split_sizes, const CallOpts& o = {});
  /// In place: every rank's t becomes root's t (root is a group rank).
  void broadcast(Tensor& t, int root, const CallOpts& o = {});
  /// Sends t to group rank dst; returns when the peer received it. Matched by the peer's recv.
  void send(const Tensor& t, int dst, const CallOpts& o = {});
  /// Receives into t (preallocated, same numel as the sender's tensor) from group rank src.
  void recv(Tensor& t, int src, const CallOpts& o = {});
  /// Returns when every rank of the group reached its barrier.
  void barrier(const CallOpts& o = {});

  // ---- async forms: validate now, queue, return a Work -----------------------------------------
  // Tensors are captured by handle (shared storage): keep them alive and untouched until wait().
  // `out` arguments may be undefined (Tensor{}) and are then allocated with the result shape;
  // otherwise they must already have the result shape (ShapeError).

  WorkPtr all_reduce_async(Tensor& t, ReduceOp op = ReduceOp::sum, const CallOpts& o = {});
  WorkPtr all_gather_async(const Tensor& in, Tensor& out, int64_t dim = 0, const CallOpts& o = {});
  WorkPtr reduce_scatter_async(const Tensor& in, Tensor& out, int64_t dim = 0, ReduceOp op = ReduceOp::sum,
                               const CallOpts& o = {});
  WorkPtr all_to_all_async(const Tensor& in, Tensor& out, const CallOpts& o = {});
  WorkPtr all_to_all_async(const Tensor& in, Tensor& out, const std::vector<int64_t>& output_split_sizes,
                           const std::vector<int64_t>& input_split_sizes, const CallOpts& o = {});
  WorkPtr broadcast_async(Tensor& t, int root, const CallOpts& o = {});
  /// Point-to-point calls bypass the group's queue (c10d semantics): they are posted at once, so a
  /// send and a recv may be issued in either order on the two sides.
  WorkPtr send_async(const Tensor& t, int dst, const CallOpts& o = {});
  WorkPtr recv_async(Tensor& t, int src, const CallOpts& o = {});
  WorkPtr barrier_async(const CallOpts& o = {});

  /// Creates a subgroup of the given world ranks (c10d new_group). Collective over THIS group: every
  /// rank of this group calls it with the same arguments, in the same order; members get the new
  /// group, non-members get nullptr. The subgroup shares this group's Recorder and starts with its
  /// options. ShapeError on an empty list, a duplicate, or a rank outside this group.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& global_ranks, const std::string& name);

  /// The recorder shared by this group, its parent and its subgroups.
  trace::Recorder& recorder() { return *recorder_; }
  /// The same recorder as a shared handle (to keep it after the group is gone).
  std::shared_ptr<trace::Recorder> recorder_ptr() const { return recorder_; }

  /// Options used by calls issued from now on (a copy).
  GroupOptions options() const;
  /// Replaces the options for calls issued from now on. ShapeError on a non-positive timeout.
  void set_options(const GroupOptions& o);
  /// Timeout of each later call. ShapeError unless positive.
  void set_timeout(std::chrono::milliseconds timeout);
  /// Turns the fingerprint check on or off for later calls (every rank must choose the same).
  void set_fingerprints(bool on);
  /// Link emulation for later calls (LinkModel{} turns it off).
  void set_link(const LinkModel& link);

  /// True after a communication failure; every later call raises CommError with dead_reason().
  bool dead() const;
  /// The first failure's message ("" while the group is alive).
  std::string dead_reason() const;
  /// Marks this group dead with `reason` and aborts its backend. Idempotent, thread-safe.
  void abort(const std::string& reason);

 private:
  /// Everything known about one call when it is issued.
  struct Call {
    OpKind op = OpKind::barrier;
    uint64_t id = 0;   ///< record id
    uint64_t seq = 0;  ///< collective #seq, or p2p number
    Shape shape;
    DType dtype = DType::f32;
    int64_t dim = 0;  ///< all_gather / reduce_scatter
    int64_t arg = 0;  ///< fingerprint argument: dim, root, or the new_group ranks hash
    int peer = 0;     ///< broadcast root, send dst, recv src
    ReduceOp reduce = ReduceOp::sum;
    uint64_t tensor_bytes = 0;
    /// all_to_all: bytes to / from each group rank; `uneven` when the caller gave split sizes.
    std::vector<uint64_t> send_bytes, recv_bytes;
    bool uneven = false;
    std::string label;
    GroupOptions opts;
    double t_issue = 0;
    bool async = true;
    /// Check mode (staged_output): copies the staged result into the caller's output; run() calls it
    /// once the call completed, after the emulated link's delay.
    std::function<void()> deliver;
  };
  struct Domain;
  using Body = std::function<void(const Call&)>;

  ProcessGroup(int rank, std::vector<int> global_ranks, std::string name, std::string key,
               std::unique_ptr<Backend> backend, std::shared_ptr<Domain> domain, GroupOptions options);
  static std::shared_ptr<ProcessGroup> make(int rank, std::vector<int> global_ranks, std::string name,
                                            std::string key, std::unique_ptr<Backend> backend,
                                            std::shared_ptr<Domain> domain, GroupOptions options);

  /// The issue-time description of a call (options, time, record id).
  Call make_call(OpKind op, const Tensor* t, const Shape& shape, uint64_t tensor_bytes, const CallOpts& o,
                 bool async);
  /// Queues a collective on the comm thread, or runs a blocking one with nothing queued before it on the
  /// calling thread, returning its finished Work (raises CommError at once if the group is dead).
  WorkPtr enqueue(Call call, Body body, const std::vector<Tensor>& read_buffers);
  /// Runs one collective (on the comm thread, or on the caller's: enqueue): fingerprint, body, link delay,
  /// record, error handling.
  void run(const Call& c, const Body& body, const WorkPtr& work);
  /// Posts a point-to-point call and queues its completion.
  WorkPtr post_p2p(Call c, const Tensor& t, int peer, bool is_send);
  /// With buffer checks on (check_buffers) and an async call: returns a fresh tensor for the call to
  /// write, fills `out` with NaN now and sets c.deliver to copy the result into `out` when the call
  /// completes, so that a consumer reading `out` before wait() reads NaN, never data that happened to
  /// arrive early (loopback is fast; an emulated link completes late on purpose). Otherwise `out`.
  Tensor staged_output(Call& c, Tensor& out) const;
  /// Fingerprints `reads` now and makes the Work raise at wait() if they changed (check_buffers).
  void guard_buffers(const Call& c, const WorkPtr& work, const std::vector<Tensor>& reads) const;
  /// The message of the exception in flight, as a CommError naming the call; records the failure and
  /// aborts every group of the world. Returns the error to finish the Work with.
  std::exception_ptr fail(const Call& c, trace::CommRecord rec);
  /// "rank 0 (tp rank 0 of 2): all_reduce #3 'grad' (4096 f32, group tp)"
  std::string where(const Call& c) const;
  trace::CommRecord base_record(const Call& c) const;
  void throw_if_dead(const Call& c) const;
  // The calls themselves (process_group_calls.cpp).
  WorkPtr issue_all_reduce(Tensor& t, ReduceOp op, const CallOpts& o, bool async);
  WorkPtr issue_all_gather(const Tensor& in, Tensor& out, int64_t dim, const CallOpts& o, bool async);
  WorkPtr issue_reduce_scatter(const Tensor& in, Tensor& out, int64_t dim, ReduceOp op, const CallOpts& o,
                               bool async);
  /// `uneven`: the split sizes are the caller's (else equal chunks of in.size(0) / n rows).
  WorkPtr issue_all_to_all(const Tensor& in, Tensor& out, std::vector<int64_t> output_split_sizes,
                           std::vector<int64_t> input_split_sizes, bool uneven, const CallOpts& o,
                           bool async);
  WorkPtr issue_broadcast(Tensor& t, int root, const CallOpts& o, bool async);
  WorkPtr issue_barrier(const CallOpts& o, bool async);

  int rank_;
  int size_;
  std::string name_;
  std::vector<int> global_ranks_;
  std::string key_;  ///< unique key of this group; subgroups extend it
  std::unique_ptr<Backend> backend_;
  std::shared_ptr<Domain> domain_;
  std::shared_ptr<trace::Recorder> recorder_;

  mutable std::mutex opt_mu_;
  GroupOptions options_;

  std::mutex issue_mu_;    ///< orders seq assignment with queueing
  uint64_t next_seq_ = 0;  ///< collectives issued (fingerprint sequence number)
  uint64_t next_p2p_ = 0;  ///< point-to-point calls issued
  int children_ = 0;       ///< new_group calls made on this group

  mutable std::mutex dead_mu_;
  std::atomic<bool> dead_{false};
  std::string dead_reason_;

  std::unique_ptr<CommWorker> worker_;      ///< collectives, in issue order
  std::unique_ptr<CommWorker> p2p_worker_;  ///< completion of posted sends/recvs
};

}  // namespace tpsp::comm
