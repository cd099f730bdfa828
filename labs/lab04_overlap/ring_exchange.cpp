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
  TPSP_LAB_TODO("lab04 all_gather_matmul");
}

Tensor matmul_reduce_scatter(const Tensor& x, const ChunkGemm& gemm, ProcessGroup& tp,
                             const std::string& label) {
  if (tp.size() == 1) return gemm(x);
  // TODO(lab04 matmul_reduce_scatter): x [s, ...], this rank's addend, gemm row-wise -> [s/tp, ...] = rows
  // [r·s/tp, (r+1)·s/tp) of the sum over the TP ranks of gemm(x). s not divisible by tp: ShapeError naming
  // s and tp, before any send or recv. Communication: send/recv only, to rank r+1 and from rank r-1, tp-1
  // hops of one [s/tp, ...] partial sum, labelled label + ".ring"; each chunk's GEMM runs while a transfer
  // is in flight.
  TPSP_LAB_TODO("lab04 matmul_reduce_scatter");
}

}  // namespace tpsp::tensor_parallel
