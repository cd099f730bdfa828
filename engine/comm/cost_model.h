// Closed-form cost of each call: the payload bytes one rank puts on the wire, and the number of
// sequential message steps, for the algorithm the Gloo backend actually runs.
//
// S is the tensor size in bytes as the caller sees it: the input of all_reduce, reduce_scatter,
// all_to_all, broadcast and send, the *output* of all_gather. n is the group size.
//
//   op              algorithm (Gloo backend)             bytes sent by one rank   steps
//   all_reduce      ring: reduce-scatter + all-gather    2(n-1)/n * S             2(n-1)
//   all_gather      ring                                 (n-1)/n * S_out          n-1
//   reduce_scatter  ring (engine/comm/gloo/ring.cpp)     (n-1)/n * S_in           n-1
//   all_to_all      pairwise                             (n-1)/n * S              n-1
//    (split sizes)  pairwise                             Σ_{j≠rank} send_j        n-1
//   broadcast       binomial tree from root              children(rank) * S       ceil(log2 n)
//   send            point to point                       S                        1
//   recv            point to point                       0                        1
//   barrier         (no payload)                         0                        ceil(log2 n)
//   new_group       (no payload)                         0                        0
//
// These are the formulas behind nccl-tests' bus bandwidth (PERFORMANCE.md): busbw = algbw * factor
// with factor 2(n-1)/n for all_reduce and (n-1)/n for all_gather / reduce_scatter / all_to_all.
#pragma once

#include <cstdint>

#include "engine/comm/op.h"

namespace tpsp::comm {

/// Payload bytes that `rank` of a group of `n` sends for one call of `op` on `tensor_bytes`
/// (see the table above; `root` matters for broadcast only). n == 1 sends nothing.
uint64_t wire_bytes(OpKind op, int n, uint64_t tensor_bytes, int rank = 0, int root = 0);

/// Number of sequential message steps (latency terms) of the algorithm on the critical path.
int wire_steps(OpKind op, int n);

/// nccl-tests' bus-bandwidth factor: busbw = algbw * factor (1 for broadcast/send, 0 for barrier).
double busbw_factor(OpKind op, int n);

}  // namespace tpsp::comm
