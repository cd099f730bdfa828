// The kinds of communication calls, as recorded (trace::CommRecord) and fingerprinted. They live in
// the trace room, below comm, so that a record can name its call without the trace depending on
// comm; comm speaks of them as comm::OpKind and comm::ReduceOp (engine/comm/op.h).
#pragma once

#include <cstdint>

namespace tpsp::trace {

/// One kind of communication call. Names follow PyTorch c10d (all_reduce, all_gather, ...).
enum class OpKind : uint8_t {
  all_reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  broadcast,
  send,
  recv,
  barrier,
  new_group,
};

/// Elementwise reduction applied by all_reduce and reduce_scatter.
enum class ReduceOp : uint8_t { sum, max };

/// "all_reduce", "all_gather", ... (the c10d name of the op).
const char* op_name(OpKind op);
/// "sum" or "max".
const char* reduce_op_name(ReduceOp op);

}  // namespace tpsp::trace
