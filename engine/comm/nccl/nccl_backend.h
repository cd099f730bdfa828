// The NCCL transport under ProcessGroup: cuda tensors moved by NCCL collectives, one communicator per
// group (a subgroup is ncclCommSplit of its parent: collective over the parent, as new_group is),
// the world's ncclUniqueId sent from rank 0 over the bootstrap transport (a Gloo world made from the
// usual store: one rendezvous for both). Transport only, as every Backend (engine/comm/backend.h).
//
// Streams: each communicator runs on its own CUDA stream; a call first makes that stream wait for
// an event recorded on the compute stream (the legacy default stream, on which engine/ops/cuda runs
// everything), so a collective reads what the compute stream wrote before it was issued; the call
// returns when its completion event fired, so compute issued after Work::wait() reads its result.
// Errors: communicators are non-blocking (ncclConfig_t.blocking = 0), so no NCCL call can hang the
// comm thread: every call is polled (ncclCommGetAsyncError, cudaEventQuery) against the call's
// timeout; on an error or the timeout the communicator is aborted (ncclCommAbort) and the call
// raises CommError / CommTimeoutError with NCCL's words (ncclGetLastError); ProcessGroup adds the
// rank, the call and the group. Host buffers (the protocol's fingerprints) are staged through device
// memory. NCCL needs one GPU per rank of a communicator ("Duplicate GPU detected" otherwise): to
// run several ranks on one GPU, use the host-staged backend (engine/comm/cuda/host_staged_backend.h).
// Point-to-point send/recv is not supported yet on this backend (ShapeError naming the alternative).
#pragma once

#include <chrono>
#include <memory>

#include "engine/comm/backend.h"

namespace tpsp::cuda {

/// The NCCL world of `bootstrap`'s ranks (same rank and size), on the process's CUDA device
/// (register_backend(device) first, e.g. device = LOCAL_RANK). Collective over bootstrap: rank 0
/// makes the ncclUniqueId and broadcasts it (128 bytes) with `bootstrap_tag` (a tag bootstrap uses
/// for nothing else). Throws CommTimeoutError when the communicator is not up within `timeout`,
/// CommError with NCCL's message on failure (e.g. two ranks on one GPU).
std::unique_ptr<comm::Backend> nccl_world(comm::Backend& bootstrap, std::chrono::milliseconds timeout,
                                          uint32_t bootstrap_tag = 0x7ffffffe);

}  // namespace tpsp::cuda
