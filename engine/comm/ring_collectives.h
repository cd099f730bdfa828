// Ring collectives built on point-to-point send/recv: the engine's solution for lab00 (collectives
// warm-up). lab00 replaces ring_collectives.cpp.
//
// The lesson: an all-reduce is a reduce-scatter followed by an all-gather. On a ring of n ranks each
// phase takes n-1 steps and each rank sends one chunk of S/n bytes per step, so each phase sends
// (n-1)/n * S bytes per rank and the all-reduce 2(n-1)/n * S: below 2S at any n, and the lower bound
// for any all-reduce, which is why the ring is bandwidth optimal (Patarasuk & Yuan 2009, "Bandwidth
// optimal all-reduce algorithms for clusters of workstations", J. Parallel Distrib. Comput. 69(2)).
// The same ring runs in NCCL (ring all-reduce = reduce-scatter + all-gather) and in Gloo's
// AllreduceRing (gloo/allreduce_ring.h).
//
// Conventions shared by the three functions below:
//  - Tensors are f32, split along dim 0 into n equal chunks (n = pg.size(), r = pg.rank()): chunk j
//    is rows [j*k, (j+1)*k) of a [n*k, ...] tensor, a contiguous block (sequence-first layout).
//  - The ring: group rank r sends to (r+1) % n and receives from (r-1+n) % n. At every step a rank
//    posts its send asynchronously, then receives, then waits for the send (a blocking send returns
//    only once the peer received, so a ring where everyone sends first would deadlock).
//  - Every send and recv of step i is labelled label + ".step<i>", so the recorder shows the steps.
//  - Argument errors raise tpsp::ShapeError before any communication; failures while communicating
//    raise comm::CommError (CommTimeoutError on a timeout) from the send/recv, as ProcessGroup does.
//  - Results are new tensors, never views of the input. n == 1: nothing is communicated and
//    nothing is recorded. Empty tensors (numel 0) run the same steps with 0-byte messages.
//  - Every rank of the group calls the function with the same shape, in the same order.
#pragma once

#include <string>

#include "engine/comm/process_group.h"
#include "engine/tensor.h"

namespace tpsp::comm {

/// Ring reduce-scatter along dim 0 (sum): in = [n*k, ...] -> [k, ...]; rank r returns the sum over
/// all ranks of chunk r. `in` is only read (chunks are sent from it in place).
/// Steps: n-1. At step i rank r sends its running partial sum of chunk (r-i-1) mod n to r+1 (at
/// step 0 that is its own chunk), receives the partial sum of chunk (r-i-2) mod n from r-1 and adds
/// its own chunk to it; after step n-2 the chunk it holds is chunk r, complete.
/// Bytes sent per rank: (n-1) * S/n = (n-1)/n * S, S = in.nbytes() (n-1 send records of S/n each).
/// Errors: ShapeError if `in` is not a defined f32 or bf16 tensor with at least one dim, or if dim 0 is not
/// divisible by n (the message names both); CommError from the send/recv.
/// Sources: Patarasuk & Yuan 2009 (reduce-scatter phase of the ring all-reduce); NCCL's ring;
/// Gloo's ring (gloo/allreduce_ring.h, engine/comm/gloo/ring_reduce_scatter.h).
Tensor ring_reduce_scatter(ProcessGroup& pg, const Tensor& in, const std::string& label);

/// Ring all-gather along dim 0: in = [k, ...] -> [n*k, ...], chunk j of the result is rank j's `in`.
/// Steps: n-1. Rank r first copies its own `in` into chunk r; at step i it sends chunk (r-i) mod n
/// (the one it received at step i-1, its own at step 0) to r+1 and receives chunk (r-i-1) mod n from
/// r-1 directly into the output.
/// Bytes sent per rank: (n-1) * S/n = (n-1)/n * S, S = the output's nbytes (n-1 sends of in.nbytes()).
/// Errors: ShapeError if `in` is not a defined f32 or bf16 tensor with at least one dim; CommError from the
/// send/recv.
/// Sources: Patarasuk & Yuan 2009 (all-gather phase of the ring all-reduce); NCCL's ring; Gloo's
/// ring (gloo/allgather_ring.h).
Tensor ring_all_gather(ProcessGroup& pg, const Tensor& in, const std::string& label);

/// Ring all-reduce (sum), in place: t = the sum over all ranks of t, any shape [n*k, ...].
/// = ring_reduce_scatter(t) labelled label + ".reduce_scatter", then ring_all_gather of the
/// reduced chunk labelled label + ".all_gather" (their sends are label + ".reduce_scatter.step<i>"
/// and label + ".all_gather.step<i>"), copied back into t.
/// Steps: 2(n-1). Bytes sent per rank: 2(n-1)/n * S, S = t.nbytes() — exactly the reduce-scatter's
/// (n-1)/n * S plus the all-gather's (n-1)/n * S. n == 1: t is left as it is, nothing is sent.
/// Errors: ShapeError (before any communication) if t is not a defined f32 or bf16 tensor with at least one
/// dim or dim 0 is not divisible by n; CommError from the send/recv (t is then unspecified).
/// Sources: Patarasuk & Yuan 2009; NCCL's ring all-reduce; Gloo's AllreduceRing.
void ring_all_reduce(ProcessGroup& pg, Tensor& t, const std::string& label);

}  // namespace tpsp::comm
