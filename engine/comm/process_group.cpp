#include "engine/comm/process_group.h"

#include "engine/error.h"

namespace tpsp::comm {

Work::~Work() = default;

namespace {
thread_local int g_blocking_depth = 0;

/// Marks the calling thread as inside a blocking form for its lifetime.
struct BlockingScope {
  BlockingScope() { ++g_blocking_depth; }
  ~BlockingScope() { --g_blocking_depth; }
  BlockingScope(const BlockingScope&) = delete;
  BlockingScope& operator=(const BlockingScope&) = delete;
};
}  // namespace

bool ProcessGroup::in_blocking_call() {
  return g_blocking_depth > 0;
}

ProcessGroup::ProcessGroup(int rank, int size, std::string name, std::vector<int> global_ranks,
                           std::shared_ptr<Recorder> recorder, GroupOptions options)
    : rank_(rank),
      size_(size),
      name_(std::move(name)),
      global_ranks_(std::move(global_ranks)),
      recorder_(std::move(recorder)),
      options_(std::move(options)) {}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::all_reduce(Tensor& t, ReduceOp op, const CallOpts& o) {
  BlockingScope b;
  all_reduce_async(t, op, o)->wait();
}

Tensor ProcessGroup::all_gather(const Tensor& in, int64_t dim, const CallOpts& o) {
  BlockingScope b;
  Tensor out;
  all_gather_async(in, out, dim, o)->wait();
  return out;
}

Tensor ProcessGroup::reduce_scatter(const Tensor& in, int64_t dim, ReduceOp op, const CallOpts& o) {
  BlockingScope b;
  Tensor out;
  reduce_scatter_async(in, out, dim, op, o)->wait();
  return out;
}

Tensor ProcessGroup::all_to_all(const Tensor& in, const CallOpts& o) {
  BlockingScope b;
  Tensor out;
  all_to_all_async(in, out, o)->wait();
  return out;
}

void ProcessGroup::broadcast(Tensor& t, int root, const CallOpts& o) {
  BlockingScope b;
  broadcast_async(t, root, o)->wait();
}
void ProcessGroup::send(const Tensor& t, int dst, const CallOpts& o) {
  BlockingScope b;
  send_async(t, dst, o)->wait();
}
void ProcessGroup::recv(Tensor& t, int src, const CallOpts& o) {
  BlockingScope b;
  recv_async(t, src, o)->wait();
}
void ProcessGroup::barrier(const CallOpts& o) {
  BlockingScope b;
  barrier_async(o)->wait();
}

GroupOptions ProcessGroup::options() const {
  std::lock_guard<std::mutex> lock(opt_mu_);
  return options_;
}

void ProcessGroup::set_options(const GroupOptions& o) {
  TPSP_CHECK(o.timeout.count() > 0, "group ", name_, ": the timeout must be positive, got ",
             o.timeout.count(), " ms");
  std::lock_guard<std::mutex> lock(opt_mu_);
  options_ = o;
}

void ProcessGroup::set_timeout(std::chrono::milliseconds timeout) {
  TPSP_CHECK(timeout.count() > 0, "group ", name_, ": the timeout must be positive, got ", timeout.count(),
             " ms");
  std::lock_guard<std::mutex> lock(opt_mu_);
  options_.timeout = timeout;
}

void ProcessGroup::set_fingerprints(bool on) {
  std::lock_guard<std::mutex> lock(opt_mu_);
  options_.fingerprints = on;
}

void ProcessGroup::set_link(const LinkModel& link) {
  std::lock_guard<std::mutex> lock(opt_mu_);
  options_.link = link;
}

}  // namespace tpsp::comm
