// Backend: the transport under a ProcessGroup — moving bytes and reducing float32 buffers between
// the ranks of one group, and nothing else. Everything that makes communication observable and safe
// (argument checks, sequence numbers, fingerprints, recording, link emulation, timeouts and failure
// handling, the float32 accumulation of low-precision reductions) is the ProcessGroup's
// (process_group.h), so a new transport (NCCL, CUDA tensors staged over Gloo, a test backend) is one
// class of this interface. Shapes of the idea: PyTorch c10d's Backend under ProcessGroup.
//
// Contract:
//  - Collectives are blocking and are called one at a time (on the group's comm thread, or on the
//    issuing thread for a blocking call with nothing queued before it), in the same
//    order on every rank; `tag` is unique per call of the group (reuse only after 2^20 calls) and
//    `timeout` bounds the call.
//  - Point-to-point calls are posted from the caller's thread at once (c10d semantics: a send and a
//    recv may be posted in either order on the two sides) and completed later through PendingP2P.
//  - Errors: CommTimeoutError when the peers did not arrive within the timeout, CommError for
//    anything else that went wrong on the wire (a dead peer, a closed connection), with the
//    transport's own words; transport-specific exception types never leave a backend.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/op.h"
#include "engine/tensor.h"

namespace tpsp::comm {

/// What a transport needs to know about one collective besides its buffers.
struct TransportCall {
  uint32_t tag = 0;
  std::chrono::milliseconds timeout{60000};
};

/// A posted send or recv; wait() completes it (CommTimeoutError after `timeout`).
class PendingP2P {
 public:
  virtual ~PendingP2P();
  virtual void wait(std::chrono::milliseconds timeout) = 0;
};

class Backend {
 public:
  virtual ~Backend();
  /// "gloo", "test", ...
  virtual const char* name() const = 0;
  /// This rank in the group, and the group size.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// True if the backend moves tensors on this device (Gloo: cpu).
  virtual bool accepts(Device device) const = 0;

  /// In place: buf[count] = op over the ranks of buf (float32).
  virtual void all_reduce(float* buf, std::size_t count, ReduceOp op, const TransportCall& c) = 0;
  /// out[size·bytes] = every rank's in[bytes], rank-major.
  virtual void all_gather(const void* in, void* out, std::size_t bytes, const TransportCall& c) = 0;
  /// out[count] = op over the ranks of chunk `rank` of in[size·count] (float32).
  virtual void reduce_scatter(const float* in, float* out, std::size_t count, ReduceOp op,
                              const TransportCall& c) = 0;
  /// out chunk j [bytes] = chunk `rank` of rank j's in [size·bytes].
  virtual void all_to_all(const void* in, void* out, std::size_t bytes, const TransportCall& c) = 0;
  /// Uneven all-to-all: send_bytes[j] bytes of `in` (in peer order, packed) go to rank j, and
  /// recv_bytes[j] bytes from rank j land in `out` (in peer order, packed); both vectors have size()
  /// entries, and rank i's send_bytes[j] equals rank j's recv_bytes[i] (the ProcessGroup checks it
  /// before the call when fingerprints are on). Source: gloo::alltoallv, NCCL's grouped send/recv.
  virtual void all_to_all_v(const void* in, const std::vector<std::size_t>& send_bytes, void* out,
                            const std::vector<std::size_t>& recv_bytes, const TransportCall& c) = 0;
  /// In place: every rank's buf[bytes] becomes root's.
  virtual void broadcast(void* buf, std::size_t bytes, int root, const TransportCall& c) = 0;
  virtual void barrier(const TransportCall& c) = 0;
  /// Posts a send of buf[bytes] to group rank dst / a recv into buf[bytes] from group rank src.
  /// The buffer must stay alive and untouched until the PendingP2P completes.
  virtual std::unique_ptr<PendingP2P> send(const void* buf, std::size_t bytes, int dst) = 0;
  virtual std::unique_ptr<PendingP2P> recv(void* buf, std::size_t bytes, int src) = 0;

  /// The transport of a subgroup: collective over this group (called on its comm thread by every rank
  /// with the same arguments); `members` are group ranks of THIS group in the new group's rank order,
  /// `key` is unique per subgroup. Returns null on ranks that are not members.
  virtual std::unique_ptr<Backend> new_group(const std::vector<int>& members, const std::string& key,
                                             std::chrono::milliseconds timeout) = 0;
  /// Makes every pending and later call of this backend fail at once (close its connections).
  virtual void abort() noexcept = 0;
  /// The transport this one wraps (a staging layer's inner backend), else null: how a caller finds
  /// the grader's relay (relay/relay_backend.h) under a device's staging layer.
  virtual Backend* inner() { return nullptr; }
};

}  // namespace tpsp::comm
