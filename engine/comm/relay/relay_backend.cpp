// RelayBackend (relay_backend.h): requests over the relay's socket, replies read by one thread
// per connection and handed to the caller that waits for them.
#include "engine/comm/relay/relay_backend.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "engine/comm/comm_error.h"
#include "engine/comm/relay/protocol.h"

namespace tpsp::comm {

namespace {

using relay::Frame;
using relay::Kind;
using relay::Status;

/// One request waiting for its reply.
struct Waiter {
  uint32_t group = 0;
  void* out = nullptr;  // where an ok reply's payload goes
  std::size_t out_bytes = 0;
  bool done = false;
  bool ok = false;
  std::string error;
  uint32_t reply_group = 0;
};

bool read_all(int fd, void* buf, std::size_t n) {
  auto* p = static_cast<unsigned char*>(buf);
  while (n > 0) {
    const ssize_t got = ::read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

bool write_all(int fd, const void* buf, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(buf);
  while (n > 0) {
    const ssize_t put = ::send(fd, p, n, MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= static_cast<std::size_t>(put);
  }
  return true;
}

}  // namespace

/// The socket to the relay, shared by every group of one world: requests are written whole under a
/// lock; a detached thread reads the replies and completes their waiters.
class RelayConnection {
 public:
  RelayConnection(int fd, int rank) : fd_(fd), rank_(rank) {
    std::thread([this] { read_replies(); }).detach();  // lives as long as the process (never destroyed)
  }

  /// Sends a request and waits for its reply (payload into out[out_bytes], which must be its size).
  /// Returns the reply's group field. A request that is not `abortable` is not failed by an abort of its
  /// group (the scenario's own requests: its phase marks and inputs), only by the connection's end.
  uint32_t call(Frame f, const void* payload, const std::string& what, void* out, std::size_t out_bytes,
                std::chrono::milliseconds timeout, bool abortable = true) {
    auto w = post(f, payload, out, out_bytes, abortable);
    return wait(f.req, w, what, timeout);
  }

  /// Sends a request; its reply completes the returned waiter.
  std::shared_ptr<Waiter> post(Frame& f, const void* payload, void* out, std::size_t out_bytes,
                               bool abortable = true) {
    auto w = std::make_shared<Waiter>();
    w->group = abortable ? f.group : 0;  // relay group ids start at 1: abort_group never matches 0
    w->out = out;
    w->out_bytes = out_bytes;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) throw CommError(prefix() + "the relay's connection is closed: " + closed_why_);
      f.req = next_req_++;
      waiting_[f.req] = w;
    }
    std::lock_guard<std::mutex> lock(write_mu_);
    if (!write_all(fd_, &f, sizeof f) || (f.bytes > 0 && !write_all(fd_, payload, f.bytes))) {
      close_all("writing to the relay failed: " + std::string(std::strerror(errno)));
      throw CommError(prefix() + "writing to the relay failed");
    }
    return w;
  }

  /// Waits for request `req`'s reply; throws CommTimeoutError after `timeout`, CommError on an error reply.
  uint32_t wait(uint64_t req, const std::shared_ptr<Waiter>& w, const std::string& what,
                std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!done_.wait_for(lock, timeout, [&] { return w->done; })) {
      waiting_.erase(req);  // a late reply is dropped, never written into a buffer the caller gave up
      throw CommTimeoutError(prefix() + what + " timed out after " + std::to_string(timeout.count()) +
                             " ms: a peer did not make the matching call");
    }
    if (!w->ok) throw CommError(prefix() + what + ": " + w->error);
    return w->reply_group;
  }

  /// Fails every request of `group` waiting now (abort of that group).
  void abort_group(uint32_t group) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->second->group == group) {
        it->second->done = true;
        it->second->error = "the group was aborted";
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    done_.notify_all();
  }

  std::string prefix() const { return "rank " + std::to_string(rank_) + ": "; }

 private:
  void read_replies() {
    Frame f;
    while (read_all(fd_, &f, sizeof f)) {
      if (f.magic != relay::kMagic || f.kind != Kind::reply || f.bytes > relay::kMaxPayload) {
        close_all("the relay sent a malformed reply");
        return;
      }
      std::vector<unsigned char> payload(f.bytes);
      if (f.bytes > 0 && !read_all(fd_, payload.data(), payload.size())) break;
      std::lock_guard<std::mutex> lock(mu_);
      const auto it = waiting_.find(f.req);
      if (it == waiting_.end()) continue;  // timed out or aborted meanwhile
      Waiter& w = *it->second;
      w.done = true;
      w.reply_group = f.group;
      if (f.status != Status::ok) {
        w.error = std::string(payload.begin(), payload.end());
      } else if (payload.size() != w.out_bytes) {
        w.error = "the relay answered " + std::to_string(payload.size()) + " bytes where " +
                  std::to_string(w.out_bytes) + " were expected";
      } else {
        if (w.out_bytes > 0) std::memcpy(w.out, payload.data(), w.out_bytes);
        w.ok = true;
      }
      waiting_.erase(it);
      done_.notify_all();
    }
    close_all("the relay closed the connection (it ended, or a rank broke the protocol)");
  }

  void close_all(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    closed_why_ = why;
    for (auto& [req, w] : waiting_) {
      w->done = true;
      w->error = why;
    }
    waiting_.clear();
    done_.notify_all();
  }

  const int fd_;
  const int rank_;
  std::mutex write_mu_;
  std::mutex mu_;
  std::condition_variable done_;
  uint64_t next_req_ = 1;
  bool closed_ = false;
  std::string closed_why_;
  std::map<uint64_t, std::shared_ptr<Waiter>> waiting_;
};

namespace {

/// A posted send or recv: its reply completes it.
class RelayP2P final : public PendingP2P {
 public:
  RelayP2P(std::shared_ptr<RelayConnection> conn, uint64_t req, std::shared_ptr<Waiter> w, std::string what)
      : conn_(std::move(conn)), req_(req), w_(std::move(w)), what_(std::move(what)) {}
  void wait(std::chrono::milliseconds timeout) override { conn_->wait(req_, w_, what_, timeout); }

 private:
  std::shared_ptr<RelayConnection> conn_;
  uint64_t req_;
  std::shared_ptr<Waiter> w_;
  std::string what_;
};

std::string op_words(OpKind op, uint32_t tag) {
  return std::string("relay ") + op_name(op) + " (tag " + std::to_string(tag) + ")";
}

}  // namespace

std::unique_ptr<RelayBackend> RelayBackend::connect_world(int fd, int rank, int size, const std::string& key,
                                                          std::chrono::milliseconds timeout) {
  static std::mutex mu;  // one connection per descriptor and process, whatever the number of inits
  static std::map<int, std::shared_ptr<RelayConnection>>* conns =
      new std::map<int, std::shared_ptr<RelayConnection>>;
  std::shared_ptr<RelayConnection> conn;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto& c = (*conns)[fd];
    if (!c) c = std::make_shared<RelayConnection>(fd, rank);
    conn = c;
  }
  Frame f;
  f.kind = Kind::hello;
  f.bytes = key.size();
  const uint32_t group =
      conn->call(f, key.data(), "joining the world through the relay", nullptr, 0, timeout);
  if (group == 0) throw CommError(conn->prefix() + "the relay gave the world no group");
  return std::unique_ptr<RelayBackend>(new RelayBackend(conn, group, rank, size));
}

RelayBackend::RelayBackend(std::shared_ptr<RelayConnection> conn, uint32_t group, int rank, int size)
    : conn_(std::move(conn)), group_(group), rank_(rank), size_(size) {}

void RelayBackend::collective(OpKind op, ReduceOp reduce, int arg, const void* in, std::size_t in_bytes,
                              void* out, std::size_t out_bytes, const TransportCall& c) {
  Frame f;
  f.kind = Kind::collective;
  f.op = static_cast<uint8_t>(op);
  f.reduce = static_cast<uint8_t>(reduce);
  f.group = group_;
  f.tag = c.tag;
  f.arg = arg;
  f.bytes = in_bytes;
  conn_->call(f, in, op_words(op, c.tag), out, out_bytes, c.timeout);
}

void RelayBackend::all_reduce(float* buf, std::size_t count, ReduceOp op, const TransportCall& c) {
  collective(OpKind::all_reduce, op, -1, buf, count * sizeof(float), buf, count * sizeof(float), c);
}

void RelayBackend::all_gather(const void* in, void* out, std::size_t bytes, const TransportCall& c) {
  collective(OpKind::all_gather, ReduceOp::sum, -1, in, bytes, out, bytes * static_cast<std::size_t>(size_),
             c);
}

void RelayBackend::reduce_scatter(const float* in, float* out, std::size_t count, ReduceOp op,
                                  const TransportCall& c) {
  collective(OpKind::reduce_scatter, op, -1, in, count * sizeof(float) * static_cast<std::size_t>(size_), out,
             count * sizeof(float), c);
}

void RelayBackend::all_to_all(const void* in, void* out, std::size_t bytes, const TransportCall& c) {
  const std::vector<std::size_t> each(static_cast<std::size_t>(size_), bytes);
  all_to_all_v(in, each, out, each, c);
}

void RelayBackend::all_to_all_v(const void* in, const std::vector<std::size_t>& send_bytes, void* out,
                                const std::vector<std::size_t>& recv_bytes, const TransportCall& c) {
  const auto n = static_cast<std::size_t>(size_);
  std::vector<uint64_t> header(send_bytes.begin(), send_bytes.end());
  header.insert(header.end(), recv_bytes.begin(), recv_bytes.end());
  std::size_t sent = 0, expected = 0;
  for (std::size_t j = 0; j < n; ++j) sent += send_bytes[j], expected += recv_bytes[j];
  std::vector<unsigned char> payload(relay::split_header_bytes(n) + sent);
  std::memcpy(payload.data(), header.data(), relay::split_header_bytes(n));
  if (sent > 0) std::memcpy(payload.data() + relay::split_header_bytes(n), in, sent);
  collective(OpKind::all_to_all, ReduceOp::sum, -1, payload.data(), payload.size(), out, expected, c);
}

void RelayBackend::broadcast(void* buf, std::size_t bytes, int root, const TransportCall& c) {
  collective(OpKind::broadcast, ReduceOp::sum, root, buf, rank_ == root ? bytes : 0, buf, bytes, c);
}

void RelayBackend::barrier(const TransportCall& c) {
  collective(OpKind::barrier, ReduceOp::sum, -1, nullptr, 0, nullptr, 0, c);
}

std::unique_ptr<PendingP2P> RelayBackend::send(const void* buf, std::size_t bytes, int dst) {
  Frame f;
  f.kind = Kind::send;
  f.group = group_;
  f.arg = dst;
  f.bytes = bytes;
  auto w = conn_->post(f, buf, nullptr, 0);
  return std::make_unique<RelayP2P>(
      conn_, f.req, std::move(w),
      "relay send of " + std::to_string(bytes) + " bytes to group rank " + std::to_string(dst));
}

std::unique_ptr<PendingP2P> RelayBackend::recv(void* buf, std::size_t bytes, int src) {
  Frame f;
  f.kind = Kind::recv;
  f.group = group_;
  f.arg = src;
  f.aux = bytes;
  auto w = conn_->post(f, nullptr, buf, bytes);
  return std::make_unique<RelayP2P>(
      conn_, f.req, std::move(w),
      "relay recv of " + std::to_string(bytes) + " bytes from group rank " + std::to_string(src));
}

std::unique_ptr<Backend> RelayBackend::new_group(const std::vector<int>& members, const std::string& key,
                                                 std::chrono::milliseconds timeout) {
  std::string payload = key;
  payload.push_back('\0');
  for (int m : members) {
    const auto v = static_cast<int32_t>(m);
    payload.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  Frame f;
  f.kind = Kind::new_group;
  f.group = group_;
  f.aux = members.size();
  f.bytes = payload.size();
  const uint32_t group = conn_->call(f, payload.data(), "relay new_group " + key, nullptr, 0, timeout);
  int my_index = -1;
  for (std::size_t i = 0; i < members.size(); ++i)
    if (members[i] == rank_) my_index = static_cast<int>(i);
  if (my_index < 0 || group == 0) return nullptr;
  return std::unique_ptr<Backend>(new RelayBackend(conn_, group, my_index, static_cast<int>(members.size())));
}

void RelayBackend::mark(const std::string& phase, std::chrono::milliseconds timeout) {
  Frame f;
  f.kind = Kind::mark;
  f.group = group_;
  f.bytes = phase.size();
  conn_->call(f, phase.data(), "relay mark of phase " + phase, nullptr, 0, timeout, false);
}

void RelayBackend::input(const std::string& spec, void* out, std::size_t out_bytes,
                         std::chrono::milliseconds timeout) {
  Frame f;
  f.kind = Kind::input;
  f.group = group_;
  f.bytes = spec.size();
  conn_->call(f, spec.data(), "relay input " + spec, out, out_bytes, timeout, false);
}

void RelayBackend::abort() noexcept {
  conn_->abort_group(group_);
}

}  // namespace tpsp::comm
