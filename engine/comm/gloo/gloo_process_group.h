// GlooProcessGroup: ProcessGroup over Gloo's tcp transport (the CPU backend), in the manner of PyTorch
// c10d ProcessGroupGloo, with three additions the lessons need: a real ring reduce-scatter, collective
// fingerprints, and link emulation. One Gloo context (full mesh of tcp pairs) per group.
//
// Collectives run on the group's worker thread in issue order: optional fingerprint check, the Gloo
// call, optional sleep until the emulated link would have finished, then a Recorder entry.
// Point to point calls are posted at once from the caller and completed on a second thread.
// On any failure the group records it, marks itself and every group of the same world dead, and
// closes their connections (gloo::Context::closeConnections) so that peers fail within about a
// second instead of waiting for their own timeout.
#pragma once

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/device.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/comm/gloo/work_queue.h"
#include "engine/comm/process_group.h"

namespace tpsp::comm {

struct GlooDomain;

/// The Gloo backend of ProcessGroup (see process_group.h for the semantics of each call).
class GlooProcessGroup final : public ProcessGroup, public std::enable_shared_from_this<GlooProcessGroup> {
 public:
  /// Connects the world group of `size` ranks: a full mesh over `store`, whose keys are prefixed by
  /// `key_prefix` (unique per run and per call: a FileStore directory cannot be reused with the same
  /// prefix). Throws CommError if the rendezvous fails or times out (options.timeout).
  /// Sets SIGPIPE to SIG_IGN if it has the default action, so a dead peer is an error, not a kill.
  static std::shared_ptr<GlooProcessGroup> create_world(int rank, int size,
                                                        std::shared_ptr<gloo::rendezvous::Store> store,
                                                        std::shared_ptr<gloo::transport::Device> device,
                                                        const std::string& key_prefix, GroupOptions options);
  ~GlooProcessGroup() override;

  WorkPtr all_reduce_async(Tensor& t, ReduceOp op = ReduceOp::sum, const CallOpts& o = {}) override;
  WorkPtr all_gather_async(const Tensor& in, Tensor& out, int64_t dim = 0, const CallOpts& o = {}) override;
  WorkPtr reduce_scatter_async(const Tensor& in, Tensor& out, int64_t dim = 0, ReduceOp op = ReduceOp::sum,
                               const CallOpts& o = {}) override;
  WorkPtr all_to_all_async(const Tensor& in, Tensor& out, const CallOpts& o = {}) override;
  WorkPtr broadcast_async(Tensor& t, int root, const CallOpts& o = {}) override;
  WorkPtr send_async(const Tensor& t, int dst, const CallOpts& o = {}) override;
  WorkPtr recv_async(Tensor& t, int src, const CallOpts& o = {}) override;
  WorkPtr barrier_async(const CallOpts& o = {}) override;
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& global_ranks,
                                          const std::string& name) override;

  bool dead() const override;
  std::string dead_reason() const override;

  /// Marks this group dead with `reason` and closes its connections. Idempotent, thread-safe.
  void abort(const std::string& reason);
  /// The Gloo context, for code that bypasses the group on purpose (the benchmark's raw Gloo
  /// baseline). Calls made on it directly are neither ordered, fingerprinted nor recorded.
  std::shared_ptr<gloo::Context> gloo_context() const { return ctx_; }

 private:
  /// Everything known about one call when it is issued.
  struct Call {
    OpKind op = OpKind::barrier;
    uint64_t seq = 0;
    Shape shape;
    DType dtype = DType::f32;
    int64_t dim = 0;  ///< all_gather / reduce_scatter
    int64_t arg = 0;  ///< fingerprint argument: dim, root, or the new_group ranks hash
    int peer = 0;     ///< broadcast root, send dst, recv src
    ReduceOp reduce = ReduceOp::sum;
    uint64_t tensor_bytes = 0;
    std::string label;
    GroupOptions opts;
    double t_issue = 0;
    bool async = true;
  };
  using Body = std::function<void(const Call&)>;

  GlooProcessGroup(int rank, std::vector<int> global_ranks, std::string name, std::string key,
                   std::shared_ptr<gloo::Context> ctx, std::shared_ptr<GlooDomain> domain,
                   GroupOptions options);
  static std::shared_ptr<GlooProcessGroup> make(int rank, std::vector<int> global_ranks, std::string name,
                                                std::string key, std::shared_ptr<gloo::Context> ctx,
                                                std::shared_ptr<GlooDomain> domain, GroupOptions options);

  /// Fills the issue-time fields of a call (seq for collectives, options, time).
  Call make_call(OpKind op, const Shape& shape, uint64_t tensor_bytes, const CallOpts& o);
  /// Queues a collective on the worker (raises CommError at once if the group is dead).
  WorkPtr enqueue(Call call, Body body);
  /// Runs one collective on the worker thread: fingerprint, body, link delay, record, error handling.
  void run(const Call& c, const Body& body);
  /// Finishes a point-to-point call on the p2p thread.
  void run_p2p(const Call& c, const std::function<void()>& wait_body);
  /// Translates the exception in flight into a CommError naming the call, records the failure,
  /// aborts every group of the world and throws.
  [[noreturn]] void fail(const Call& c, CommRecord rec);
  /// "rank 0 (tp rank 0 of 2): all_reduce #3 'grad' (4096 f32, group tp)"
  std::string where(const Call& c) const;
  CommRecord base_record(const Call& c) const;
  void throw_if_dead(const Call& c) const;
  /// Gloo tag of call `seq` (the fingerprint uses tag + 1).
  static uint32_t tag_of(uint64_t seq) { return static_cast<uint32_t>((seq % (1u << 20)) * 2); }

  std::string key_;  ///< Store key prefix of this group's rendezvous; children extend it.
  std::shared_ptr<gloo::Context> ctx_;
  std::shared_ptr<GlooDomain> domain_;

  std::mutex issue_mu_;    ///< Orders seq assignment with queueing.
  uint64_t next_seq_ = 0;  ///< Collectives issued (fingerprint sequence number).
  uint64_t next_p2p_ = 0;  ///< Point-to-point calls issued.
  int children_ = 0;       ///< new_group calls made on this group.

  mutable std::mutex dead_mu_;
  std::atomic<bool> dead_{false};
  std::string dead_reason_;

  std::unique_ptr<CommWorker> worker_;      ///< Collectives, in issue order.
  std::unique_ptr<CommWorker> p2p_worker_;  ///< Completion of posted sends/recvs.
};

}  // namespace tpsp::comm
