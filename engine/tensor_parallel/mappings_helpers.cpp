// Layer 1 of mappings.h: the collective helpers, each one call on the TP group.
#include "engine/error.h"
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::tensor_parallel {

namespace {
/// Throws before any communication when dim `d` of x cannot be split evenly over the TP group.
void check_divisible(const Tensor& x, int64_t d, ProcessGroup& tp, const char* name) {
  const int64_t n = x.size(d);
  TPSP_CHECK(n % tp.size() == 0, name, ": ", d == 0 ? "s" : "last dim", "=", n,
             " is not divisible by tp=", tp.size(), " (tensor shape ", shape_str(x.shape()), ")");
}
}  // namespace

Tensor _reduce(const Tensor& x, ProcessGroup& tp, const std::string& label) {
  Tensor out = x.clone();
  if (tp.size() > 1) tp.all_reduce(out, comm::ReduceOp::sum, {label});
  return out;
}

Tensor _split_along_last_dim(const Tensor& x, ProcessGroup& tp) {
  check_divisible(x, x.dim() - 1, tp, "split along the last dim");
  if (tp.size() == 1) return x;
  const int64_t chunk = x.size(-1) / tp.size();
  return x.narrow_copy(-1, tp.rank() * chunk, chunk);
}

Tensor _gather_along_last_dim(const Tensor& x, ProcessGroup& tp, const std::string& label) {
  if (tp.size() == 1) return x;
  return tp.all_gather(x, x.dim() - 1, {label});
}

Tensor _split_along_first_dim(const Tensor& x, ProcessGroup& tp) {
  check_divisible(x, 0, tp, "split along the sequence dim");
  const int64_t chunk = x.size(0) / tp.size();
  return x.slice0(tp.rank() * chunk, (tp.rank() + 1) * chunk);
}

Tensor _gather_along_first_dim(const Tensor& x, ProcessGroup& tp, const std::string& label) {
  if (tp.size() == 1) return x;
  return tp.all_gather(x, 0, {label});
}

Tensor _reduce_scatter_along_first_dim(const Tensor& x, ProcessGroup& tp, const std::string& label) {
  check_divisible(x, 0, tp, "reduce-scatter along the sequence dim");
  if (tp.size() == 1) return x;
  return tp.reduce_scatter(x, 0, comm::ReduceOp::sum, {label});
}

}  // namespace tpsp::tensor_parallel
