// Ring reduce-scatter, all-gather and all-reduce on send/recv (see ring_collectives.h).
// lab00 replaces this translation unit.
#include "engine/comm/ring_collectives.h"

#include <cstdint>

#include "engine/comm/shapes.h"
#include "engine/error.h"
#include "engine/lab_todo.h"

namespace tpsp::comm {

namespace {

/// ShapeError, before any communication, unless t is a defined f32 tensor with a dim 0.
[[maybe_unused]] void check_ring_tensor(const ProcessGroup& pg, const Tensor& t, const char* op,
                                        const std::string& label) {
  check_tensor(t, op, pg.name(), pg.backend());
  TPSP_CHECK(t.dim() >= 1, op, " '", label, "' in group ", pg.name(),
             ": needs a tensor with a dim 0 to split, got shape ", shape_str(t.shape()));
}

/// Rows per ring chunk, t.size(0) / n. ShapeError, before any communication, unless t passes
/// check_ring_tensor and its dim 0 is divisible by the group size n.
[[maybe_unused]] int64_t ring_chunk_rows(const ProcessGroup& pg, const Tensor& t, const char* op,
                                         const std::string& label) {
  check_ring_tensor(pg, t, op, label);
  TPSP_CHECK(t.size(0) % pg.size() == 0, op, " '", label, "' in group ", pg.name(), ": dim 0 extent ",
             t.size(0), " of ", shape_str(t.shape()), " is not divisible by the group size ", pg.size());
  return t.size(0) / pg.size();
}

/// The options of the send and the recv of ring step i: label + ".step<i>".
[[maybe_unused]] CallOpts step_opts(const std::string& label, int i) {
  return CallOpts{label + ".step" + std::to_string(i)};
}

}  // namespace

Tensor ring_reduce_scatter([[maybe_unused]] ProcessGroup& pg, [[maybe_unused]] const Tensor& in,
                           [[maybe_unused]] const std::string& label) {
  // TODO(lab00 ring_reduce_scatter): [n*k, ...] -> [k, ...], rank r returns the sum over all ranks
  // of chunk r. n-1 steps; at each step post an async send of one chunk to rank r+1, receive one
  // chunk from rank r-1, wait for the send, add your own chunk to the one received. Each rank sends
  // (n-1)/n of the input. ShapeError (ring_chunk_rows) before any communication.
  TPSP_LAB_TODO("lab00 ring_reduce_scatter: [n*k, ...] -> [k, ...], rank r returns the sum over all ranks of chunk r. n-1 steps; at each step post an async send of one chunk to rank r+1, receive one chunk from rank r-1, wait for the send, add your own chunk to the one received. Each rank sends (n-1)/n of the input. ShapeError (ring_chunk_rows) before any communication");
}

Tensor ring_all_gather([[maybe_unused]] ProcessGroup& pg, [[maybe_unused]] const Tensor& in,
                       [[maybe_unused]] const std::string& label) {
  // TODO(lab00 ring_all_gather): [k, ...] -> [n*k, ...], chunk j = rank j's input. Copy your own
  // input into chunk r, then n-1 steps: post an async send of the chunk you got last (your own at
  // step 0) to rank r+1, receive the next one from rank r-1 straight into the output, wait for the
  // send. Each rank sends (n-1)/n of the output. ShapeError (check_ring_tensor) before any
  // communication.
  TPSP_LAB_TODO("lab00 ring_all_gather: [k, ...] -> [n*k, ...], chunk j = rank j's input. Copy your own input into chunk r, then n-1 steps: post an async send of the chunk you got last (your own at step 0) to rank r+1, receive the next one from rank r-1 straight into the output, wait for the send. Each rank sends (n-1)/n of the output. ShapeError (check_ring_tensor) before any communication");
}

void ring_all_reduce([[maybe_unused]] ProcessGroup& pg, [[maybe_unused]] Tensor& t,
                     [[maybe_unused]] const std::string& label) {
  // TODO(lab00 ring_all_reduce): in place, t = the sum over all ranks of t, as ring_reduce_scatter
  // (label + ".reduce_scatter") followed by ring_all_gather (label + ".all_gather"): 2(n-1) steps,
  // 2(n-1)/n of t sent per rank. n == 1: no communication. ShapeError (ring_chunk_rows) before any
  // communication.
  TPSP_LAB_TODO("lab00 ring_all_reduce: in place, t = the sum over all ranks of t, as ring_reduce_scatter (label + \".reduce_scatter\") followed by ring_all_gather (label + \".all_gather\"): 2(n-1) steps, 2(n-1)/n of t sent per rank. n == 1: no communication. ShapeError (ring_chunk_rows) before any communication");
}

}  // namespace tpsp::comm
