// The kinds of calls a ProcessGroup makes (all_reduce, ..., and the reductions sum and max), as
// comm's API names them. They are defined in the trace room (engine/trace/op_kind.h), below comm,
// because the recorder's records carry them.
#pragma once

#include "engine/trace/op_kind.h"

namespace tpsp::comm {

using trace::op_name;
using trace::OpKind;
using trace::reduce_op_name;
using trace::ReduceOp;

}  // namespace tpsp::comm
