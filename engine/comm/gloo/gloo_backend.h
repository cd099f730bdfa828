// GlooBackend: the CPU transport under ProcessGroup — Gloo's tcp transport (one full mesh of tcp pairs
// per group), Gloo's ring all-reduce, ring all-gather, all-to-all, binomial broadcast and barrier, our
// own ring reduce-scatter (ring_reduce_scatter.h), and UnboundBuffer send/recv. Transport only: the
// protocol (fingerprints, recording, link emulation, failure handling) is the ProcessGroup's.
#pragma once

#include <gloo/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/device.h>

#include <chrono>
#include <memory>
#include <string>

#include "engine/comm/backend.h"

namespace tpsp::comm {

class GlooBackend final : public Backend {
 public:
  /// Connects the world: `rank` of `size` in a full mesh over `store` (keys prefixed by `key_prefix`,
  /// unique per run and per call: a FileStore directory cannot be reused with the same prefix).
  /// Throws CommTimeoutError / CommError if the rendezvous fails or times out. Sets SIGPIPE to SIG_IGN
  /// if it has the default action, so a dead peer is an error, not a kill.
  static std::unique_ptr<GlooBackend> connect_world(int rank, int size,
                                                    std::shared_ptr<gloo::rendezvous::Store> store,
                                                    std::shared_ptr<gloo::transport::Device> device,
                                                    const std::string& key_prefix,
                                                    std::chrono::milliseconds timeout);

  ~GlooBackend() override;

  const char* name() const override { return "gloo"; }
  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  bool accepts(Device device) const override { return device == Device::cpu; }
  void all_reduce(float* buf, std::size_t count, ReduceOp op, const TransportCall& c) override;
  void all_gather(const void* in, void* out, std::size_t bytes, const TransportCall& c) override;
  void reduce_scatter(const float* in, float* out, std::size_t count, ReduceOp op,
                      const TransportCall& c) override;
  void all_to_all(const void* in, void* out, std::size_t bytes, const TransportCall& c) override;
  void all_to_all_v(const void* in, const std::vector<std::size_t>& send_bytes, void* out,
                    const std::vector<std::size_t>& recv_bytes, const TransportCall& c) override;
  void broadcast(void* buf, std::size_t bytes, int root, const TransportCall& c) override;
  void barrier(const TransportCall& c) override;
  std::unique_ptr<PendingP2P> send(const void* buf, std::size_t bytes, int dst) override;
  std::unique_ptr<PendingP2P> recv(void* buf, std::size_t bytes, int src) override;
  std::unique_ptr<Backend> new_group(const std::vector<int>& members, const std::string& key,
                                     std::chrono::milliseconds timeout) override;
  void abort() noexcept override;

  /// The Gloo context, for the benchmark's raw Gloo baseline (calls made on it bypass the protocol).
  std::shared_ptr<gloo::Context> context() const { return context_; }

 private:
  struct Shared;  // the store and device every group of one world uses
  GlooBackend(std::shared_ptr<gloo::Context> context, std::shared_ptr<Shared> shared);

  std::shared_ptr<gloo::Context> context_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace tpsp::comm
