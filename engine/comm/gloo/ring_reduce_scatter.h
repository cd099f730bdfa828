// A real ring reduce-scatter over Gloo's tcp transport (UnboundBuffer send/recv). This Gloo snapshot
// has no reduce_scatter in its new-style API, and PyTorch's gloo backend emulates it with
// all-reduce + slice, which moves twice the bytes. The ring moves (n-1)/n of the input per rank.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/comm/op.h"

namespace tpsp::comm {

/// Ring reduce-scatter of `in` = n chunks of `chunk` floats, rank-major ([n*chunk] -> [chunk]):
/// rank r's `out` receives op over all ranks of chunk r. `in` is only read (it is sent in place);
/// `out` must not overlap `in`. n-1 steps; at step s rank r sends its partial sum of chunk
/// (r-s-1) mod n to rank r+1 and receives chunk (r-s-2) mod n from rank r-1, adding its own
/// contribution; after the last step chunk r is complete. Each rank sends (n-1)*chunk floats.
/// Throws gloo::IoException on timeout or a failed peer (translated by the caller).
void ring_reduce_scatter(const std::shared_ptr<gloo::Context>& ctx, const float* in, float* out,
                         std::size_t chunk, ReduceOp op, uint32_t tag, std::chrono::milliseconds timeout);

}  // namespace tpsp::comm
