// Lifecycle, queueing and error handling of GlooProcessGroup; the calls themselves are in
// gloo_collectives.cpp.
#include "engine/comm/gloo/gloo_process_group.h"

#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <signal.h>

#include <algorithm>
#include <set>
#include <thread>

#include "engine/comm/cost_model.h"
#include "engine/comm/gloo/fingerprint.h"
#include "engine/error.h"

namespace tpsp::comm {

/// What a world group and every group created from it share: the store and device used for
/// rendezvous, the recorder, and the list of groups to abort together.
struct GlooDomain {
  std::shared_ptr<gloo::rendezvous::Store> store;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<Recorder> recorder;
  std::mutex mu;
  /// Live groups. Raw pointers: a group registers when made and deregisters first thing in its
  /// destructor, under `mu`, so abort_all never owns (and so never destroys) a group itself.
  std::vector<GlooProcessGroup*> groups;

  void add(GlooProcessGroup* g) {
    std::lock_guard<std::mutex> lock(mu);
    groups.push_back(g);
  }
  void remove(GlooProcessGroup* g) {
    std::lock_guard<std::mutex> lock(mu);
    groups.erase(std::remove(groups.begin(), groups.end(), g), groups.end());
  }
  /// Kills every live group of this world: a failure in one group means the run is over, and peers
  /// blocked in another group must learn it now rather than at their timeout.
  void abort_all(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu);
    for (GlooProcessGroup* g : groups) g->abort(reason);
  }
};

namespace {

/// Connects a full mesh for `rank` of `size` under store key prefix `key`.
std::shared_ptr<gloo::Context> connect(int rank, int size, const std::string& key, GlooDomain& d,
                                       std::chrono::milliseconds timeout) {
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(timeout);
  gloo::rendezvous::PrefixStore store(key, *d.store);
  ctx->connectFullMesh(store, d.device);
  return ctx;
}

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

std::string fmt_seconds(std::chrono::milliseconds ms) {
  const double s = static_cast<double>(ms.count()) / 1000.0;
  std::string out = std::to_string(s);
  while (out.size() > 1 && out.back() == '0') out.pop_back();
  if (out.back() == '.') out.pop_back();
  return out + " s";
}

bool mentions_timeout(const std::string& what) {
  std::string w = what;
  std::transform(w.begin(), w.end(), w.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return w.find("timed out") != std::string::npos || w.find("timeout") != std::string::npos;
}

}  // namespace

std::shared_ptr<GlooProcessGroup> GlooProcessGroup::create_world(
    int rank, int size, std::shared_ptr<gloo::rendezvous::Store> store,
    std::shared_ptr<gloo::transport::Device> device, const std::string& key_prefix, GroupOptions options) {
  TPSP_CHECK(size >= 1 && rank >= 0 && rank < size, "world: rank=", rank, " is not in [0, world_size=", size,
             ")");
  TPSP_CHECK(options.timeout.count() > 0, "world: the timeout must be positive, got ",
             options.timeout.count(), " ms");
  // A write to a dead peer's socket raises SIGPIPE, whose default action kills the process before
  // Gloo can report the error. Ignore it (as Python, hence PyTorch, does) unless someone handles it.
  struct sigaction old {};
  if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  auto domain = std::make_shared<GlooDomain>();
  domain->store = std::move(store);
  domain->device = std::move(device);
  domain->recorder = std::make_shared<Recorder>(rank);
  const std::string key = key_prefix + ".world";
  std::shared_ptr<gloo::Context> ctx;
  try {
    ctx = connect(rank, size, key, *domain, options.timeout);
  } catch (const gloo::EnforceNotMet& e) {
    throw CommError("rank " + std::to_string(rank) + ": rendezvous of the world group (" +
                    std::to_string(size) + " ranks, store key '" + key +
                    "') failed (did every rank start, with the same store?): " + e.what());
  } catch (const gloo::Exception& e) {
    const std::string msg = "rank " + std::to_string(rank) + ": rendezvous of the world group (" +
                            std::to_string(size) + " ranks, store key '" + key +
                            "') failed (did every rank start, with the same store?): " + e.what();
    if (mentions_timeout(e.what())) throw CommTimeoutError(msg);
    throw CommError(msg);
  }
  std::vector<int> ranks(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) ranks[static_cast<std::size_t>(i)] = i;
  return make(rank, std::move(ranks), "world", key, std::move(ctx), std::move(domain), std::move(options));
}

std::shared_ptr<GlooProcessGroup> GlooProcessGroup::make(int rank, std::vector<int> global_ranks,
                                                         std::string name, std::string key,
                                                         std::shared_ptr<gloo::Context> ctx,
                                                         std::shared_ptr<GlooDomain> domain,
                                                         GroupOptions options) {
  std::shared_ptr<GlooProcessGroup> g(new GlooProcessGroup(rank, std::move(global_ranks), std::move(name),
                                                           std::move(key), std::move(ctx), domain,
                                                           std::move(options)));
  domain->add(g.get());
  return g;
}

GlooProcessGroup::GlooProcessGroup(int rank, std::vector<int> global_ranks, std::string name, std::string key,
                                   std::shared_ptr<gloo::Context> ctx, std::shared_ptr<GlooDomain> domain,
                                   GroupOptions options)
    : ProcessGroup(rank, static_cast<int>(global_ranks.size()), std::move(name), global_ranks,
                   domain->recorder, std::move(options)),
      key_(std::move(key)),
      ctx_(std::move(ctx)),
      domain_(std::move(domain)),
      worker_(std::make_unique<CommWorker>()),
      p2p_worker_(std::make_unique<CommWorker>()) {}

GlooProcessGroup::~GlooProcessGroup() {
  domain_->remove(this);
  // Finish (or fail, bounded by their timeouts) the calls still queued before the context goes.
  worker_.reset();
  p2p_worker_.reset();
}

bool GlooProcessGroup::dead() const {
  return dead_.load();
}

std::string GlooProcessGroup::dead_reason() const {
  std::lock_guard<std::mutex> lock(dead_mu_);
  return dead_reason_;
}

void GlooProcessGroup::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(dead_mu_);
    if (dead_.load()) return;
    dead_reason_ = reason;
    dead_.store(true);
  }
  try {
    ctx_->closeConnections();
  } catch (...) {  // closing is best effort: the group is already marked dead
  }
}

void GlooProcessGroup::throw_if_dead(const Call& c) const {
  if (!dead_.load()) return;
  throw CommError(where(c) + ": group " + name_ + " is dead after an earlier failure: " + dead_reason());
}

std::string GlooProcessGroup::where(const Call& c) const {
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

CommRecord GlooProcessGroup::base_record(const Call& c) const {
  CommRecord r;
  r.seq = c.seq;
  r.op = c.op;
  r.group = name_;
  r.group_rank = rank_;
  r.group_size = size_;
  r.global_rank = global_rank();
  r.dim = c.dim;
  r.dtype = c.dtype;
  r.shape = c.shape;
  r.tensor_bytes = c.tensor_bytes;
  r.bytes = wire_bytes(c.op, size_, c.tensor_bytes, rank_, c.peer);
  r.t_issue = c.t_issue;
  r.label = c.label;
  r.async = c.async;
  return r;
}

GlooProcessGroup::Call GlooProcessGroup::make_call(OpKind op, const Shape& shape, uint64_t tensor_bytes,
                                                   const CallOpts& o) {
  Call c;
  c.op = op;
  c.shape = shape;
  c.tensor_bytes = tensor_bytes;
  c.label = o.label;
  c.opts = options();
  c.t_issue = recorder_->now();
  c.async = !in_blocking_call();
  return c;
}

WorkPtr GlooProcessGroup::enqueue(Call call, Body body) {
  auto work = std::make_shared<FutureWork>();
  std::lock_guard<std::mutex> lock(issue_mu_);
  call.seq = next_seq_;
  throw_if_dead(call);
  ++next_seq_;
  worker_->submit([this, call = std::move(call), body = std::move(body)] { run(call, body); }, work);
  return work;
}

void GlooProcessGroup::run(const Call& c, const Body& body) {
  throw_if_dead(c);
  CommRecord rec = base_record(c);
  rec.t_start = recorder_->now();
  try {
    if (c.opts.fingerprints && size_ > 1) {
      const auto fp = make_fingerprint(c.op, c.seq, c.shape, c.dtype, c.arg, c.reduce, name_);
      check_fingerprints(ctx_, fp, tag_of(c.seq) + 1, c.opts.timeout);
    }
    const auto payload_start = std::chrono::steady_clock::now();
    body(c);
    if (c.opts.link.enabled()) {
      const double t = c.opts.link.seconds(c.op, size_, c.tensor_bytes, rank_, c.peer);
      std::this_thread::sleep_until(
          payload_start +
          std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(t)));
    }
  } catch (...) {
    fail(c, rec);
  }
  rec.t_end = recorder_->now();
  recorder_->append(std::move(rec));
}

void GlooProcessGroup::run_p2p(const Call& c, const std::function<void()>& wait_body) {
  CommRecord rec = base_record(c);
  rec.t_start = rec.t_issue;  // posted at issue time
  try {
    const auto start = std::chrono::steady_clock::now();
    wait_body();
    if (c.opts.link.enabled()) {
      // a recv completes when the transfer would have arrived, as the send does
      const double t = c.opts.link.seconds(OpKind::send, 2, c.tensor_bytes);
      std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                std::chrono::duration<double>(t)));
    }
  } catch (...) {
    fail(c, rec);
  }
  rec.t_end = recorder_->now();
  recorder_->append(std::move(rec));
}

void GlooProcessGroup::fail(const Call& c, CommRecord rec) {
  std::string msg;
  bool timeout = false;
  bool mismatch = false;
  try {
    throw;
  } catch (const CollectiveMismatchError& e) {
    msg = where(c) + ": " + e.what();
    mismatch = true;
  } catch (const CommError& e) {
    msg = e.what();
  } catch (const gloo::IoException& e) {
    timeout = mentions_timeout(e.what());
    msg = where(c) +
          (timeout ? " timed out after " + fmt_seconds(c.opts.timeout) +
                         " waiting for its peers (a rank skipped this call, or is stuck or dead)"
                   : " failed: a peer closed its connection or died") +
          " [gloo: " + e.what() + "]";
  } catch (const gloo::EnforceNotMet& e) {
    msg = where(c) + " failed [gloo: " + e.what() + "]";
  } catch (const std::exception& e) {
    msg = where(c) + " failed: " + e.what();
  }
  rec.t_end = recorder_->now();
  rec.ok = false;
  recorder_->append(std::move(rec));
  domain_->abort_all(msg);
  if (mismatch) throw CollectiveMismatchError(msg);
  if (timeout) throw CommTimeoutError(msg);
  throw CommError(msg);
}

std::shared_ptr<ProcessGroup> GlooProcessGroup::new_group(const std::vector<int>& ranks,
                                                          const std::string& name) {
  TPSP_CHECK(!ranks.empty(), "new_group '", name, "' in group ", name_, ": the rank list is empty");
  TPSP_CHECK(!name.empty(), "new_group in group ", name_, ": the group needs a name");
  std::set<int> seen;
  for (int r : ranks) {
    TPSP_CHECK(std::find(global_ranks_.begin(), global_ranks_.end(), r) != global_ranks_.end(), "new_group '",
               name, "': world rank ", r, " is not a member of the parent group ", name_);
    TPSP_CHECK(seen.insert(r).second, "new_group '", name, "': world rank ", r, " is listed twice");
  }
  const auto it = std::find(ranks.begin(), ranks.end(), global_rank());
  const int my_index = it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
  const int n = static_cast<int>(ranks.size());

  Call c = make_call(OpKind::new_group, Shape{n}, 0, CallOpts{"new_group " + name});
  c.arg = ranks_hash(ranks, name);
  std::string key;
  {
    std::lock_guard<std::mutex> lock(issue_mu_);
    key = key_ + "." + std::to_string(children_++) + "-" + name;
  }
  std::shared_ptr<gloo::Context> child;
  const auto timeout = c.opts.timeout;
  enqueue(c, [&](const Call&) {
    if (my_index >= 0) child = connect(my_index, n, key, *domain_, timeout);
  })->wait();
  if (my_index < 0) return nullptr;
  return make(my_index, ranks, name, key, std::move(child), domain_, options());
}

}  // namespace tpsp::comm
