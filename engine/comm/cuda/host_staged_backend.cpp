// The host-staged CUDA backend (host_staged_backend.h): copy device buffers to host memory, run the
// inner transport, copy the results back. All copies are cudaMemcpy on the legacy default stream,
// so a copy of an input starts after every kernel the compute thread launched before it, and the
// call returns only once its results are on the device.
#include "engine/comm/cuda/host_staged_backend.h"

#include <cuda_runtime.h>

#include <numeric>
#include <string>
#include <vector>

#include "engine/comm/comm_error.h"
#include "engine/error.h"
#include "engine/ops/cuda/cuda_check.h"

namespace tpsp::cuda {
namespace {

/// True if p is device memory (cudaPointerGetAttributes: unregistered host memory is "not device").
bool on_device(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // clear the error, so that no later check reports it
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

void copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, const char* what) {
  if (bytes == 0) return;
  use_process_device();
  const cudaError_t e = cudaMemcpy(dst, src, bytes, kind);
  if (e != cudaSuccess)
    throw comm::CommError(std::string("host-staged ") + what + ": cudaMemcpy of " + std::to_string(bytes) +
                          " bytes failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

/// A host image of one buffer of a call: the buffer itself when it is host memory, else a host copy
/// (filled from the device when `read`, written back by `finish`).
class Staged {
 public:
  Staged(const void* buf, std::size_t bytes, bool read, const char* what)
      : buf_(const_cast<void*>(buf)), bytes_(bytes), device_(on_device(buf)), what_(what) {
    if (!device_) return;
    host_.resize(bytes);
    if (read) copy(host_.data(), buf, bytes, cudaMemcpyDeviceToHost, what);
  }
  void* host() { return device_ ? static_cast<void*>(host_.data()) : buf_; }
  /// Copies the host image back to the device (the results of the call).
  void finish() {
    if (device_) copy(buf_, host_.data(), bytes_, cudaMemcpyHostToDevice, what_);
  }

 private:
  void* buf_;
  std::size_t bytes_;
  bool device_;
  const char* what_;
  std::vector<unsigned char> host_;
};

/// A posted send/recv over a host image; a recv copies to the device when it completes.
class StagedP2P final : public comm::PendingP2P {
 public:
  StagedP2P(std::unique_ptr<Staged> staged, std::unique_ptr<comm::PendingP2P> inner, bool is_recv)
      : staged_(std::move(staged)), inner_(std::move(inner)), is_recv_(is_recv) {}
  void wait(std::chrono::milliseconds timeout) override {
    inner_->wait(timeout);
    if (is_recv_) staged_->finish();
  }

 private:
  std::unique_ptr<Staged> staged_;
  std::unique_ptr<comm::PendingP2P> inner_;
  bool is_recv_;
};

class HostStagedBackend final : public comm::Backend {
 public:
  explicit HostStagedBackend(std::unique_ptr<comm::Backend> inner)
      : inner_(std::move(inner)), name_(std::string("cuda-over-") + inner_->name()) {}

  const char* name() const override { return name_.c_str(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  bool accepts(Device device) const override { return device == Device::cpu || device == Device::cuda; }

  void all_reduce(float* buf, std::size_t count, comm::ReduceOp op, const comm::TransportCall& c) override {
    Staged b(buf, count * sizeof(float), true, "all_reduce");
    inner_->all_reduce(static_cast<float*>(b.host()), count, op, c);
    b.finish();
  }

  void all_gather(const void* in, void* out, std::size_t bytes, const comm::TransportCall& c) override {
    Staged i(in, bytes, true, "all_gather");
    Staged o(out, bytes * static_cast<std::size_t>(size()), false, "all_gather");
    inner_->all_gather(i.host(), o.host(), bytes, c);
    o.finish();
  }

  void reduce_scatter(const float* in, float* out, std::size_t count, comm::ReduceOp op,
                      const comm::TransportCall& c) override {
    Staged i(in, count * sizeof(float) * static_cast<std::size_t>(size()), true, "reduce_scatter");
    Staged o(out, count * sizeof(float), false, "reduce_scatter");
    inner_->reduce_scatter(static_cast<const float*>(i.host()), static_cast<float*>(o.host()), count, op, c);
    o.finish();
  }

  void all_to_all(const void* in, void* out, std::size_t bytes, const comm::TransportCall& c) override {
    const std::size_t total = bytes * static_cast<std::size_t>(size());
    Staged i(in, total, true, "all_to_all");
    Staged o(out, total, false, "all_to_all");
    inner_->all_to_all(i.host(), o.host(), bytes, c);
    o.finish();
  }

  void all_to_all_v(const void* in, const std::vector<std::size_t>& send_bytes, void* out,
                    const std::vector<std::size_t>& recv_bytes, const comm::TransportCall& c) override {
    Staged i(in, std::accumulate(send_bytes.begin(), send_bytes.end(), std::size_t{0}), true, "all_to_all");
    Staged o(out, std::accumulate(recv_bytes.begin(), recv_bytes.end(), std::size_t{0}), false, "all_to_all");
    inner_->all_to_all_v(i.host(), send_bytes, o.host(), recv_bytes, c);
    o.finish();
  }

  void broadcast(void* buf, std::size_t bytes, int root, const comm::TransportCall& c) override {
    Staged b(buf, bytes, rank() == root, "broadcast");
    inner_->broadcast(b.host(), bytes, root, c);
    b.finish();
  }

  void barrier(const comm::TransportCall& c) override { inner_->barrier(c); }

  std::unique_ptr<comm::PendingP2P> send(const void* buf, std::size_t bytes, int dst) override {
    auto staged = std::make_unique<Staged>(buf, bytes, true, "send");
    auto pending = inner_->send(staged->host(), bytes, dst);
    return std::make_unique<StagedP2P>(std::move(staged), std::move(pending), false);
  }

  std::unique_ptr<comm::PendingP2P> recv(void* buf, std::size_t bytes, int src) override {
    auto staged = std::make_unique<Staged>(buf, bytes, false, "recv");
    auto pending = inner_->recv(staged->host(), bytes, src);
    return std::make_unique<StagedP2P>(std::move(staged), std::move(pending), true);
  }

  std::unique_ptr<comm::Backend> new_group(const std::vector<int>& members, const std::string& key,
                                           std::chrono::milliseconds timeout) override {
    std::unique_ptr<comm::Backend> child = inner_->new_group(members, key, timeout);
    return child ? std::make_unique<HostStagedBackend>(std::move(child)) : nullptr;
  }

  void abort() noexcept override { inner_->abort(); }
  comm::Backend* inner() override { return inner_.get(); }

 private:
  std::unique_ptr<comm::Backend> inner_;
  std::string name_;
};

}  // namespace

std::unique_ptr<comm::Backend> host_staged(std::unique_ptr<comm::Backend> inner) {
  TPSP_CHECK(inner != nullptr, "host_staged: no inner backend");
  return std::make_unique<HostStagedBackend>(std::move(inner));
}

}  // namespace tpsp::cuda
