// The ring exchange of all_gather_matmul and matmul_reduce_scatter (see ring_exchange.h).
// lab04 replaces this translation unit.
#include "engine/tensor_parallel/ring_exchange.h"

#include <vector>

#include "engine/error.h"
#include "engine/lab_todo.h"
#include "engine/ops/elementwise.h"

namespace tpsp::tensor_parallel {

AllGatherMatmulOut all_gather_matmul(const Tensor& shard, const ChunkGemm& gemm, ProcessGroup& tp,
                                     const std::string& label, bool keep_gathered) {
  if (tp.size() == 1) return {gemm(shard), keep_gathered ? shard : Tensor{}};
  // TODO(lab04 all_gather_matmul): shard [m, ...] on each rank, gemm row-wise -> out = gemm(the tp shards
  // stacked in rank order), [tp·m, ...] (and with keep_gathered the stacked input), equal to the
  // non-overlapped result. Communication: send/recv only, to rank r+1 and from rank r-1, tp-1 shards each
  // way, labelled label + ".ring"; each shard's GEMM runs while the next transfer is in flight.
  // BEGIN SOLUTION
  const int p = tp.size(), r = tp.rank();
  const int next = (r + 1) % p, prev = (r - 1 + p) % p;
  std::vector<Tensor> outs(static_cast<std::size_t>(p)), chunks(static_cast<std::size_t>(p));
  Tensor held = shard;
  for (int k = 0; k < p; ++k) {
    const auto owner = static_cast<std::size_t>(((r - k) % p + p) % p);
    chunks[owner] = held;
    comm::WorkPtr send, recv;
    Tensor incoming;
    if (k < p - 1) {
      incoming = Tensor::empty(shard.shape(), shard.dtype(), shard.device());
      send = tp.send_async(held, next, {label + ".ring"});
      recv = tp.recv_async(incoming, prev, {label + ".ring"});
    }
    outs[owner] = gemm(held);  // while the chunk travels
    if (k < p - 1) {
      send->wait();
      recv->wait();
      held = incoming;
    }
  }
  return {cat(outs, 0), keep_gathered ? cat(chunks, 0) : Tensor{}};
  // END SOLUTION
}

Tensor matmul_reduce_scatter(const Tensor& x, const ChunkGemm& gemm, ProcessGroup& tp,
                             const std::string& label) {
  if (tp.size() == 1) return gemm(x);
  // TODO(lab04 matmul_reduce_scatter): x [s, ...], this rank's addend, gemm row-wise -> [s/tp, ...] = rows
  // [r·s/tp, (r+1)·s/tp) of the sum over the TP ranks of gemm(x). s not divisible by tp: ShapeError naming
  // s and tp, before any send or recv. Communication: send/recv only, to rank r+1 and from rank r-1, tp-1
  // hops of one [s/tp, ...] partial sum, labelled label + ".ring"; each chunk's GEMM runs while a transfer
  // is in flight.
  // BEGIN SOLUTION
  TPSP_CHECK(x.size(0) % tp.size() == 0, label, ": s=", x.size(0), " is not divisible by tp=", tp.size(),
             " (matmul_reduce_scatter splits the sequence into tp chunks)");
  const int p = tp.size(), r = tp.rank();
  const int next = (r + 1) % p, prev = (r - 1 + p) % p;
  const int64_t rows = x.size(0) / p;
  auto partial = [&](int chunk) {
    const int c = (chunk % p + p) % p;
    return gemm(x.slice0(c * rows, (c + 1) * rows));
  };
  Tensor sum = partial(r - 1);
  for (int k = 1; k < p; ++k) {
    Tensor incoming = Tensor::empty(sum.shape(), sum.dtype(), sum.device());
    comm::WorkPtr send = tp.send_async(sum, next, {label + ".ring"});
    comm::WorkPtr recv = tp.recv_async(incoming, prev, {label + ".ring"});
    Tensor mine = partial(r - 1 - k);  // while the running sum travels
    send->wait();
    recv->wait();
    ops::add_(mine, incoming);
    sum = mine;
  }
  return sum;
  // END SOLUTION
}

}  // namespace tpsp::tensor_parallel
