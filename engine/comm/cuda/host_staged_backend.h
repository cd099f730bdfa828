// "CUDA tensors over Gloo": a Backend that moves cuda tensors by staging them through host memory
// around another transport (Gloo, or the tests' LocalBackend). Every device buffer of a call is
// copied to a host buffer, the inner transport runs the collective on the host buffers, and the
// results are copied back. It lets several ranks share one GPU (NCCL refuses two ranks of one
// communicator on one device: "Duplicate GPU detected", /work/shared/notes/platform.md) and a laptop
// with one GPU run every lab; the price is two PCIe copies per call. Host pointers (the protocol's
// fingerprints, cpu tensors) pass through untouched. Transport only, as every Backend
// (engine/comm/backend.h): the ProcessGroup around it records, checks and times the calls as usual.
#pragma once

#include <memory>

#include "engine/comm/backend.h"

namespace tpsp::cuda {

/// Wraps `inner` (the host transport; must not be null). The result accepts cpu and cuda tensors,
/// is named "cuda-over-<inner name>" (e.g. "cuda-over-gloo"), and has inner's rank and size.
/// Device buffers must be on the process's CUDA device (register_backend). Errors: the inner
/// backend's (CommError, CommTimeoutError); a failed CUDA copy raises CommError naming it.
std::unique_ptr<comm::Backend> host_staged(std::unique_ptr<comm::Backend> inner);

}  // namespace tpsp::cuda
