// Layer 2 of mappings.h, sequence-parallel half: the dim-0 pairs and the all-to-alls.
// lab03 replaces this translation unit.
#include "engine/error.h"
#include "engine/lab_todo.h"
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::tensor_parallel {

Tensor ScatterToSequenceParallelRegion::forward(const Tensor& x, ProcessGroup& tp,
                                                const std::string& label) const {
  // TODO(lab03 scatter_to_sequence_parallel_region forward): x [s, b, h], the same on every TP rank ->
  // [s/tp, b, h], rows [r·s/tp, (r+1)·s/tp). Communication: none. s not divisible by tp: ShapeError.
  // BEGIN SOLUTION
  return _split_along_first_dim(x, tp);
  // END SOLUTION
}
Tensor ScatterToSequenceParallelRegion::backward(const Tensor& dy, ProcessGroup& tp,
                                                 const std::string& label) const {
  // TODO(lab03 scatter_to_sequence_parallel_region backward): dy [s/tp, b, h], rank r's rows -> [s, b, h]:
  // the whole gradient of the replicated input on every rank, rank j's rows at [j·s/tp, (j+1)·s/tp).
  // Communication: one all-gather along dim 0 on tp of the whole [s, b, h] (4·s·b·h bytes).
  // BEGIN SOLUTION
  return _gather_along_first_dim(dy, tp, label);
  // END SOLUTION
}

Tensor GatherFromSequenceParallelRegion::forward(const Tensor& x, ProcessGroup& tp,
                                                 const std::string& label) const {
  // TODO(lab03 gather_from_sequence_parallel_region forward): x [s/tp, b, h], rank r's rows [r·s/tp,
  // (r+1)·s/tp) of a sequence -> [s, b, h], the whole sequence in rank order, the same on every rank.
  // Communication: one all-gather along dim 0 on the tp group passed in, of the whole [s, b, h] (4·s·b·h
  // bytes).
  // BEGIN SOLUTION
  return _gather_along_first_dim(x, tp, label);
  // END SOLUTION
}
Tensor GatherFromSequenceParallelRegion::backward(const Tensor& dy, ProcessGroup& tp,
                                                  const std::string& label) const {
  // TODO(lab03 gather_from_sequence_parallel_region backward): dy [s, b, h], this rank's partial of the
  // gradient of the whole sequence -> [s/tp, b, h] = rows [r·s/tp, (r+1)·s/tp) of the sum of dy over the TP
  // ranks. Communication: one reduce-scatter (sum) along dim 0 on tp of an [s, b, h] input. With
  // tensor_parallel_output_grad false, dy is already the same whole gradient on every rank: rows r of dy,
  // no communication.
  // BEGIN SOLUTION
  if (tensor_parallel_output_grad) return _reduce_scatter_along_first_dim(dy, tp, label);
  return _split_along_first_dim(dy, tp);
  // END SOLUTION
}

Tensor ReduceScatterToSequenceParallelRegion::forward(const Tensor& x, ProcessGroup& tp,
                                                      const std::string& label) const {
  // TODO(lab03 reduce_scatter_to_sequence_parallel_region forward): x [s, b, h], this rank's partial sum ->
  // [s/tp, b, h] = rows [r·s/tp, (r+1)·s/tp) of the sum of x over the TP ranks. Communication: one
  // reduce-scatter (sum) along dim 0 on tp of an [s, b, h] input, nothing else. s not divisible by tp:
  // ShapeError before any communication.
  // BEGIN SOLUTION
  return _reduce_scatter_along_first_dim(x, tp, label);
  // END SOLUTION
}
Tensor ReduceScatterToSequenceParallelRegion::backward(const Tensor& dy, ProcessGroup& tp,
                                                       const std::string& label) const {
  // TODO(lab03 reduce_scatter_to_sequence_parallel_region backward): dy [s/tp, b, h], rank r's rows -> [s,
  // b, h], the whole gradient in rank order, the same on every rank. Communication: one all-gather along
  // dim 0 on tp of the whole [s, b, h] (4·s·b·h bytes).
  // BEGIN SOLUTION
  return _gather_along_first_dim(dy, tp, label);
  // END SOLUTION
}

namespace {
/// [s/tp, b, h] → [s, b, h/tp]: chunk j of the hidden dim goes to rank j, which stacks the token
/// shards it receives in rank order.
Tensor sp2hp(const Tensor& x, ProcessGroup& tp, const std::string& label) {
  const int64_t n = tp.size();
  TPSP_CHECK(x.dim() == 3 && x.size(2) % n == 0, "all_to_all_sp2hp: hidden=", x.size(-1),
             " is not divisible by tp=", n, " (shape ", shape_str(x.shape()), ")");
  if (n == 1) return x;
  const int64_t c = x.size(2) / n;
  std::vector<Tensor> chunks;
  for (int64_t j = 0; j < n; ++j) chunks.push_back(x.narrow_copy(2, j * c, c));
  Tensor send = cat(chunks, 0);  // [tp·s/tp, b, h/tp], chunk j contiguous
  return tp.all_to_all(send, {label});
}

/// [s, b, h/tp] → [s/tp, b, h]: token shard j goes to rank j, which concatenates the hidden
/// chunks it receives in rank order.
Tensor hp2sp(const Tensor& x, ProcessGroup& tp, const std::string& label) {
  const int64_t n = tp.size();
  TPSP_CHECK(x.dim() == 3 && x.size(0) % n == 0, "all_to_all_hp2sp: s=", x.size(0),
             " is not divisible by tp=", n, " (shape ", shape_str(x.shape()), ")");
  if (n == 1) return x;
  Tensor recv = tp.all_to_all(x, {label});  // block i: my tokens, rank i's hidden chunk
  const int64_t rows = x.size(0) / n;
  std::vector<Tensor> blocks;
  for (int64_t i = 0; i < n; ++i) blocks.push_back(recv.slice0(i * rows, (i + 1) * rows));
  return cat(blocks, 2);
}
}  // namespace

Tensor AllToAllSp2Hp::forward(const Tensor& x, ProcessGroup& tp, const std::string& label) const {
  return sp2hp(x, tp, label);
}
Tensor AllToAllSp2Hp::backward(const Tensor& dy, ProcessGroup& tp, const std::string& label) const {
  return hp2sp(dy, tp, label);
}
Tensor AllToAllHp2Sp::forward(const Tensor& x, ProcessGroup& tp, const std::string& label) const {
  return hp2sp(x, tp, label);
}
Tensor AllToAllHp2Sp::backward(const Tensor& dy, ProcessGroup& tp, const std::string& label) const {
  return sp2hp(dy, tp, label);
}

}  // namespace tpsp::tensor_parallel
