#include "tests/support/local_backend.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "engine/comm/comm_error.h"

namespace tpsp::testing {

struct LocalHub {
  explicit LocalHub(int n) : size(n) {}
  struct Meeting {
    std::vector<const void*> in;
    int arrived = 0, done = 0, left = 0;
  };
  struct Message {
    const void* src = nullptr;
    void* dst = nullptr;
    std::size_t bytes = 0;
    bool matched = false;
  };
  int size;
  std::mutex mu;
  std::condition_variable cv;
  bool aborted = false;
  std::map<uint32_t, Meeting> meetings;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Message>>> sends, recvs;  // (src, dst)
  std::map<std::string, std::shared_ptr<LocalHub>> children;

  /// Waits on `pred` until the deadline; CommError once aborted, CommTimeoutError at the deadline.
  template <class P>
  void wait(std::unique_lock<std::mutex>& lock, std::chrono::steady_clock::time_point deadline, P pred,
            const char* what) {
    if (!cv.wait_until(lock, deadline, [&] { return aborted || pred(); }))
      throw comm::CommTimeoutError(std::string("test backend: ") + what + " timed out");
    if (aborted && !pred())
      throw comm::CommError(std::string("test backend: ") + what + ": the hub was aborted");
  }
  /// Pairs the oldest unmatched send and recv of (src, dst) and copies the bytes.
  void match(int src, int dst) {
    auto& s = sends[{src, dst}];
    auto& r = recvs[{src, dst}];
    while (!s.empty() && !r.empty()) {
      std::memcpy(r.front()->dst, s.front()->src, std::min(s.front()->bytes, r.front()->bytes));
      s.front()->matched = r.front()->matched = true;
      s.pop_front(), r.pop_front();
    }
    cv.notify_all();
  }
};

namespace {

class LocalP2P final : public comm::PendingP2P {
 public:
  LocalP2P(std::shared_ptr<LocalHub> hub, std::shared_ptr<LocalHub::Message> m)
      : hub_(std::move(hub)), m_(std::move(m)) {}
  void wait(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(hub_->mu);
    hub_->wait(
        lock, std::chrono::steady_clock::now() + timeout, [&] { return m_->matched; }, "point-to-point");
  }

 private:
  std::shared_ptr<LocalHub> hub_;
  std::shared_ptr<LocalHub::Message> m_;
};

}  // namespace

LocalBackend::LocalBackend(std::shared_ptr<LocalHub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}

int LocalBackend::size() const {
  return hub_->size;
}

void LocalBackend::meet(uint32_t tag, const void* in, std::chrono::milliseconds timeout,
                        const std::function<void(const std::vector<const void*>&)>& compute,
                        const std::function<void()>& publish) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const int n = hub_->size;
  std::vector<const void*> inputs;
  {
    std::unique_lock<std::mutex> lock(hub_->mu);
    LocalHub::Meeting& m = hub_->meetings[tag];
    m.in.resize(static_cast<std::size_t>(n));
    m.in[static_cast<std::size_t>(rank_)] = in;
    ++m.arrived;
    hub_->cv.notify_all();
    hub_->wait(
        lock, deadline, [&] { return m.arrived == n; }, "collective");
    inputs = m.in;
  }
  compute(inputs);
  std::unique_lock<std::mutex> lock(hub_->mu);
  LocalHub::Meeting& m = hub_->meetings[tag];
  ++m.done;
  hub_->cv.notify_all();
  hub_->wait(
      lock, deadline, [&] { return m.done == n; }, "collective");
  if (publish) publish();
  if (++m.left == n) hub_->meetings.erase(tag);
}

void LocalBackend::all_reduce(float* buf, std::size_t count, comm::ReduceOp op,
                              const comm::TransportCall& c) {
  std::vector<float> result(count);
  meet(
      c.tag, buf, c.timeout,
      [&](const std::vector<const void*>& in) {
        for (std::size_t i = 0; i < count; ++i) {
          float acc = static_cast<const float*>(in[0])[i];
          for (std::size_t r = 1; r < in.size(); ++r) {
            const float v = static_cast<const float*>(in[r])[i];
            acc = op == comm::ReduceOp::sum ? acc + v : std::max(acc, v);
          }
          result[i] = acc;
        }
      },
      [&] { std::copy(result.begin(), result.end(), buf); });
}

void LocalBackend::all_gather(const void* in, void* out, std::size_t bytes, const comm::TransportCall& c) {
  meet(
      c.tag, in, c.timeout,
      [&](const std::vector<const void*>& all) {
        for (std::size_t r = 0; r < all.size(); ++r)
          std::memcpy(static_cast<char*>(out) + r * bytes, all[r], bytes);
      },
      nullptr);
}

void LocalBackend::reduce_scatter(const float* in, float* out, std::size_t count, comm::ReduceOp op,
                                  const comm::TransportCall& c) {
  meet(
      c.tag, in, c.timeout,
      [&](const std::vector<const void*>& all) {
        const std::size_t base = static_cast<std::size_t>(rank_) * count;
        for (std::size_t i = 0; i < count; ++i) {
          float acc = static_cast<const float*>(all[0])[base + i];
          for (std::size_t r = 1; r < all.size(); ++r) {
            const float v = static_cast<const float*>(all[r])[base + i];
            acc = op == comm::ReduceOp::sum ? acc + v : std::max(acc, v);
          }
          out[i] = acc;
        }
      },
      nullptr);
}

void LocalBackend::all_to_all(const void* in, void* out, std::size_t bytes, const comm::TransportCall& c) {
  meet(
      c.tag, in, c.timeout,
      [&](const std::vector<const void*>& all) {
        for (std::size_t j = 0; j < all.size(); ++j)
          std::memcpy(static_cast<char*>(out) + j * bytes,
                      static_cast<const char*>(all[j]) + static_cast<std::size_t>(rank_) * bytes, bytes);
      },
      nullptr);
}

void LocalBackend::all_to_all_v(const void* in, const std::vector<std::size_t>& send_bytes, void* out,
                                const std::vector<std::size_t>& recv_bytes, const comm::TransportCall& c) {
  struct Side {
    const char* in;
    const std::vector<std::size_t>* send;
  } mine{static_cast<const char*>(in), &send_bytes};
  meet(
      c.tag, &mine, c.timeout,
      [&](const std::vector<const void*>& all) {
        char* dst = static_cast<char*>(out);
        for (std::size_t j = 0; j < all.size(); ++j) {
          const Side& peer = *static_cast<const Side*>(all[j]);
          std::size_t off = 0;  // where peer j's bytes for this rank start in its input
          for (int k = 0; k < rank_; ++k) off += (*peer.send)[static_cast<std::size_t>(k)];
          const std::size_t len = (*peer.send)[static_cast<std::size_t>(rank_)];
          if (len != recv_bytes[j])
            throw comm::CommError("test backend: all_to_all_v: rank " + std::to_string(j) + " sends " +
                                  std::to_string(len) + " bytes to rank " + std::to_string(rank_) +
                                  ", which expects " + std::to_string(recv_bytes[j]));
          std::memcpy(dst, peer.in + off, len);
          dst += len;
        }
      },
      nullptr);
}

void LocalBackend::broadcast(void* buf, std::size_t bytes, int root, const comm::TransportCall& c) {
  std::vector<char> copy(bytes);
  meet(
      c.tag, buf, c.timeout,
      [&](const std::vector<const void*>& all) {
        std::memcpy(copy.data(), all[static_cast<std::size_t>(root)], bytes);
      },
      [&] { std::memcpy(buf, copy.data(), bytes); });
}

void LocalBackend::barrier(const comm::TransportCall& c) {
  meet(
      c.tag, nullptr, c.timeout, [](const std::vector<const void*>&) {}, nullptr);
}

std::unique_ptr<comm::PendingP2P> LocalBackend::send(const void* buf, std::size_t bytes, int dst) {
  auto m = std::make_shared<LocalHub::Message>();
  m->src = buf, m->bytes = bytes;
  std::lock_guard<std::mutex> lock(hub_->mu);
  hub_->sends[{rank_, dst}].push_back(m);
  hub_->match(rank_, dst);
  return std::make_unique<LocalP2P>(hub_, m);
}

std::unique_ptr<comm::PendingP2P> LocalBackend::recv(void* buf, std::size_t bytes, int src) {
  auto m = std::make_shared<LocalHub::Message>();
  m->dst = buf, m->bytes = bytes;
  std::lock_guard<std::mutex> lock(hub_->mu);
  hub_->recvs[{src, rank_}].push_back(m);
  hub_->match(src, rank_);
  return std::make_unique<LocalP2P>(hub_, m);
}

std::unique_ptr<comm::Backend> LocalBackend::new_group(const std::vector<int>& members,
                                                       const std::string& key, std::chrono::milliseconds) {
  const auto it = std::find(members.begin(), members.end(), rank_);
  if (it == members.end()) return nullptr;
  std::lock_guard<std::mutex> lock(hub_->mu);
  auto& child = hub_->children[key];
  if (!child) child = std::make_shared<LocalHub>(static_cast<int>(members.size()));
  return std::make_unique<LocalBackend>(child, static_cast<int>(it - members.begin()));
}

void LocalBackend::abort() noexcept {
  std::lock_guard<std::mutex> lock(hub_->mu);
  hub_->aborted = true;
  hub_->cv.notify_all();
}

void run_local_ranks(int n, const std::function<void(comm::ProcessGroup&)>& body,
                     const comm::GroupOptions& options) {
  auto hub = std::make_shared<LocalHub>(n);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        auto pg = comm::ProcessGroup::create_world(std::make_unique<LocalBackend>(hub, r), options);
        body(*pg);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace tpsp::testing
