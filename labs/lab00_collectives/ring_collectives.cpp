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

Tensor ring_reduce_scatter(ProcessGroup& pg, const Tensor& in, const std::string& label) {
  // TODO(lab00 ring_reduce_scatter): in [n·k, ...] on each of the n ranks -> [k, ...]: rank r returns the
  // sum over all ranks of their chunk r (rows [r·k, (r+1)·k)). Communication: send/recv only, to rank (r+1)
  // mod n and from (r-1) mod n, in n-1 steps (step i labelled label + ".step<i>"), (n-1)/n of in's bytes
  // sent per rank. n = 1: a copy, nothing sent. Bad shape: ShapeError before anything is sent.
  TPSP_LAB_TODO("lab00 ring_reduce_scatter");
}

Tensor ring_all_gather(ProcessGroup& pg, const Tensor& in, const std::string& label) {
  // TODO(lab00 ring_all_gather): in [k, ...] on each of the n ranks -> [n·k, ...], the same on every rank:
  // rows [j·k, (j+1)·k) hold rank j's in. Communication: send/recv only, to rank (r+1) mod n and from (r-1)
  // mod n, in n-1 steps (step i labelled label + ".step<i>"), (n-1)/n of the output's bytes sent per rank.
  // Bad shape: ShapeError before anything is sent.
  TPSP_LAB_TODO("lab00 ring_all_gather");
}

void ring_all_reduce(ProcessGroup& pg, Tensor& t, const std::string& label) {
  // TODO(lab00 ring_all_reduce): t [n·k, ...], in place: afterwards t is the sum over all ranks of t, the
  // same on every rank. Communication: a ring reduce-scatter labelled label + ".reduce_scatter", then a
  // ring all-gather labelled label + ".all_gather": 2(n-1) steps, 2(n-1)/n of t's bytes sent per rank;
  // n = 1: nothing sent. Bad shape: ShapeError before anything is sent.
  TPSP_LAB_TODO("lab00 ring_all_reduce");
}

}  // namespace tpsp::comm
