#include "engine/trace/op_kind.h"

namespace tpsp::trace {

const char* op_name(OpKind op) {
  switch (op) {
    case OpKind::all_reduce:
      return "all_reduce";
    case OpKind::all_gather:
      return "all_gather";
    case OpKind::reduce_scatter:
      return "reduce_scatter";
    case OpKind::all_to_all:
      return "all_to_all";
    case OpKind::broadcast:
      return "broadcast";
    case OpKind::send:
      return "send";
    case OpKind::recv:
      return "recv";
    case OpKind::barrier:
      return "barrier";
    case OpKind::new_group:
      return "new_group";
  }
  return "?";
}

const char* reduce_op_name(ReduceOp op) {
  return op == ReduceOp::sum ? "sum" : "max";
}

}  // namespace tpsp::trace
