// Coalesced all-reduce and data-parallel averaging (see finalize_grads.h).
#include "engine/model/finalize_grads.h"
#include "engine/ops/elementwise.h"

namespace tpsp::model {

void coalesced_all_reduce(const std::vector<Tensor*>& ts, comm::ProcessGroup& pg, const std::string& label) {
  int64_t n = 0;
  for (const Tensor* t : ts) n += t->numel();
  if (n == 0) return;
  Tensor flat = Tensor::empty({n});
  int64_t off = 0;
  for (const Tensor* t : ts) {
    std::copy(t->data(), t->data() + t->numel(), flat.data() + off);
    off += t->numel();
  }
  pg.all_reduce(flat, comm::ReduceOp::sum, {label});
  off = 0;
  for (Tensor* t : ts) {
    std::copy(flat.data() + off, flat.data() + off + t->numel(), t->data());
    off += t->numel();
  }
}

void allreduce_data_parallel_grads(const std::vector<Tensor*>& grads, comm::ProcessGroup& dp) {
  if (dp.size() == 1) return;
  coalesced_all_reduce(grads, dp, "grads.data_parallel");
  for (Tensor* g : grads) ops::scale_(*g, 1.f / static_cast<float>(dp.size()));
}

}  // namespace tpsp::model
