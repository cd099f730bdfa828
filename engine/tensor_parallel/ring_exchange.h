// Chunked overlap of a GEMM with the collective it feeds or is fed by, as a ring of send/recv steps
// on the TP group (TransformerEngine's userbuffers ring exchange; PyTorch's async TP
// fused_all_gather_matmul / fused_matmul_reduce_scatter; Wang et al. 2023, "Overlap communication
// with dependent computation via decomposition"). Each of the tp steps multiplies the chunk of rows
// it holds while the next chunk travels, so only one chunk's transfer is exposed:
// T_ring ≈ t_gemm_chunk + (tp−1)·max(t_comm_chunk, t_gemm_chunk) instead of t_comm + t_gemm.
// No all_gather / reduce_scatter call is made: the record shows tp−1 sends to rank r+1 and tp−1
// recvs from rank r−1, each of one [s/tp, b, ·] chunk. lab04 replaces ring_exchange.cpp.
#pragma once

#include <functional>
#include <string>

#include "engine/comm/process_group.h"
#include "engine/tensor.h"

namespace tpsp::tensor_parallel {

using comm::ProcessGroup;

/// A GEMM applied to some rows of a sequence-first tensor: [c, b, k] → [c, b, m] for any c
/// (e.g. ops::matmul_forward(rows, weight)). It must not keep or modify `rows`.
using ChunkGemm = std::function<Tensor(const Tensor& rows)>;

/// What all_gather_matmul returns.
struct AllGatherMatmulOut {
  Tensor out;       ///< gemm of the whole sequence [s, b, m], rows in rank order
  Tensor gathered;  ///< the gathered input [s, b, k] when keep_gathered, else undefined
};

/// out = gemm(all_gather(shard, dim 0)) as a ring of tp steps: at step k this rank multiplies the
/// chunk it holds — rank (r−k) mod tp's shard — while it sends that chunk to rank r+1 and receives
/// the next one from rank r−1 (steps 0 … tp−2; tp−1 send/recv pairs of one shard each). A received
/// chunk lands in a fresh buffer: the one being sent is never written while in flight.
/// shard: this rank's [s/tp, b, k] (contiguous); tp == 1: {gemm(shard), shard}. `label` names the
/// sends and recvs ("<label>.ring"). keep_gathered: also return the whole [s, b, k] (a weight
/// gradient needs it). Errors: the send/recv's CommError; the gemm's ShapeError.
AllGatherMatmulOut all_gather_matmul(const Tensor& shard, const ChunkGemm& gemm, ProcessGroup& tp,
                                     const std::string& label, bool keep_gathered = false);

/// reduce_scatter(gemm(x), dim 0) as a ring of tp steps: x [s, b, k] → this rank's [s/tp, b, m]
/// (rows [r·s/tp, (r+1)·s/tp) of the sum over the ranks). At step k this rank computes its partial
/// for chunk (r−1−k) mod tp while the running sum of the previous chunk travels to rank r+1; it adds
/// the sum received from rank r−1 (tp−1 send/recv pairs of one [s/tp, b, m] chunk). After tp−1
/// hops each chunk's sum arrives at its owner. tp == 1: gemm(x). ShapeError naming the values when
/// s is not divisible by tp ("s=3 is not divisible by tp=2"), before any communication.
Tensor matmul_reduce_scatter(const Tensor& x, const ChunkGemm& gemm, ProcessGroup& tp,
                             const std::string& label);

}  // namespace tpsp::tensor_parallel
