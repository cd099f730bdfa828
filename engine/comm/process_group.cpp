#include "engine/comm/process_group.h"

#include "engine/comm/shapes.h"

namespace tpsp::comm {

Work::~Work() = default;

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
  all_reduce_async(t, op, o)->wait();
}

Tensor ProcessGroup::all_gather(const Tensor& in, int64_t dim, const CallOpts& o) {
  Tensor out;
  all_gather_async(in, out, dim, o)->wait();
  return out;
}

Tensor ProcessGroup::reduce_scatter(const Tensor& in, int64_t dim, ReduceOp op, const CallOpts& o) {
  Tensor out;
  reduce_scatter_async(in, out, dim, op, o)->wait();
  return out;
}

Tensor ProcessGroup::all_to_all(const Tensor& in, const CallOpts& o) {
  Tensor out;
  all_to_all_async(in, out, o)->wait();
  return out;
}

void ProcessGroup::broadcast(Tensor& t, int root, const CallOpts& o) {
  broadcast_async(t, root, o)->wait();
}
void ProcessGroup::send(const Tensor& t, int dst, const CallOpts& o) {
  send_async(t, dst, o)->wait();
}
void ProcessGroup::recv(Tensor& t, int src, const CallOpts& o) {
  recv_async(t, src, o)->wait();
}
void ProcessGroup::barrier(const CallOpts& o) {
  barrier_async(o)->wait();
}

GroupOptions ProcessGroup::options() const {
  std::lock_guard<std::mutex> lock(opt_mu_);
  return options_;
}

void ProcessGroup::set_options(const GroupOptions& o) {
  std::lock_guard<std::mutex> lock(opt_mu_);
  options_ = o;
}

void ProcessGroup::set_timeout(std::chrono::milliseconds timeout) {
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
