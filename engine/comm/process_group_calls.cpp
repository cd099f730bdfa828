// The calls of ProcessGroup: validate in the caller (ShapeError before any communication), then queue
// a body that runs on the group's comm thread and hands raw buffers to the Backend. Reductions of
// bf16 tensors are widened to f32, reduced, and rounded once (f32 accumulation whatever the transport).
#include <cstring>

#include "engine/comm/process_group.h"
#include "engine/comm/shapes.h"
#include "engine/error.h"

namespace tpsp::comm {

namespace {

std::size_t elems(const Tensor& t) {
  return static_cast<std::size_t>(t.numel());
}

/// The f32 elements for the transport: a host pointer for a cpu tensor, a device pointer for a device
/// tensor (a backend that accepts the device moves it; host code never reads it).
float* f32_ptr(Tensor& t) {
  TPSP_CHECK(t.dtype() == DType::f32, "transport buffer: expected f32, got ", dtype_name(t.dtype()));
  return static_cast<float*>(t.raw_data());
}

TransportCall transport(uint64_t seq, const GroupOptions& o) {
  return {static_cast<uint32_t>((seq % (1u << 20)) * 2), o.timeout};
}

}  // namespace

WorkPtr ProcessGroup::issue_all_reduce(Tensor& t, ReduceOp op, const CallOpts& o, bool async) {
  check_tensor(t, "all_reduce", name_, *backend_);
  Call c = make_call(OpKind::all_reduce, &t, t.shape(), t.nbytes(), o, async);
  c.reduce = op;
  const int n = size_;
  return enqueue(std::move(c),
                 [this, t, op, n](const Call& cl) mutable {
                   if (n == 1 || t.numel() == 0) return;
                   Tensor f32 = t.to(DType::f32);  // the same handle for an f32 tensor: reduced in place
                   backend_->all_reduce(f32_ptr(f32), elems(f32), op, transport(cl.seq, cl.opts));
                   if (t.dtype() != DType::f32) t.copy_from(f32);
                 },
                 // In place: the call itself writes t before wait(), so its bytes cannot be guarded.
                 {});
}

WorkPtr ProcessGroup::issue_all_gather(const Tensor& in, Tensor& out, int64_t dim, const CallOpts& o,
                                       bool async) {
  const Shape out_shape = all_gather_shape(in, dim, size_, name_, *backend_);
  const int64_t d = normalize_dim(in, dim, "all_gather", name_);
  prepare_out(out, out_shape, in.dtype(), "all_gather", name_, in.device());
  TPSP_CHECK(!out.shares_storage_with(in) || size_ == 1, "all_gather in group ", name_,
             ": output must not share storage with the input");
  Call c = make_call(OpKind::all_gather, &in, in.shape(), out.nbytes(), o, async);
  c.dim = d;
  c.arg = d;
  const int n = size_;
  Tensor target = staged_output(c, out);
  return enqueue(std::move(c),
                 [this, in, out = target, d, n](const Call& cl) mutable {
                   if (in.numel() == 0) return;
                   if (n == 1) {
                     out.copy_from(in.reshape(out.shape()));
                     return;
                   }
                   // dim 0: rank-major concatenation is the layout of `out` itself; other dims gather into a
                   // rank-major buffer, then concatenate the n pieces along dim.
                   Tensor flat = d == 0 ? out : Tensor::empty(Shape{n * in.numel()}, in.dtype(), in.device());
                   backend_->all_gather(in.raw_data(), flat.raw_data(), in.nbytes(),
                                        transport(cl.seq, cl.opts));
                   if (d != 0) {
                     std::vector<Tensor> parts;
                     for (int i = 0; i < n; ++i)
                       parts.push_back(flat.slice0(i * in.numel(), (i + 1) * in.numel()).reshape(in.shape()));
                     out.copy_from(cat(parts, d));
                   }
                 },
                 {in});
}

WorkPtr ProcessGroup::issue_reduce_scatter(const Tensor& in, Tensor& out, int64_t dim, ReduceOp op,
                                           const CallOpts& o, bool async) {
  const Shape out_shape = reduce_scatter_shape(in, dim, size_, name_, *backend_);
  const int64_t d = normalize_dim(in, dim, "reduce_scatter", name_);
  prepare_out(out, out_shape, in.dtype(), "reduce_scatter", name_, in.device());
  TPSP_CHECK(!out.shares_storage_with(in), "reduce_scatter in group ", name_,
             ": output must not share storage with the input");
  Call c = make_call(OpKind::reduce_scatter, &in, in.shape(), in.nbytes(), o, async);
  c.dim = d;
  c.arg = d;
  c.reduce = op;
  const int n = size_;
  Tensor target = staged_output(c, out);
  return enqueue(
      std::move(c),
      [this, in, out = target, d, op, n](const Call& cl) mutable {
        if (in.numel() == 0) return;
        const int64_t k = out.size(d);
        Tensor src = in.to(DType::f32);  // dim 0: chunk i is rows [i*k, (i+1)*k), contiguous (no copy)
        if (d != 0) {
          std::vector<Tensor> parts;
          for (int i = 0; i < n; ++i) parts.push_back(src.narrow_copy(d, i * k, k));
          src = cat(parts, 0);  // rank-major chunks, each with the output's shape
        }
        Tensor dst = out.to(DType::f32);
        backend_->reduce_scatter(f32_ptr(src), f32_ptr(dst), elems(dst), op, transport(cl.seq, cl.opts));
        if (out.dtype() != DType::f32) out.copy_from(dst);
      },
      {in});
}

WorkPtr ProcessGroup::issue_all_to_all(const Tensor& in, Tensor& out, std::vector<int64_t> output_split_sizes,
                                       std::vector<int64_t> input_split_sizes, bool uneven, const CallOpts& o,
                                       bool async) {
  const int n = size_;
  if (uneven) {
    // The call's label beside the group: a layer makes several all_to_all calls on one group.
    check_all_to_all_splits(in, output_split_sizes, input_split_sizes, rank_, n,
                            o.label.empty() ? name_ : name_ + " ('" + o.label + "')", *backend_);
  } else {
    check_all_to_all(in, n, name_, *backend_);
    input_split_sizes = output_split_sizes =
        std::vector<int64_t>(static_cast<std::size_t>(n), in.size(0) / n);
  }
  Shape out_shape = in.shape();
  out_shape[0] = 0;
  for (int64_t rows : output_split_sizes) out_shape[0] += rows;
  prepare_out(out, out_shape, in.dtype(), "all_to_all", name_, in.device());
  TPSP_CHECK(in.numel() == 0 || out.numel() == 0 || !out.shares_storage_with(in), "all_to_all in group ",
             name_, ": output must not share storage with the input");
  Call c = make_call(OpKind::all_to_all, &in, in.shape(), in.nbytes(), o, async);
  c.uneven = uneven;
  c.arg = uneven ? 1 : 0;  // the fingerprint tells an uneven call from an equal one
  // Bytes per peer: what the transport is handed (an equal call on an empty tensor moves nothing).
  const std::size_t row = in.numel() == 0 ? 0 : in.nbytes() / static_cast<std::size_t>(in.size(0));
  const std::size_t out_row = out.numel() == 0 ? 0 : out.nbytes() / static_cast<std::size_t>(out.size(0));
  if (uneven || in.numel() > 0)
    for (int j = 0; j < n; ++j) {
      c.send_bytes.push_back(static_cast<uint64_t>(input_split_sizes[static_cast<std::size_t>(j)]) * row);
      c.recv_bytes.push_back(static_cast<uint64_t>(output_split_sizes[static_cast<std::size_t>(j)]) *
                             out_row);
    }
  Tensor target = staged_output(c, out);
  std::vector<std::size_t> send(c.send_bytes.begin(), c.send_bytes.end());
  std::vector<std::size_t> recv(c.recv_bytes.begin(), c.recv_bytes.end());
  return enqueue(std::move(c),
                 [this, in, out = target, n, uneven, send, recv](const Call& cl) mutable {
                   if (n == 1) {  // the split check made both sides one count
                     if (in.numel() > 0) out.copy_from(in);
                     return;
                   }
                   if (!uneven) {
                     if (in.numel() == 0) return;  // every rank's tensor is empty (the fingerprint says so)
                     backend_->all_to_all(in.raw_data(), out.raw_data(), send[0], transport(cl.seq, cl.opts));
                     return;
                   }
                   // Uneven: a rank that sends nothing may still receive, so every rank calls the transport.
                   backend_->all_to_all_v(in.raw_data(), send, out.raw_data(), recv,
                                          transport(cl.seq, cl.opts));
                 },
                 {in});
}

WorkPtr ProcessGroup::issue_broadcast(Tensor& t, int root, const CallOpts& o, bool async) {
  check_tensor(t, "broadcast", name_, *backend_);
  check_peer(root, size_, "root", "broadcast", name_);
  Call c = make_call(OpKind::broadcast, &t, t.shape(), t.nbytes(), o, async);
  c.peer = root;
  c.arg = root;
  const int n = size_;
  return enqueue(
      std::move(c),
      [this, t, root, n](const Call& cl) mutable {
        if (n == 1 || t.numel() == 0) return;
        backend_->broadcast(t.raw_data(), t.nbytes(), root, transport(cl.seq, cl.opts));
      },
      root == rank_ ? std::vector<Tensor>{t} : std::vector<Tensor>{});
}

WorkPtr ProcessGroup::issue_barrier(const CallOpts& o, bool async) {
  Call c = make_call(OpKind::barrier, nullptr, Shape{0}, 0, o, async);
  const int n = size_;
  return enqueue(std::move(c),
                 [this, n](const Call& cl) {
                   if (n > 1) backend_->barrier(transport(cl.seq, cl.opts));
                 },
                 {});
}

void ProcessGroup::send(const Tensor& t, int dst, const CallOpts& o) {
  check_tensor(t, "send", name_, *backend_);
  check_peer(dst, size_, "dst", "send", name_);
  TPSP_CHECK(dst != rank_, "send in group ", name_, ": rank ", rank_, " cannot send to itself");
  post_p2p(make_call(OpKind::send, &t, t.shape(), t.nbytes(), o, false), t, dst, true)->wait();
}

void ProcessGroup::recv(Tensor& t, int src, const CallOpts& o) {
  check_tensor(t, "recv", name_, *backend_);
  check_peer(src, size_, "src", "recv", name_);
  TPSP_CHECK(src != rank_, "recv in group ", name_, ": rank ", rank_, " cannot receive from itself");
  post_p2p(make_call(OpKind::recv, &t, t.shape(), t.nbytes(), o, false), t, src, false)->wait();
}

WorkPtr ProcessGroup::send_async(const Tensor& t, int dst, const CallOpts& o) {
  check_tensor(t, "send", name_, *backend_);
  check_peer(dst, size_, "dst", "send", name_);
  TPSP_CHECK(dst != rank_, "send in group ", name_, ": rank ", rank_, " cannot send to itself");
  return post_p2p(make_call(OpKind::send, &t, t.shape(), t.nbytes(), o, true), t, dst, true);
}

WorkPtr ProcessGroup::recv_async(Tensor& t, int src, const CallOpts& o) {
  check_tensor(t, "recv", name_, *backend_);
  check_peer(src, size_, "src", "recv", name_);
  TPSP_CHECK(src != rank_, "recv in group ", name_, ": rank ", rank_, " cannot receive from itself");
  return post_p2p(make_call(OpKind::recv, &t, t.shape(), t.nbytes(), o, true), t, src, false);
}

}  // namespace tpsp::comm
