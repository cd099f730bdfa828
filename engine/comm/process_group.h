// ProcessGroup and Work: the communication interface of the engine, in the shape of PyTorch c10d
// (torch/csrc/distributed/c10d/ProcessGroup.hpp, Work.hpp). GlooProcessGroup (engine/comm/gloo/)
// implements it over Gloo's tcp transport; a future NCCL backend implements the same interface.
//
// Semantics shared by every backend:
//  - Calls of one group execute in issue order, on every rank in the same order (a worker thread per
//    group). Blocking forms are the async form followed by wait().
//  - Argument errors (a dim-0 extent not divisible by the group size, mismatched shapes, bad ranks)
//    raise tpsp::ShapeError in the caller, before any communication.
//  - Failures during communication raise comm::CommError (comm_error.h) from the blocking call or
//    Work::wait(), naming this rank, the group and the call (op, #seq, label). After a failure the
//    group is dead and every later call raises at once.
//  - Every call is appended to the Recorder (op, group, dim, dtype, shape, bytes, times, label).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/comm/comm_error.h"
#include "engine/comm/link_model.h"
#include "engine/comm/op.h"
#include "engine/comm/recorder.h"
#include "engine/tensor.h"

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
};

/// Handle of an issued call (c10d Work). wait() blocks until the call finished and rethrows its
/// error (CommError or ShapeError); wait() may be called again and rethrows again.
class Work {
 public:
  virtual ~Work();
  /// Blocks until the call completed; rethrows the call's exception if it failed.
  virtual void wait() = 0;
  /// True once the call finished (successfully or not); never blocks.
  virtual bool is_completed() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

/// A group of ranks that communicate (c10d ProcessGroup). Abstract; see GlooProcessGroup.
/// Tensors are contiguous f32 (tpsp::Tensor). Shapes below: n = the group size, r = this group rank.
class ProcessGroup {
 public:
  virtual ~ProcessGroup();
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

  // ---- blocking forms (async + wait) -------------------------------------------------------------

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
  /// In place: every rank's t becomes root's t (root is a group rank).
  void broadcast(Tensor& t, int root, const CallOpts& o = {});
  /// Sends t to group rank dst; returns when the peer received it. Matched by the peer's recv.
  void send(const Tensor& t, int dst, const CallOpts& o = {});
  /// Receives into t (preallocated, same numel as the sender's tensor) from group rank src.
  void recv(Tensor& t, int src, const CallOpts& o = {});
  /// Returns when every rank of the group reached its barrier.
  void barrier(const CallOpts& o = {});

  // ---- async forms: validate now, queue, return a Work -------------------------------------------
  // Tensors are captured by handle (shared storage): keep them alive and untouched until wait().
  // `out` arguments may be undefined (Tensor{}) and are then allocated with the result shape;
  // otherwise they must already have the result shape (ShapeError).

  /// Async all_reduce: t (any shape) is reduced in place when the Work completes.
  virtual WorkPtr all_reduce_async(Tensor& t, ReduceOp op = ReduceOp::sum, const CallOpts& o = {}) = 0;
  /// Async all_gather: out = [.., n*k, ..] from in = [.., k, ..] along dim.
  virtual WorkPtr all_gather_async(const Tensor& in, Tensor& out, int64_t dim = 0,
                                   const CallOpts& o = {}) = 0;
  /// Async reduce_scatter: out = [.., k, ..] (chunk r) from in = [.., n*k, ..] along dim.
  virtual WorkPtr reduce_scatter_async(const Tensor& in, Tensor& out, int64_t dim = 0,
                                       ReduceOp op = ReduceOp::sum, const CallOpts& o = {}) = 0;
  /// Async all_to_all: out = [n*k, ..] from in = [n*k, ..] (chunk j of out from rank j).
  virtual WorkPtr all_to_all_async(const Tensor& in, Tensor& out, const CallOpts& o = {}) = 0;
  /// Async broadcast from group rank root, in place.
  virtual WorkPtr broadcast_async(Tensor& t, int root, const CallOpts& o = {}) = 0;
  /// Async send to group rank dst. Point-to-point calls bypass the group's queue (c10d semantics):
  /// they are posted at once, so a send and a recv may be issued in either order on the two sides.
  virtual WorkPtr send_async(const Tensor& t, int dst, const CallOpts& o = {}) = 0;
  /// Async recv from group rank src into t (preallocated, the sender's byte size).
  virtual WorkPtr recv_async(Tensor& t, int src, const CallOpts& o = {}) = 0;
  /// Async barrier: completes when every rank of the group issued its barrier.
  virtual WorkPtr barrier_async(const CallOpts& o = {}) = 0;

  /// Creates a subgroup of the given world ranks (c10d new_group). Collective over THIS group: every
  /// rank of this group calls it with the same arguments, in the same order; members get the new
  /// group, non-members get nullptr. The subgroup shares this group's Recorder and starts with its
  /// options. ShapeError on an empty list, a duplicate, or a rank outside this group.
  virtual std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& global_ranks,
                                                  const std::string& name) = 0;

  /// The recorder shared by this group, its parent and its subgroups.
  Recorder& recorder() { return *recorder_; }
  /// The same recorder as a shared handle (to keep it after the group is gone).
  std::shared_ptr<Recorder> recorder_ptr() const { return recorder_; }

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
  virtual bool dead() const = 0;
  /// The first failure's message ("" while the group is alive).
  virtual std::string dead_reason() const = 0;

 protected:
  /// For backends: `rank` of `size` in the group named `name` whose members are `global_ranks`.
  ProcessGroup(int rank, int size, std::string name, std::vector<int> global_ranks,
               std::shared_ptr<Recorder> recorder, GroupOptions options);
  /// True while the calling thread is inside one of the blocking forms above (so a backend can
  /// record the call as blocking rather than async).
  static bool in_blocking_call();

  int rank_;
  int size_;
  std::string name_;
  std::vector<int> global_ranks_;
  std::shared_ptr<Recorder> recorder_;

 private:
  mutable std::mutex opt_mu_;
  GroupOptions options_;
};

}  // namespace tpsp::comm
