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
  // TODO(lab04 all_gather_matmul): tp steps. At step k you hold the shard of rank (r−k) mod tp
  // (your own at k = 0): start sending it to rank r+1 and receiving the next one from rank r−1
  // into a FRESH buffer (send_async / recv_async, label + ".ring"), multiply the chunk you hold
  // while they fly, then wait both. The last step only multiplies. Put each product at its
  // owner's rows (rank order); keep the chunks for `gathered` when keep_gathered.
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
      incoming = Tensor::empty(shard.shape(), shard.dtype());
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
  TPSP_CHECK(x.size(0) % tp.size() == 0, label, ": s=", x.size(0), " is not divisible by tp=", tp.size(),
             " (matmul_reduce_scatter splits the sequence into tp chunks)");
  // TODO(lab04 matmul_reduce_scatter): tp steps. Step 0: your partial for chunk (r−1) mod tp. At
  // step k ≥ 1 send the running sum to rank r+1 and receive one from rank r−1 into a FRESH buffer
  // (label + ".ring"), compute your partial for chunk (r−1−k) mod tp while they fly, wait both,
  // and add the received sum to it. After tp−1 hops you hold the whole sum of your own chunk r.
  // BEGIN SOLUTION
  const int p = tp.size(), r = tp.rank();
  const int next = (r + 1) % p, prev = (r - 1 + p) % p;
  const int64_t rows = x.size(0) / p;
  auto partial = [&](int chunk) {
    const int c = (chunk % p + p) % p;
    return gemm(x.slice0(c * rows, (c + 1) * rows));
  };
  Tensor sum = partial(r - 1);
  for (int k = 1; k < p; ++k) {
    Tensor incoming = Tensor::empty(sum.shape(), sum.dtype());
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
