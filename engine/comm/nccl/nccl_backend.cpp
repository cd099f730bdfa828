// NCCL backend (nccl_backend.h). Every call: use the process's device, order the communicator's
// stream after the compute stream (event), enqueue the NCCL op(s), poll until they are enqueued and
// complete, or fail/abort at the deadline. One comm thread per group calls in; abort() from another
// thread only raises a flag that the polling loop acts on (ncclCommAbort from the thread that owns
// the communicator, never concurrently with a call on it).
#include "engine/comm/nccl/nccl_backend.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/comm_error.h"
#include "engine/error.h"
#include "engine/ops/cuda/cuda_check.h"

namespace tpsp::cuda {
namespace {

using Clock = std::chrono::steady_clock;

std::string nccl_words(ncclResult_t r, ncclComm_t comm) {
  std::string s = std::string(ncclGetErrorString(r));
  const char* last = ncclGetLastError(comm);
  if (last && *last) s += ": " + std::string(last);
  return s;
}

bool on_device(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

/// A device image of one buffer: the buffer itself when it is device memory, else a device copy
/// (filled from the host when `read`, copied back by `finish`). For the protocol's host buffers.
class DeviceStaged {
 public:
  DeviceStaged(const void* buf, std::size_t bytes, bool read)
      : buf_(const_cast<void*>(buf)), bytes_(bytes), host_(bytes > 0 && !on_device(buf)) {
    if (!host_) return;
    check_cuda(cudaMalloc(&dev_, bytes), "nccl: staging buffer");
    if (read) check_cuda(cudaMemcpy(dev_, buf, bytes, cudaMemcpyHostToDevice), "nccl: staging copy in");
  }
  ~DeviceStaged() {
    if (dev_) cudaFree(dev_);
  }
  DeviceStaged(const DeviceStaged&) = delete;
  DeviceStaged& operator=(const DeviceStaged&) = delete;
  void* get() const { return host_ ? dev_ : buf_; }
  void finish() {
    if (host_) check_cuda(cudaMemcpy(buf_, dev_, bytes_, cudaMemcpyDeviceToHost), "nccl: staging copy out");
  }

 private:
  void* buf_;
  std::size_t bytes_;
  bool host_;
  void* dev_ = nullptr;
};

ncclRedOp_t nccl_op(comm::ReduceOp op) {
  return op == comm::ReduceOp::max ? ncclMax : ncclSum;
}

class NcclBackend final : public comm::Backend {
 public:
  NcclBackend(ncclComm_t comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {
    use_process_device();
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "nccl: cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "nccl: cudaEventCreate");
    check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "nccl: cudaEventCreate");
  }

  ~NcclBackend() override {
    use_process_device_noexcept();
    if (comm_ && aborted_.load())
      ncclCommAbort(comm_);
    else if (comm_)
      ncclCommDestroy(comm_);
    cudaEventDestroy(ready_);
    cudaEventDestroy(done_);
    cudaStreamDestroy(stream_);
  }

  /// Polls `comm` until its pending operation is enqueued (ncclSuccess); aborts and throws on an
  /// error, on abort(), or at the deadline.
  static void wait_enqueued(ncclComm_t comm, const std::atomic<bool>* aborted, const char* call,
                            Clock::time_point deadline) {
    for (;;) {
      ncclResult_t st = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(comm, &st);
      if (q != ncclSuccess) st = q;
      if (st == ncclSuccess) return;
      if (st != ncclInProgress) {
        const std::string words = nccl_words(st, comm);
        ncclCommAbort(comm);
        throw comm::CommError(std::string(call) + ": NCCL error " + words);
      }
      check_deadline(comm, aborted, call, deadline);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  const char* name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // Host tensors (a host-code lab's small all-reduces) are staged through device memory, as fingerprints are.
  bool accepts(Device device) const override { return device == Device::cuda || device == Device::cpu; }

  void all_reduce(float* buf, std::size_t count, comm::ReduceOp op, const comm::TransportCall& c) override {
    DeviceStaged b(buf, count * sizeof(float), true);
    run("ncclAllReduce", c,
        [&] { return ncclAllReduce(b.get(), b.get(), count, ncclFloat32, nccl_op(op), comm_, stream_); });
    b.finish();
  }

  void all_gather(const void* in, void* out, std::size_t bytes, const comm::TransportCall& c) override {
    DeviceStaged i(in, bytes, true), o(out, bytes * static_cast<std::size_t>(size_), false);
    run("ncclAllGather", c, [&] { return ncclAllGather(i.get(), o.get(), bytes, ncclInt8, comm_, stream_); });
    o.finish();
  }

  void reduce_scatter(const float* in, float* out, std::size_t count, comm::ReduceOp op,
                      const comm::TransportCall& c) override {
    DeviceStaged i(in, count * sizeof(float) * static_cast<std::size_t>(size_), true),
        o(out, count * sizeof(float), false);
    run("ncclReduceScatter", c,
        [&] { return ncclReduceScatter(i.get(), o.get(), count, ncclFloat32, nccl_op(op), comm_, stream_); });
    o.finish();
  }

  void all_to_all(const void* in, void* out, std::size_t bytes, const comm::TransportCall& c) override {
    const std::size_t total = bytes * static_cast<std::size_t>(size_);
    DeviceStaged i(in, total, true), o(out, total, false);
    run("all_to_all (ncclGroupStart, ncclSend/ncclRecv per peer, ncclGroupEnd)", c, [&] {
      ncclResult_t r = ncclGroupStart();
      for (int j = 0; j < size_ && r == ncclSuccess; ++j) {
        const std::size_t off = static_cast<std::size_t>(j) * bytes;
        r = ncclSend(static_cast<const char*>(i.get()) + off, bytes, ncclInt8, j, comm_, stream_);
        if (r == ncclSuccess)
          r = ncclRecv(static_cast<char*>(o.get()) + off, bytes, ncclInt8, j, comm_, stream_);
      }
      const ncclResult_t end = ncclGroupEnd();
      return r != ncclSuccess ? r : end;
    });
    o.finish();
  }

  void all_to_all_v(const void* in, const std::vector<std::size_t>& send_bytes, void* out,
                    const std::vector<std::size_t>& recv_bytes, const comm::TransportCall& c) override {
    const std::size_t in_total = std::accumulate(send_bytes.begin(), send_bytes.end(), std::size_t{0});
    const std::size_t out_total = std::accumulate(recv_bytes.begin(), recv_bytes.end(), std::size_t{0});
    DeviceStaged i(in, in_total, true), o(out, out_total, false);
    run("all_to_all with split sizes (ncclGroupStart, ncclSend/ncclRecv per peer, ncclGroupEnd)", c, [&] {
      ncclResult_t r = ncclGroupStart();
      std::size_t send_off = 0, recv_off = 0;
      for (int j = 0; j < size_ && r == ncclSuccess; ++j) {
        const std::size_t sb = send_bytes[static_cast<std::size_t>(j)];
        const std::size_t rb = recv_bytes[static_cast<std::size_t>(j)];
        // A zero count on one side is a zero count on the other (the fingerprint checked it): both skip.
        if (sb > 0)
          r = ncclSend(static_cast<const char*>(i.get()) + send_off, sb, ncclInt8, j, comm_, stream_);
        if (r == ncclSuccess && rb > 0)
          r = ncclRecv(static_cast<char*>(o.get()) + recv_off, rb, ncclInt8, j, comm_, stream_);
        send_off += sb;
        recv_off += rb;
      }
      const ncclResult_t end = ncclGroupEnd();
      return r != ncclSuccess ? r : end;
    });
    o.finish();
  }

  void broadcast(void* buf, std::size_t bytes, int root, const comm::TransportCall& c) override {
    DeviceStaged b(buf, bytes, rank_ == root);
    run("ncclBroadcast", c,
        [&] { return ncclBroadcast(b.get(), b.get(), bytes, ncclInt8, root, comm_, stream_); });
    b.finish();
  }

  void barrier(const comm::TransportCall& c) override {
    float one = 1.f;  // an all-reduce of one float: returns when every rank's arrived
    all_reduce(&one, 1, comm::ReduceOp::sum, c);
  }

  std::unique_ptr<comm::PendingP2P> send(const void*, std::size_t, int) override { throw_no_p2p("send"); }
  std::unique_ptr<comm::PendingP2P> recv(void*, std::size_t, int) override { throw_no_p2p("recv"); }

  std::unique_ptr<comm::Backend> new_group(const std::vector<int>& members, const std::string& key,
                                           std::chrono::milliseconds timeout) override {
    int index = -1;
    for (std::size_t k = 0; k < members.size(); ++k)
      if (members[k] == rank_) index = static_cast<int>(k);
    use_process_device();
    throw_if_unusable("ncclCommSplit");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t child = nullptr;
    const std::string call = "ncclCommSplit (group " + key + ")";
    const ncclResult_t r = ncclCommSplit(comm_, index < 0 ? NCCL_SPLIT_NOCOLOR : 0, index, &child, &config);
    if (r != ncclSuccess && r != ncclInProgress) fail_now(r, call.c_str());
    try {
      wait_enqueued(child ? child : comm_, &aborted_, call.c_str(), Clock::now() + timeout);
    } catch (const comm::CommError&) {
      if (!child) comm_ = nullptr;  // the parent was the one polled, and is aborted
      throw;
    }
    if (index < 0) return nullptr;
    return std::make_unique<NcclBackend>(child, index, static_cast<int>(members.size()));
  }

  void abort() noexcept override { aborted_.store(true); }

 private:
  static void check_deadline(ncclComm_t comm, const std::atomic<bool>* aborted, const char* call,
                             Clock::time_point deadline) {
    if (aborted && aborted->load()) {
      ncclCommAbort(comm);
      throw comm::CommError(std::string(call) +
                            ": the communicator was aborted (another group of this world failed)");
    }
    if (Clock::now() > deadline) {
      ncclCommAbort(comm);
      throw comm::CommTimeoutError(std::string(call) +
                                   ": not complete within the timeout; communicator aborted");
    }
  }

  static void use_process_device_noexcept() {
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess || current != process_device())
      cudaSetDevice(process_device());
  }

  [[noreturn]] static void throw_no_p2p(const char* op) {
    throw ShapeError(std::string(op) +
                     " on the nccl backend: point-to-point calls are not supported yet; use the host-staged "
                     "backend (cuda-over-gloo) for send/recv");
  }

  void throw_if_unusable(const char* call) {
    if (!comm_)
      throw comm::CommError(std::string(call) +
                            ": the NCCL communicator was aborted after an earlier failure");
    if (aborted_.load()) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
      throw comm::CommError(std::string(call) +
                            ": the communicator was aborted (another group of this world failed)");
    }
  }

  [[noreturn]] void fail_now(ncclResult_t r, const char* call) {
    const std::string words = nccl_words(r, comm_);
    ncclCommAbort(comm_);
    comm_ = nullptr;
    throw comm::CommError(std::string(call) + ": NCCL error " + words);
  }

  /// One collective: stream after compute, enqueue, wait for enqueue and completion (deadline).
  template <class Enqueue>
  void run(const char* call, const comm::TransportCall& c, Enqueue&& enqueue) {
    use_process_device();
    throw_if_unusable(call);
    const Clock::time_point deadline = Clock::now() + c.timeout;
    check_cuda(cudaEventRecord(ready_, cudaStreamLegacy), "nccl: cudaEventRecord (compute stream)");
    check_cuda(cudaStreamWaitEvent(stream_, ready_, 0), "nccl: cudaStreamWaitEvent");
    try {
      const ncclResult_t r = enqueue();
      if (r != ncclSuccess && r != ncclInProgress) fail_now(r, call);
      wait_enqueued(comm_, &aborted_, call, deadline);
      check_cuda(cudaEventRecord(done_, stream_), "nccl: cudaEventRecord (comm stream)");
      for (;;) {  // completion, with NCCL's asynchronous errors and the deadline checked meanwhile
        const cudaError_t q = cudaEventQuery(done_);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) check_cuda(q, std::string(call) + ": completion");
        wait_enqueued(comm_, &aborted_, call, deadline);
        check_deadline(comm_, &aborted_, call, deadline);
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    } catch (const comm::CommError&) {
      comm_ = nullptr;  // aborted by the helper that threw
      throw;
    }
  }

  ncclComm_t comm_;
  int rank_, size_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
  std::atomic<bool> aborted_{false};
};

}  // namespace

std::unique_ptr<comm::Backend> nccl_world(comm::Backend& bootstrap, std::chrono::milliseconds timeout,
                                          uint32_t bootstrap_tag) {
  const int rank = bootstrap.rank(), size = bootstrap.size();
  use_process_device();
  ncclUniqueId id{};
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) throw comm::CommError(std::string("ncclGetUniqueId: ") + ncclGetErrorString(r));
  }
  if (size > 1) bootstrap.broadcast(&id, sizeof(id), 0, comm::TransportCall{bootstrap_tag, timeout});
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const std::string call = "ncclCommInitRankConfig (rank " + std::to_string(rank) + " of " +
                           std::to_string(size) + ", CUDA device " + std::to_string(process_device()) + ")";
  const ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    const std::string words = nccl_words(r, comm);
    if (comm) ncclCommAbort(comm);
    throw comm::CommError(
        call + ": NCCL error " + words +
        " (NCCL needs one GPU per rank; several ranks on one GPU need the host-staged backend)");
  }
  NcclBackend::wait_enqueued(comm, nullptr, call.c_str(), Clock::now() + timeout);
  return std::make_unique<NcclBackend>(comm, rank, size);
}

}  // namespace tpsp::cuda
