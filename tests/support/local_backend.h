// A test Backend: the ranks are threads of one process that meet in a shared Hub, so the
// ProcessGroup protocol (validation, sequence numbers, fingerprints, recording, link emulation, buffer
// checks, float32 accumulation of bf16) can be tested without Gloo, and deterministically. Transport
// only, like any Backend (engine/comm/backend.h): reductions sum in rank order in float32.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "engine/comm/backend.h"
#include "engine/comm/process_group.h"

namespace tpsp::testing {

struct LocalHub;

class LocalBackend final : public comm::Backend {
 public:
  LocalBackend(std::shared_ptr<LocalHub> hub, int rank);
  const char* name() const override { return "test"; }
  int rank() const override { return rank_; }
  int size() const override;
  bool accepts(Device device) const override { return device == Device::cpu; }
  void all_reduce(float* buf, std::size_t count, comm::ReduceOp op, const comm::TransportCall& c) override;
  void all_gather(const void* in, void* out, std::size_t bytes, const comm::TransportCall& c) override;
  void reduce_scatter(const float* in, float* out, std::size_t count, comm::ReduceOp op,
                      const comm::TransportCall& c) override;
  void all_to_all(const void* in, void* out, std::size_t bytes, const comm::TransportCall& c) override;
  void all_to_all_v(const void* in, const std::vector<std::size_t>& send_bytes, void* out,
                    const std::vector<std::size_t>& recv_bytes, const comm::TransportCall& c) override;
  void broadcast(void* buf, std::size_t bytes, int root, const comm::TransportCall& c) override;
  void barrier(const comm::TransportCall& c) override;
  std::unique_ptr<comm::PendingP2P> send(const void* buf, std::size_t bytes, int dst) override;
  std::unique_ptr<comm::PendingP2P> recv(void* buf, std::size_t bytes, int src) override;
  std::unique_ptr<comm::Backend> new_group(const std::vector<int>& members, const std::string& key,
                                           std::chrono::milliseconds timeout) override;
  void abort() noexcept override;

 private:
  /// Meets every rank at `tag` with `in`; runs `compute(all inputs)` for this rank once all arrived,
  /// then `publish()` once every rank finished reading (so in-place results never race a reader).
  void meet(uint32_t tag, const void* in, std::chrono::milliseconds timeout,
            const std::function<void(const std::vector<const void*>&)>& compute,
            const std::function<void()>& publish);
  std::shared_ptr<LocalHub> hub_;
  int rank_;
};

/// Runs body(world group) on `n` threads, one world ProcessGroup each over LocalBackends of one hub;
/// rethrows the first exception a rank raised (after every thread ended).
void run_local_ranks(int n, const std::function<void(comm::ProcessGroup&)>& body,
                     const comm::GroupOptions& options = {});

}  // namespace tpsp::testing
