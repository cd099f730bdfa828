#include "engine/comm/gloo/gloo_backend.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>
#include <signal.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <mutex>

#include "engine/comm/comm_error.h"
#include "engine/comm/gloo/ring_reduce_scatter.h"

namespace tpsp::comm {

namespace {

/// Gloo's tcp device has one thread that waits in epoll_wait for up to 10 ms at a time, and a pair that
/// stops listening (each pair, once, as it connects) or closes waits for that thread's next round
/// (Loop::unregisterDescriptor). With nothing else to wake it a round lasts the full 10 ms, so connecting
/// a group costs up to 10 ms per pair, one pair after the other, and closing it as much again. While a
/// LoopTicker is held, a timerfd registered with the loop wakes it every millisecond and those waits end
/// within a millisecond; the rest of the time the loop sleeps as before. Without a tcp
/// device or a timerfd it does nothing (the waits are then Gloo's own).
class LoopTicker final : public gloo::transport::tcp::Handler {
 public:
  explicit LoopTicker(const std::shared_ptr<gloo::transport::Device>& device)
      : device_(std::dynamic_pointer_cast<gloo::transport::tcp::Device>(device)) {
    if (!device_) return;
    fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd_ < 0) return;
    try {
      device_->registerDescriptor(fd_, EPOLLIN, this);
    } catch (...) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~LoopTicker() override {
    if (fd_ < 0) return;
    set(true);  // unregistering waits for a round of the loop too
    try {
      device_->unregisterDescriptor(fd_, this);
    } catch (...) {  // the loop is gone with the process; nothing to undo
    }
    ::close(fd_);
  }
  LoopTicker(const LoopTicker&) = delete;
  LoopTicker& operator=(const LoopTicker&) = delete;

  /// Runs on the loop's thread: consumes the expirations, so that the next one wakes it again.
  void handleEvents(int /*events*/) override {
    uint64_t expirations = 0;
    [[maybe_unused]] const ssize_t n = ::read(fd_, &expirations, sizeof expirations);
  }

  /// Ticks from now until the returned holder is destroyed (holders nest and may overlap).
  [[nodiscard]] std::shared_ptr<void> hold() {
    if (fd_ < 0) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    if (holders_++ == 0) set(true);
    return std::shared_ptr<void>(nullptr, [this](void*) {
      std::lock_guard<std::mutex> lock(mu_);
      if (--holders_ == 0) set(false);
    });
  }

 private:
  void set(bool on) {
    itimerspec spec{};
    if (on) spec.it_value.tv_nsec = spec.it_interval.tv_nsec = 1'000'000;
    ::timerfd_settime(fd_, 0, &spec, nullptr);
  }

  std::shared_ptr<gloo::transport::tcp::Device> device_;
  int fd_ = -1;
  std::mutex mu_;
  int holders_ = 0;
};

}  // namespace

struct GlooBackend::Shared {
  Shared(std::shared_ptr<gloo::rendezvous::Store> s, std::shared_ptr<gloo::transport::Device> d)
      : store(std::move(s)), device(std::move(d)), ticker(device) {}
  std::shared_ptr<gloo::rendezvous::Store> store;
  std::shared_ptr<gloo::transport::Device> device;
  LoopTicker ticker;  // declared after the device: unregistered from its loop before the device goes
};

namespace {

/// Slot of point-to-point messages; Gloo's collectives use prefixes 0x01..0x08, the ring 0x30.
constexpr uint8_t kP2PSlotPrefix = 0x31;
/// Tag of the barrier that ends a group's rendezvous (the ProcessGroup's tags are below 2^21).
constexpr uint32_t kConnectedBarrierTag = 1u << 21;

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

ReduceFn reduce_fn(ReduceOp op) {
  return op == ReduceOp::sum ? static_cast<ReduceFn>(&gloo::sum<float>)
                             : static_cast<ReduceFn>(&gloo::max<float>);
}

bool mentions_timeout(const std::string& what) {
  std::string w = what;
  std::transform(w.begin(), w.end(), w.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return w.find("timed out") != std::string::npos || w.find("timeout") != std::string::npos;
}

/// Runs `f` and translates Gloo's exceptions (gloo::IoException, gloo::EnforceNotMet — which is not a
/// gloo::Exception) into CommTimeoutError / CommError: no Gloo type leaves this file.
template <class F>
void translated(F&& f) {
  try {
    f();
  } catch (const gloo::IoException& e) {
    if (mentions_timeout(e.what())) throw CommTimeoutError(std::string("gloo: ") + e.what());
    throw CommError(std::string("a peer closed its connection or died [gloo: ") + e.what() + "]");
  } catch (const gloo::EnforceNotMet& e) {
    throw CommError(std::string("gloo: ") + e.what());
  } catch (const gloo::Exception& e) {
    throw CommError(std::string("gloo: ") + e.what());
  }
}

std::shared_ptr<gloo::Context> connect(int rank, int size, const std::string& key,
                                       gloo::rendezvous::Store& store,
                                       std::shared_ptr<gloo::transport::Device> device, LoopTicker& ticker,
                                       std::chrono::milliseconds timeout) {
  const auto ticking = ticker.hold();
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(timeout);
  gloo::rendezvous::PrefixStore prefixed(key, store);
  ctx->connectFullMesh(prefixed, device);
  if (size > 1) {
    // Gloo's connect returns on a pair's connecting side once the kernel has accepted the connection,
    // before the peer's event loop has taken it: a rank that went on, finished its work and exited could
    // close a pair its peer is still setting up (the peer then fails with "connection closed by peer").
    // After this barrier every member has finished connecting. Its tag is above any ProcessGroup tag.
    gloo::BarrierOptions opts(ctx);
    opts.setTag(kConnectedBarrierTag);
    opts.setTimeout(timeout);
    gloo::barrier(opts);
  }
  return ctx;
}

class GlooP2P final : public PendingP2P {
 public:
  GlooP2P(std::unique_ptr<gloo::transport::UnboundBuffer> buf, bool is_send)
      : buf_(std::move(buf)), is_send_(is_send) {}
  void wait(std::chrono::milliseconds timeout) override {
    translated([&] {
      const bool done = is_send_ ? buf_->waitSend(timeout) : buf_->waitRecv(timeout);
      if (!done) throw gloo::IoException(std::string(is_send_ ? "send" : "recv") + " was aborted");
    });
  }

 private:
  std::unique_ptr<gloo::transport::UnboundBuffer> buf_;
  bool is_send_;
};

}  // namespace

std::unique_ptr<GlooBackend> GlooBackend::connect_world(int rank, int size,
                                                        std::shared_ptr<gloo::rendezvous::Store> store,
                                                        std::shared_ptr<gloo::transport::Device> device,
                                                        const std::string& key_prefix,
                                                        std::chrono::milliseconds timeout) {
  // A write to a dead peer's socket raises SIGPIPE, whose default action kills the process before
  // Gloo can report the error. Ignore it (as Python, hence PyTorch, does) unless someone handles it.
  struct sigaction old {};
  if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  auto shared = std::make_shared<Shared>(std::move(store), std::move(device));
  const std::string key = key_prefix + ".world";
  const std::string what = "rank " + std::to_string(rank) + ": rendezvous of the world group (" +
                           std::to_string(size) + " ranks, store key '" + key +
                           "') failed (did every rank start, with the same store?): ";
  std::shared_ptr<gloo::Context> ctx;
  try {
    translated(
        [&] { ctx = connect(rank, size, key, *shared->store, shared->device, shared->ticker, timeout); });
  } catch (const CommTimeoutError& e) {
    throw CommTimeoutError(what + e.what());
  } catch (const CommError& e) {
    throw CommError(what + e.what());
  }
  return std::unique_ptr<GlooBackend>(new GlooBackend(std::move(ctx), std::move(shared)));
}

GlooBackend::GlooBackend(std::shared_ptr<gloo::Context> context, std::shared_ptr<Shared> shared)
    : context_(std::move(context)), shared_(std::move(shared)) {}

GlooBackend::~GlooBackend() {
  const auto ticking = shared_->ticker.hold();  // each pair's close waits for a round of the loop
  context_.reset();
}

void GlooBackend::all_reduce(float* buf, std::size_t count, ReduceOp op, const TransportCall& c) {
  translated([&] {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(buf, count);  // in place
    opts.setReduceFunction(reduce_fn(op));
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setTag(c.tag);
    opts.setTimeout(c.timeout);
    gloo::allreduce(opts);
  });
}

void GlooBackend::all_gather(const void* in, void* out, std::size_t bytes, const TransportCall& c) {
  translated([&] {
    gloo::AllgatherOptions opts(context_);
    opts.setInput(static_cast<uint8_t*>(const_cast<void*>(in)), bytes);  // read in place
    opts.setOutput(static_cast<uint8_t*>(out), bytes * static_cast<std::size_t>(size()));
    opts.setTag(c.tag);
    opts.setTimeout(c.timeout);
    gloo::allgather(opts);
  });
}

void GlooBackend::reduce_scatter(const float* in, float* out, std::size_t count, ReduceOp op,
                                 const TransportCall& c) {
  translated([&] { ring_reduce_scatter(context_, in, out, count, op, c.tag, c.timeout); });
}

void GlooBackend::all_to_all(const void* in, void* out, std::size_t bytes, const TransportCall& c) {
  translated([&] {
    gloo::AlltoallOptions opts(context_);
    const std::size_t total = bytes * static_cast<std::size_t>(size());
    opts.setInput(static_cast<uint8_t*>(const_cast<void*>(in)), total);
    opts.setOutput(static_cast<uint8_t*>(out), total);
    opts.setTag(c.tag);
    opts.setTimeout(c.timeout);
    gloo::alltoall(opts);
  });
}

void GlooBackend::all_to_all_v(const void* in, const std::vector<std::size_t>& send_bytes, void* out,
                               const std::vector<std::size_t>& recv_bytes, const TransportCall& c) {
  translated([&] {
    gloo::AlltoallvOptions opts(context_);
    auto counts = [](const std::vector<std::size_t>& v) { return std::vector<int64_t>(v.begin(), v.end()); };
    opts.setInput(static_cast<uint8_t*>(const_cast<void*>(in)), counts(send_bytes));
    opts.setOutput(static_cast<uint8_t*>(out), counts(recv_bytes));
    opts.setTag(c.tag);
    opts.setTimeout(c.timeout);
    gloo::alltoallv(opts);
  });
}

void GlooBackend::broadcast(void* buf, std::size_t bytes, int root, const TransportCall& c) {
  translated([&] {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(buf), bytes);  // in place on the root
    opts.setRoot(root);
    opts.setTag(c.tag);
    opts.setTimeout(c.timeout);
    gloo::broadcast(opts);
  });
}

void GlooBackend::barrier(const TransportCall& c) {
  translated([&] {
    gloo::BarrierOptions opts(context_);
    opts.setTag(c.tag);
    opts.setTimeout(c.timeout);
    gloo::barrier(opts);
  });
}

std::unique_ptr<PendingP2P> GlooBackend::send(const void* buf, std::size_t bytes, int dst) {
  std::unique_ptr<gloo::transport::UnboundBuffer> ub;
  translated([&] {
    ub = context_->createUnboundBuffer(const_cast<void*>(buf), bytes);
    ub->send(dst, gloo::Slot::build(kP2PSlotPrefix, 0));
  });
  return std::make_unique<GlooP2P>(std::move(ub), true);
}

std::unique_ptr<PendingP2P> GlooBackend::recv(void* buf, std::size_t bytes, int src) {
  std::unique_ptr<gloo::transport::UnboundBuffer> ub;
  translated([&] {
    ub = context_->createUnboundBuffer(buf, bytes);
    ub->recv(src, gloo::Slot::build(kP2PSlotPrefix, 0));
  });
  return std::make_unique<GlooP2P>(std::move(ub), false);
}

std::unique_ptr<Backend> GlooBackend::new_group(const std::vector<int>& members, const std::string& key,
                                                std::chrono::milliseconds timeout) {
  const auto it = std::find(members.begin(), members.end(), rank());
  if (it == members.end()) return nullptr;
  const int my_index = static_cast<int>(it - members.begin());
  std::shared_ptr<gloo::Context> ctx;
  translated([&] {
    ctx = connect(my_index, static_cast<int>(members.size()), key, *shared_->store, shared_->device,
                  shared_->ticker, timeout);
  });
  return std::unique_ptr<Backend>(new GlooBackend(std::move(ctx), shared_));
}

void GlooBackend::abort() noexcept {
  try {
    const auto ticking = shared_->ticker.hold();
    context_->closeConnections();
  } catch (...) {  // closing is best effort: the group is already marked dead
  }
}

}  // namespace tpsp::comm
