// Coalesced all-reduce and data-parallel averaging (see finalize_grads.h).
#include "engine/model/finalize_grads.h"
#include "engine/ops/elementwise.h"

namespace tpsp::model {

void coalesced_all_reduce(const std::vector<Tensor*>& ts, comm::ProcessGroup& pg, const std::string& label) {
  int64_t n = 0;
  for (const Tensor* t : ts) n += t->numel();
  if (n == 0) return;
  Tensor flat = Tensor::empty({n}, DType::f32, ts.front()->device());  // on the gradients' device
  int64_t off = 0;
  for (const Tensor* t : ts) {
    flat.slice0(off, off + t->numel()).copy_from(t->reshape({t->numel()}));
    off += t->numel();
  }
  pg.all_reduce(flat, comm::ReduceOp::sum, {label});
  off = 0;
  for (Tensor* t : ts) {
    t->copy_from(flat.slice0(off, off + t->numel()).reshape(t->shape()));
    off += t->numel();
  }
}

void allreduce_data_parallel_grads(const std::vector<Tensor*>& grads, comm::ProcessGroup& dp) {
  if (dp.size() == 1) return;
  coalesced_all_reduce(grads, dp, "grads.data_parallel");
  for (Tensor* g : grads) ops::scale_(*g, 1.f / static_cast<float>(dp.size()));
}

}  // namespace tpsp::model
