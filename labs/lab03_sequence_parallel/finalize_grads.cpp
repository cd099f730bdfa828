// Sequence-parallel gradient reduction (see finalize_grads.h). lab03 replaces this file.
#include "engine/model/finalize_grads.h"

#include "engine/lab_todo.h"
#include "engine/ops/elementwise.h"

namespace tpsp::model {

void allreduce_sequence_parallel_grads(const std::vector<Tensor*>& grads, comm::ProcessGroup& tp) {
  // TODO(lab03 sequence_parallel grads): grads: the gradients of the replicated SP parameters, the same
  // shapes in the same order on every TP rank, each rank's holding only its own tokens' share. Afterwards,
  // in place, each is the sum of its shares over the TP ranks (a sum, not a mean), the same on every rank.
  // Communication: one all-reduce (sum) on tp in all, of every gradient's bytes together (4·Σ numel); none
  // when tp = 1 or grads is empty.
  TPSP_LAB_TODO("lab03 sequence_parallel grads");
}

}  // namespace tpsp::model
