// The protocol of ProcessGroup (see process_group.h): lifecycle, issue and queueing, fingerprints,
// link emulation, recording, buffer checks and failure handling. The calls themselves are in
// process_group_calls.cpp; the transport is the Backend.
#include "engine/comm/process_group.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <thread>

#include "engine/comm/cost_model.h"
#include "engine/comm/fingerprint.h"
#include "engine/error.h"

namespace tpsp::comm {

/// What a world group and every group created from it share: the recorder, and the list of groups
/// to abort together.
struct ProcessGroup::Domain {
  std::shared_ptr<trace::Recorder> recorder;
  std::mutex mu;
  /// Live groups. Raw pointers: a group registers when made and deregisters first thing in its
  /// destructor, under `mu`, so abort_all never owns (and so never destroys) a group itself.
  std::vector<ProcessGroup*> groups;

  void add(ProcessGroup* g) {
    std::lock_guard<std::mutex> lock(mu);
    groups.push_back(g);
  }
  void remove(ProcessGroup* g) {
    std::lock_guard<std::mutex> lock(mu);
    groups.erase(std::remove(groups.begin(), groups.end(), g), groups.end());
  }
  /// Kills every live group of this world: a failure in one group means the run is over, and peers
  /// blocked in another group must learn it now rather than at their timeout.
  void abort_all(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu);
    for (ProcessGroup* g : groups) g->abort(reason);
  }
};

namespace {

/// FNV-1a hash of a rank list and a name (the new_group fingerprint argument).
int64_t ranks_hash(const std::vector<int>& ranks, const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  };
  for (int r : ranks) mix(static_cast<uint64_t>(r) + 1);
  for (char c : name) mix(static_cast<unsigned char>(c));
  return static_cast<int64_t>(h & 0x7fffffffffffffffull);
}

/// FNV-1a hash of a tensor's bytes (the buffer check); a device tensor is hashed from a host copy.
uint64_t bytes_hash(const Tensor& device_or_host) {
  const Tensor t = device_or_host.to(Device::cpu);
  uint64_t h = 14695981039346656037ull;
  const auto* p = static_cast<const unsigned char*>(t.raw_data());
  for (std::size_t i = 0; i < t.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::string fmt_seconds(std::chrono::milliseconds ms) {
  std::string out = std::to_string(static_cast<double>(ms.count()) / 1000.0);
  while (out.size() > 1 && out.back() == '0') out.pop_back();
  if (out.back() == '.') out.pop_back();
  return out + " s";
}

/// Gloo tags are 32-bit: call `seq` uses tag 2·(seq mod 2^20), its fingerprint the next one.
uint32_t tag_of(uint64_t seq) {
  return static_cast<uint32_t>((seq % (1u << 20)) * 2);
}

/// The tag of an uneven all_to_all's split-size exchange: above the calls' 2^21 and Gloo's
/// connected-barrier tag (2^21).
uint32_t split_tag_of(uint64_t seq) {
  return (1u << 22) | static_cast<uint32_t>(seq % (1u << 20));
}

/// The emulated time of an uneven all_to_all on this rank: its pairwise steps' latency, then the larger of
/// what it sends to and receives from the other ranks at the link's bandwidth (equal splits give
/// LinkModel::seconds' (n-1)/n·S).
double uneven_seconds(const LinkModel& link, const std::vector<uint64_t>& send_bytes,
                      const std::vector<uint64_t>& recv_bytes, int rank, int n) {
  uint64_t sent = 0, received = 0;
  for (std::size_t j = 0; j < send_bytes.size(); ++j)
    if (static_cast<int>(j) != rank) sent += send_bytes[j], received += recv_bytes[j];
  return wire_steps(OpKind::all_to_all, n) * link.latency_s +
         static_cast<double>(std::max(sent, received)) / link.bandwidth_Bps;
}

/// Bytes of one row (dim 0 slice) of an all_to_all's tensor: how split sizes in bytes become rows.
uint64_t row_bytes(const Shape& shape, DType dtype) {
  int64_t row = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) row *= shape[d];
  return static_cast<uint64_t>(row) * dtype_size(dtype);
}

}  // namespace

std::shared_ptr<ProcessGroup> ProcessGroup::create_world(std::unique_ptr<Backend> backend,
                                                         GroupOptions options) {
  TPSP_CHECK(backend != nullptr, "world: no backend");
  TPSP_CHECK(options.timeout.count() > 0, "world: the timeout must be positive, got ",
             options.timeout.count(), " ms");
  const int size = backend->size(), rank = backend->rank();
  auto domain = std::make_shared<Domain>();
  domain->recorder = std::make_shared<trace::Recorder>(rank);
  std::vector<int> ranks(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) ranks[static_cast<std::size_t>(i)] = i;
  return make(rank, std::move(ranks), "world", "world", std::move(backend), std::move(domain),
              std::move(options));
}

std::shared_ptr<ProcessGroup> ProcessGroup::make(int rank, std::vector<int> global_ranks, std::string name,
                                                 std::string key, std::unique_ptr<Backend> backend,
                                                 std::shared_ptr<Domain> domain, GroupOptions options) {
  std::shared_ptr<ProcessGroup> g(new ProcessGroup(rank, std::move(global_ranks), std::move(name),
                                                   std::move(key), std::move(backend), domain,
                                                   std::move(options)));
  domain->add(g.get());
  return g;
}

ProcessGroup::ProcessGroup(int rank, std::vector<int> global_ranks, std::string name, std::string key,
                           std::unique_ptr<Backend> backend, std::shared_ptr<Domain> domain,
                           GroupOptions options)
    : rank_(rank),
      size_(static_cast<int>(global_ranks.size())),
      name_(std::move(name)),
      global_ranks_(std::move(global_ranks)),
      key_(std::move(key)),
      backend_(std::move(backend)),
      domain_(std::move(domain)),
      recorder_(domain_->recorder),
      options_(std::move(options)),
      worker_(std::make_unique<CommWorker>()),
      p2p_worker_(std::make_unique<CommWorker>()) {}

ProcessGroup::~ProcessGroup() {
  domain_->remove(this);
  // Finish (or fail, bounded by their timeouts) the calls still queued before the transport goes.
  worker_.reset();
  p2p_worker_.reset();
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

bool ProcessGroup::dead() const {
  return dead_.load();
}

std::string ProcessGroup::dead_reason() const {
  std::lock_guard<std::mutex> lock(dead_mu_);
  return dead_reason_;
}

void ProcessGroup::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(dead_mu_);
    if (dead_.load()) return;
    dead_reason_ = reason;
    dead_.store(true);
  }
  backend_->abort();
}

void ProcessGroup::throw_if_dead(const Call& c) const {
  if (!dead_.load()) return;
  throw CommError(where(c) + ": group " + name_ + " is dead after an earlier failure: " + dead_reason());
}

std::string ProcessGroup::where(const Call& c) const {
  std::string s = "rank " + std::to_string(global_rank()) + " (" + name_ + " rank " + std::to_string(rank_) +
                  " of " + std::to_string(size_) + "): " + op_name(c.op);
  s += c.op == OpKind::send || c.op == OpKind::recv ? " p2p#" : " #";
  s += std::to_string(c.seq);
  if (!c.label.empty()) s += " '" + c.label + "'";
  s += " (";
  if (c.op == OpKind::send) s += "to rank " + std::to_string(c.peer) + ", ";
  if (c.op == OpKind::recv) s += "from rank " + std::to_string(c.peer) + ", ";
  if (c.op != OpKind::barrier && c.op != OpKind::new_group)
    s += std::to_string(shape_numel(c.shape)) + " " + dtype_name(c.dtype) + ", ";
  return s + "group " + name_ + ")";
}

trace::CommRecord ProcessGroup::base_record(const Call& c) const {
  trace::CommRecord r;
  r.id = c.id;
  r.seq = c.seq;
  r.op = c.op;
  r.group = name_;
  r.group_rank = rank_;
  r.group_size = size_;
  r.global_rank = global_rank();
  r.dim = c.dim;
  const bool has_peer = c.op == OpKind::send || c.op == OpKind::recv || c.op == OpKind::broadcast;
  r.peer = has_peer ? c.peer : -1;
  r.reduce = c.reduce;
  r.dtype = c.dtype;
  r.shape = c.shape;
  r.tensor_bytes = c.tensor_bytes;
  r.bytes = wire_bytes(c.op, size_, c.tensor_bytes, rank_, c.peer);
  r.send_bytes = c.send_bytes;
  r.recv_bytes = c.recv_bytes;
  if (c.uneven) {  // what leaves this rank: every peer's rows but its own
    r.bytes = 0;
    for (std::size_t j = 0; j < c.send_bytes.size(); ++j)
      if (static_cast<int>(j) != rank_) r.bytes += c.send_bytes[j];
  }
  r.t_issue = c.t_issue;
  r.label = c.label;
  r.async = c.async;
  return r;
}

ProcessGroup::Call ProcessGroup::make_call(OpKind op, const Tensor* t, const Shape& shape,
                                           uint64_t tensor_bytes, const CallOpts& o, bool async) {
  Call c;
  c.op = op;
  c.id = recorder_->next_id();
  c.shape = shape;
  c.dtype = t ? t->dtype() : DType::f32;
  c.tensor_bytes = tensor_bytes;
  c.label = o.label;
  c.opts = options();
  c.t_issue = recorder_->now();
  c.async = async;
  return c;
}

Tensor ProcessGroup::staged_output(Call& c, Tensor& out) const {
  if (!c.opts.check_buffers || !c.async || out.numel() == 0) return out;
  Tensor staged = Tensor::empty(out.shape(), out.dtype(), out.device());
  out.fill(std::numeric_limits<float>::quiet_NaN());
  c.deliver = [staged, out]() mutable { out.copy_from(staged); };
  return staged;
}

void ProcessGroup::guard_buffers(const Call& c, const WorkPtr& work, const std::vector<Tensor>& reads) const {
  if (!c.opts.check_buffers || !c.async || reads.empty()) return;
  std::vector<uint64_t> hashes;
  for (const Tensor& t : reads) hashes.push_back(bytes_hash(t));
  work->on_wait([reads, hashes, what = where(c)] {
    for (std::size_t i = 0; i < reads.size(); ++i)
      if (bytes_hash(reads[i]) != hashes[i])
        throw CommError(what +
                        ": the buffer it sends was modified between the call and its wait(): an async "
                        "call reads its buffers until it completes, so they must stay untouched until "
                        "wait() returns");
  });
}

WorkPtr ProcessGroup::enqueue(Call call, Body body, const std::vector<Tensor>& read_buffers) {
  WorkPtr work;
  {
    std::lock_guard<std::mutex> lock(issue_mu_);
    call.seq = next_seq_;
    throw_if_dead(call);
    ++next_seq_;
    work = std::make_shared<Work>(recorder_, call.id, call.async, where(call));
    guard_buffers(call, work, read_buffers);
    recorder_->issued(base_record(call));
    // A blocking call, with nothing queued before it, runs on the caller's thread (the caller waits for
    // it anyway); the claim, taken under the issue lock, keeps later calls behind it, in issue order.
    if (call.async || !worker_->claim_if_idle()) {
      worker_->submit(
          [this, call = std::move(call), body = std::move(body), work] { run(call, body, work); });
      return work;
    }
  }
  struct Release {
    CommWorker& w;
    ~Release() { w.release(); }
  } release{*worker_};
  run(call, body, work);
  return work;
}

void ProcessGroup::run(const Call& c, const Body& body, const WorkPtr& work) {
  trace::CommRecord rec = base_record(c);
  rec.t_start = recorder_->now();
  try {
    throw_if_dead(c);
    if (c.opts.fingerprints && size_ > 1) {
      Shape shape = c.shape;  // an uneven all_to_all's rows differ between ranks: only a row must agree
      if (c.uneven) shape[0] = 0;
      check_fingerprints(*backend_, make_fingerprint(c.op, c.seq, shape, c.dtype, c.arg, c.reduce, name_),
                         tag_of(c.seq) + 1, c.opts.timeout);
    }
    // Split sizes are exchanged on every uneven call, fingerprints or not: a count the receiver does not
    // expect aborts its process inside Gloo (more bytes) or leaves rows unwritten (fewer).
    if (c.uneven && size_ > 1) {
      check_split_sizes(*backend_, c.send_bytes, c.recv_bytes, row_bytes(c.shape, c.dtype),
                        "all_to_all #" + std::to_string(c.seq) +
                            (c.label.empty() ? "" : " '" + c.label + "'") + " in group " + name_,
                        split_tag_of(c.seq), c.opts.timeout);
    }
    const auto payload_start = std::chrono::steady_clock::now();
    body(c);
    if (c.opts.link.enabled()) {
      const double t = c.uneven ? uneven_seconds(c.opts.link, c.send_bytes, c.recv_bytes, rank_, size_)
                                : c.opts.link.seconds(c.op, size_, c.tensor_bytes, rank_, c.peer);
      std::this_thread::sleep_until(
          payload_start +
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(t)));
    }
    if (c.deliver) c.deliver();
  } catch (...) {
    std::exception_ptr error = fail(c, rec);
    work->finish(error, rec.t_start, recorder_->now());
    return;
  }
  rec.t_end = recorder_->now();
  recorder_->append(rec);
  work->finish(nullptr, rec.t_start, rec.t_end);
}

WorkPtr ProcessGroup::post_p2p(Call c, const Tensor& t, int peer, bool is_send) {
  c.peer = peer;
  Tensor target = t;  // a recv's buffer: the caller's, or in check mode a staged one (staged_output)
  if (!is_send) target = staged_output(c, const_cast<Tensor&>(t));
  std::unique_ptr<PendingP2P> pending;
  WorkPtr work;
  {
    std::lock_guard<std::mutex> lock(issue_mu_);
    c.seq = next_p2p_++;
    throw_if_dead(c);
    work = std::make_shared<Work>(recorder_, c.id, c.async, where(c));
    recorder_->issued(base_record(c));
    try {
      pending = is_send ? backend_->send(t.raw_data(), t.nbytes(), peer)
                        : backend_->recv(target.raw_data(), target.nbytes(), peer);
    } catch (...) {
      std::rethrow_exception(fail(c, base_record(c)));
    }
  }
  if (is_send) guard_buffers(c, work, {t});
  std::shared_ptr<PendingP2P> shared(std::move(pending));
  p2p_worker_->submit([this, c, shared, t, work] {
    trace::CommRecord rec = base_record(c);
    rec.t_start = rec.t_issue;  // posted at issue time
    try {
      const auto start = std::chrono::steady_clock::now();
      shared->wait(c.opts.timeout);
      if (c.opts.link.enabled()) {  // a recv completes when the transfer would have arrived, as the send does
        const double secs = c.opts.link.seconds(OpKind::send, 2, c.tensor_bytes);
        std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                  std::chrono::duration<double>(secs)));
      }
      if (c.deliver) c.deliver();  // check mode: the received bytes reach the caller's buffer only now
    } catch (...) {
      std::exception_ptr error = fail(c, rec);
      work->finish(error, rec.t_start, recorder_->now());
      return;
    }
    rec.t_end = recorder_->now();
    recorder_->append(rec);
    work->finish(nullptr, rec.t_start, rec.t_end);
  });
  return work;
}

std::exception_ptr ProcessGroup::fail(const Call& c, trace::CommRecord rec) {
  std::string msg;
  enum { other, timeout, mismatch, argument } kind = other;
  try {
    throw;
  } catch (const CollectiveMismatchError& e) {
    msg = where(c) + ": " + e.what();
    kind = mismatch;
  } catch (const CommTimeoutError& e) {
    msg = where(c) + " timed out after " + fmt_seconds(c.opts.timeout) +
          " waiting for its peers (a rank skipped this call, or is stuck or dead) [" + e.what() + "]";
    kind = timeout;
  } catch (const CommError& e) {
    const std::string what = e.what();
    msg = what.find(where(c)) == 0 || what.find(" is dead after an earlier failure") != std::string::npos
              ? what
              : where(c) + " failed: " + what;
  } catch (const ShapeError& e) {
    msg = where(c) + ": " + e.what();
    kind = argument;
  } catch (const std::exception& e) {
    msg = where(c) + " failed: " + e.what();
  }
  rec.t_end = recorder_->now();
  rec.ok = false;
  recorder_->append(std::move(rec));
  if (kind == argument) return std::make_exception_ptr(ShapeError(msg));
  domain_->abort_all(msg);
  if (kind == mismatch) return std::make_exception_ptr(CollectiveMismatchError(msg));
  if (kind == timeout) return std::make_exception_ptr(CommTimeoutError(msg));
  return std::make_exception_ptr(CommError(msg));
}

// ---- blocking forms ------------------------------------------------------------------------------

void ProcessGroup::all_reduce(Tensor& t, ReduceOp op, const CallOpts& o) {
  issue_all_reduce(t, op, o, false)->wait();
}

Tensor ProcessGroup::all_gather(const Tensor& in, int64_t dim, const CallOpts& o) {
  Tensor out;
  issue_all_gather(in, out, dim, o, false)->wait();
  return out;
}

Tensor ProcessGroup::reduce_scatter(const Tensor& in, int64_t dim, ReduceOp op, const CallOpts& o) {
  Tensor out;
  issue_reduce_scatter(in, out, dim, op, o, false)->wait();
  return out;
}

Tensor ProcessGroup::all_to_all(const Tensor& in, const CallOpts& o) {
  Tensor out;
  issue_all_to_all(in, out, {}, {}, false, o, false)->wait();
  return out;
}

Tensor ProcessGroup::all_to_all(const Tensor& in, const std::vector<int64_t>& output_split_sizes,
                                const std::vector<int64_t>& input_split_sizes, const CallOpts& o) {
  Tensor out;
  issue_all_to_all(in, out, output_split_sizes, input_split_sizes, true, o, false)->wait();
  return out;
}

void ProcessGroup::broadcast(Tensor& t, int root, const CallOpts& o) {
  issue_broadcast(t, root, o, false)->wait();
}

void ProcessGroup::barrier(const CallOpts& o) {
  issue_barrier(o, false)->wait();
}

// ---- async forms ---------------------------------------------------------------------------------

WorkPtr ProcessGroup::all_reduce_async(Tensor& t, ReduceOp op, const CallOpts& o) {
  return issue_all_reduce(t, op, o, true);
}
WorkPtr ProcessGroup::all_gather_async(const Tensor& in, Tensor& out, int64_t dim, const CallOpts& o) {
  return issue_all_gather(in, out, dim, o, true);
}
WorkPtr ProcessGroup::reduce_scatter_async(const Tensor& in, Tensor& out, int64_t dim, ReduceOp op,
                                           const CallOpts& o) {
  return issue_reduce_scatter(in, out, dim, op, o, true);
}
WorkPtr ProcessGroup::all_to_all_async(const Tensor& in, Tensor& out, const CallOpts& o) {
  return issue_all_to_all(in, out, {}, {}, false, o, true);
}

WorkPtr ProcessGroup::all_to_all_async(const Tensor& in, Tensor& out,
                                       const std::vector<int64_t>& output_split_sizes,
                                       const std::vector<int64_t>& input_split_sizes, const CallOpts& o) {
  return issue_all_to_all(in, out, output_split_sizes, input_split_sizes, true, o, true);
}
WorkPtr ProcessGroup::broadcast_async(Tensor& t, int root, const CallOpts& o) {
  return issue_broadcast(t, root, o, true);
}
WorkPtr ProcessGroup::barrier_async(const CallOpts& o) {
  return issue_barrier(o, true);
}

// ---- subgroups -----------------------------------------------------------------------------------

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>& ranks,
                                                      const std::string& name) {
  TPSP_CHECK(!ranks.empty(), "new_group '", name, "' in group ", name_, ": the rank list is empty");
  TPSP_CHECK(!name.empty(), "new_group in group ", name_, ": the group needs a name");
  std::set<int> seen;
  std::vector<int> members;  // group ranks of this group, in the new group's order
  for (int r : ranks) {
    const auto it = std::find(global_ranks_.begin(), global_ranks_.end(), r);
    TPSP_CHECK(it != global_ranks_.end(), "new_group '", name, "': world rank ", r,
               " is not a member of the parent group ", name_);
    TPSP_CHECK(seen.insert(r).second, "new_group '", name, "': world rank ", r, " is listed twice");
    members.push_back(static_cast<int>(it - global_ranks_.begin()));
  }
  const auto mine = std::find(ranks.begin(), ranks.end(), global_rank());
  const int my_index = mine == ranks.end() ? -1 : static_cast<int>(mine - ranks.begin());

  Call c = make_call(OpKind::new_group, nullptr, Shape{static_cast<int64_t>(ranks.size())}, 0,
                     CallOpts{"new_group " + name}, false);
  c.arg = ranks_hash(ranks, name);
  std::string key;
  {
    std::lock_guard<std::mutex> lock(issue_mu_);
    key = key_ + "." + std::to_string(children_++) + "-" + name;
  }
  std::unique_ptr<Backend> child;
  const auto timeout = c.opts.timeout;
  enqueue(c, [&](const Call&) { child = backend_->new_group(members, key, timeout); }, {})->wait();
  if (my_index < 0) return nullptr;
  TPSP_CHECK(child != nullptr, "new_group '", name, "': the backend made no group for member rank ",
             global_rank());
  return make(my_index, ranks, name, key, std::move(child), domain_, options());
}

}  // namespace tpsp::comm
