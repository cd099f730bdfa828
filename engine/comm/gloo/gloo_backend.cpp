#include "engine/comm/gloo/gloo_backend.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>
#include <signal.h>

#include <algorithm>
#include <cctype>

#include "engine/comm/comm_error.h"
#include "engine/comm/gloo/ring_reduce_scatter.h"

namespace tpsp::comm {

struct GlooBackend::Shared {
  std::shared_ptr<gloo::rendezvous::Store> store;
  std::shared_ptr<gloo::transport::Device> device;
};

namespace {

/// Slot of point-to-point messages; Gloo's collectives use prefixes 0x01..0x08, the ring 0x30.
constexpr uint8_t kP2PSlotPrefix = 0x31;

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
                                       std::shared_ptr<gloo::transport::Device> device,
                                       std::chrono::milliseconds timeout) {
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(timeout);
  gloo::rendezvous::PrefixStore prefixed(key, store);
  ctx->connectFullMesh(prefixed, device);
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

PendingP2P::~PendingP2P() = default;
Backend::~Backend() = default;

std::unique_ptr<GlooBackend> GlooBackend::connect_world(int rank, int size,
                                                        std::shared_ptr<gloo::rendezvous::Store> store,
                                                        std::shared_ptr<gloo::transport::Device> device,
                                                        const std::string& key_prefix,
                                                        std::chrono::milliseconds timeout) {
  // A write to a dead peer's socket raises SIGPIPE, whose default action kills the process before
  // Gloo can report the error. Ignore it (as Python, hence PyTorch, does) unless someone handles it.
  struct sigaction old {};
  if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  auto shared = std::make_shared<Shared>(Shared{std::move(store), std::move(device)});
  const std::string key = key_prefix + ".world";
  const std::string what = "rank " + std::to_string(rank) + ": rendezvous of the world group (" +
                           std::to_string(size) + " ranks, store key '" + key +
                           "') failed (did every rank start, with the same store?): ";
  std::shared_ptr<gloo::Context> ctx;
  try {
    translated([&] { ctx = connect(rank, size, key, *shared->store, shared->device, timeout); });
  } catch (const CommTimeoutError& e) {
    throw CommTimeoutError(what + e.what());
  } catch (const CommError& e) {
    throw CommError(what + e.what());
  }
  return std::unique_ptr<GlooBackend>(new GlooBackend(std::move(ctx), std::move(shared)));
}

GlooBackend::GlooBackend(std::shared_ptr<gloo::Context> context, std::shared_ptr<Shared> shared)
    : context_(std::move(context)), shared_(std::move(shared)) {}

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
    ctx = connect(my_index, static_cast<int>(members.size()), key, *shared_->store, shared_->device, timeout);
  });
  return std::unique_ptr<Backend>(new GlooBackend(std::move(ctx), shared_));
}

void GlooBackend::abort() noexcept {
  try {
    context_->closeConnections();
  } catch (...) {  // closing is best effort: the group is already marked dead
  }
}

}  // namespace tpsp::comm
