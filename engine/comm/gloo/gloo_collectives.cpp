// The calls of GlooProcessGroup: validate in the caller (ShapeError before any communication), then
// queue a body that runs on the group's worker. Algorithms: Gloo's new-style allreduce (ring),
// allgather (ring), alltoall, broadcast (binomial tree) and barrier; our own ring reduce-scatter.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <cstring>

#include "engine/comm/gloo/gloo_process_group.h"
#include "engine/comm/gloo/ring_reduce_scatter.h"
#include "engine/comm/shapes.h"
#include "engine/error.h"

namespace tpsp::comm {

namespace {

/// Slot of point-to-point messages; Gloo's collectives use prefixes 0x01..0x08, the ring 0x30.
constexpr uint8_t kP2PSlotPrefix = 0x31;

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

ReduceFn reduce_fn(ReduceOp op) {
  return op == ReduceOp::sum ? static_cast<ReduceFn>(&gloo::sum<float>)
                             : static_cast<ReduceFn>(&gloo::max<float>);
}

std::size_t elems(const Tensor& t) {
  return static_cast<std::size_t>(t.numel());
}

void ensure(bool completed, const char* what) {
  if (!completed) throw gloo::IoException(std::string(what) + " was aborted");
}

}  // namespace

WorkPtr GlooProcessGroup::all_reduce_async(Tensor& t, ReduceOp op, const CallOpts& o) {
  check_tensor(t, "all_reduce", name_);
  Call c = make_call(OpKind::all_reduce, t.shape(), t.nbytes(), o);
  c.reduce = op;
  c.arg = 0;
  const int n = size_;
  return enqueue(std::move(c), [this, t, op, n](const Call& cl) mutable {
    if (n == 1 || t.numel() == 0) return;
    gloo::AllreduceOptions opts(ctx_);
    opts.setOutput(t.data(), elems(t));  // in place
    opts.setReduceFunction(reduce_fn(op));
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setTag(tag_of(cl.seq));
    opts.setTimeout(cl.opts.timeout);
    gloo::allreduce(opts);
  });
}

WorkPtr GlooProcessGroup::all_gather_async(const Tensor& in, Tensor& out, int64_t dim, const CallOpts& o) {
  const Shape out_shape = all_gather_shape(in, dim, size_, name_);
  const int64_t d = normalize_dim(in, dim, "all_gather", name_);
  prepare_out(out, out_shape, "all_gather", name_);
  TPSP_CHECK(!out.shares_storage_with(in) || size_ == 1, "all_gather in group ", name_,
             ": output must not share storage with the input");
  Call c = make_call(OpKind::all_gather, in.shape(), out.nbytes(), o);
  c.dim = d;
  c.arg = d;
  const int n = size_;
  return enqueue(std::move(c), [this, in, out, d, n](const Call& cl) mutable {
    if (in.numel() == 0) return;
    if (n == 1) {
      out.copy_from(in.reshape(out.shape()));
      return;
    }
    // dim 0: rank-major concatenation is the layout of `out` itself; other dims gather into a
    // rank-major buffer, then concatenate the n pieces along dim.
    Tensor flat = d == 0 ? out : Tensor(Shape{n * in.numel()});
    gloo::AllgatherOptions opts(ctx_);
    opts.setInput(const_cast<float*>(in.data()), elems(in));  // read in place
    opts.setOutput(flat.data(), elems(flat));
    opts.setTag(tag_of(cl.seq));
    opts.setTimeout(cl.opts.timeout);
    gloo::allgather(opts);
    if (d != 0) {
      std::vector<Tensor> parts;
      for (int i = 0; i < n; ++i)
        parts.push_back(flat.slice0(i * in.numel(), (i + 1) * in.numel()).reshape(in.shape()));
      out.copy_from(cat(parts, d));
    }
  });
}

WorkPtr GlooProcessGroup::reduce_scatter_async(const Tensor& in, Tensor& out, int64_t dim, ReduceOp op,
                                               const CallOpts& o) {
  const Shape out_shape = reduce_scatter_shape(in, dim, size_, name_);
  const int64_t d = normalize_dim(in, dim, "reduce_scatter", name_);
  prepare_out(out, out_shape, "reduce_scatter", name_);
  TPSP_CHECK(!out.shares_storage_with(in), "reduce_scatter in group ", name_,
             ": output must not share storage with the input");
  Call c = make_call(OpKind::reduce_scatter, in.shape(), in.nbytes(), o);
  c.dim = d;
  c.arg = d;
  c.reduce = op;
  const int n = size_;
  return enqueue(std::move(c), [this, in, out, d, op, n](const Call& cl) mutable {
    if (in.numel() == 0) return;
    const int64_t k = out.size(d);
    Tensor src = in;  // dim 0: chunk i is rows [i*k, (i+1)*k), already contiguous (no copy)
    if (d != 0) {
      std::vector<Tensor> parts;
      for (int i = 0; i < n; ++i) parts.push_back(in.narrow_copy(d, i * k, k));
      src = cat(parts, 0);  // rank-major chunks, each with the output's shape
    }
    ring_reduce_scatter(ctx_, src.data(), out.data(), elems(out), op, tag_of(cl.seq), cl.opts.timeout);
  });
}

WorkPtr GlooProcessGroup::all_to_all_async(const Tensor& in, Tensor& out, const CallOpts& o) {
  check_all_to_all(in, size_, name_);
  prepare_out(out, in.shape(), "all_to_all", name_);
  TPSP_CHECK(!out.shares_storage_with(in), "all_to_all in group ", name_,
             ": output must not share storage with the input");
  Call c = make_call(OpKind::all_to_all, in.shape(), in.nbytes(), o);
  const int n = size_;
  return enqueue(std::move(c), [this, in, out, n](const Call& cl) mutable {
    if (in.numel() == 0) return;
    if (n == 1) {
      out.copy_from(in);
      return;
    }
    gloo::AlltoallOptions opts(ctx_);
    opts.setInput(const_cast<float*>(in.data()), elems(in));
    opts.setOutput(out.data(), elems(out));
    opts.setTag(tag_of(cl.seq));
    opts.setTimeout(cl.opts.timeout);
    gloo::alltoall(opts);
  });
}

WorkPtr GlooProcessGroup::broadcast_async(Tensor& t, int root, const CallOpts& o) {
  check_tensor(t, "broadcast", name_);
  check_peer(root, size_, "root", "broadcast", name_);
  Call c = make_call(OpKind::broadcast, t.shape(), t.nbytes(), o);
  c.peer = root;
  c.arg = root;
  const int n = size_;
  return enqueue(std::move(c), [this, t, root, n](const Call& cl) mutable {
    if (n == 1 || t.numel() == 0) return;
    gloo::BroadcastOptions opts(ctx_);
    opts.setOutput(t.data(), elems(t));  // in place on the root
    opts.setRoot(root);
    opts.setTag(tag_of(cl.seq));
    opts.setTimeout(cl.opts.timeout);
    gloo::broadcast(opts);
  });
}

WorkPtr GlooProcessGroup::barrier_async(const CallOpts& o) {
  Call c = make_call(OpKind::barrier, Shape{0}, 0, o);
  const int n = size_;
  return enqueue(std::move(c), [this, n](const Call& cl) {
    if (n == 1) return;
    gloo::BarrierOptions opts(ctx_);
    opts.setTag(tag_of(cl.seq));
    opts.setTimeout(cl.opts.timeout);
    gloo::barrier(opts);
  });
}

WorkPtr GlooProcessGroup::send_async(const Tensor& t, int dst, const CallOpts& o) {
  check_tensor(t, "send", name_);
  check_peer(dst, size_, "dst", "send", name_);
  TPSP_CHECK(dst != rank_, "send in group ", name_, ": rank ", rank_, " cannot send to itself");
  Call c = make_call(OpKind::send, t.shape(), t.nbytes(), o);
  c.peer = dst;
  auto work = std::make_shared<FutureWork>();
  std::shared_ptr<gloo::transport::UnboundBuffer> buf;
  {
    std::lock_guard<std::mutex> lock(issue_mu_);
    c.seq = next_p2p_++;
    throw_if_dead(c);
    try {
      buf = ctx_->createUnboundBuffer(const_cast<float*>(t.data()), t.nbytes());
      buf->send(dst, gloo::Slot::build(kP2PSlotPrefix, 0));
    } catch (...) {
      auto rec = base_record(c);
      fail(c, rec);
    }
  }
  p2p_worker_->submit(
      [this, c, buf, t] { run_p2p(c, [&] { ensure(buf->waitSend(c.opts.timeout), "send"); }); }, work);
  return work;
}

WorkPtr GlooProcessGroup::recv_async(Tensor& t, int src, const CallOpts& o) {
  check_tensor(t, "recv", name_);
  check_peer(src, size_, "src", "recv", name_);
  TPSP_CHECK(src != rank_, "recv in group ", name_, ": rank ", rank_, " cannot receive from itself");
  Call c = make_call(OpKind::recv, t.shape(), t.nbytes(), o);
  c.peer = src;
  auto work = std::make_shared<FutureWork>();
  std::shared_ptr<gloo::transport::UnboundBuffer> buf;
  {
    std::lock_guard<std::mutex> lock(issue_mu_);
    c.seq = next_p2p_++;
    throw_if_dead(c);
    try {
      buf = ctx_->createUnboundBuffer(t.data(), t.nbytes());
      buf->recv(src, gloo::Slot::build(kP2PSlotPrefix, 0));
    } catch (...) {
      auto rec = base_record(c);
      fail(c, rec);
    }
  }
  p2p_worker_->submit(
      [this, c, buf, t] { run_p2p(c, [&] { ensure(buf->waitRecv(c.opts.timeout), "recv"); }); }, work);
  return work;
}

}  // namespace tpsp::comm
