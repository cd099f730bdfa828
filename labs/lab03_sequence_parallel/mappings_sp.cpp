// Layer 2 of mappings.h, sequence-parallel half: the dim-0 pairs and the all-to-alls.
// lab03 replaces this translation unit.
#include "engine/error.h"
#include "engine/lab_todo.h"
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::tensor_parallel {

Tensor ScatterToSequenceParallelRegion::forward([[maybe_unused]] const Tensor& x,
                                                [[maybe_unused]] ProcessGroup& tp,
                                                [[maybe_unused]] const std::string& label) const {
  // TODO(lab03 scatter_to_sequence_parallel_region forward): keep this rank's sequence chunk
  // [s/tp, b, h] (a view, see _split_along_first_dim).
  TPSP_LAB_TODO("lab03 scatter_to_sequence_parallel_region forward: keep this rank's sequence chunk [s/tp, b, h] (a view, see _split_along_first_dim)");
}
Tensor ScatterToSequenceParallelRegion::backward([[maybe_unused]] const Tensor& dy,
                                                 [[maybe_unused]] ProcessGroup& tp,
                                                 [[maybe_unused]] const std::string& label) const {
  // TODO(lab03 scatter_to_sequence_parallel_region backward): the input was replicated, so every
  // rank needs the FULL gradient [s, b, h]: all-gather the chunks along dim 0 (not a zero-padded slice).
  TPSP_LAB_TODO("lab03 scatter_to_sequence_parallel_region backward: the input was replicated, so every rank needs the FULL gradient [s, b, h]: all-gather the chunks along dim 0 (not a zero-padded slice)");
}

Tensor GatherFromSequenceParallelRegion::forward([[maybe_unused]] const Tensor& x,
                                                 [[maybe_unused]] ProcessGroup& tp,
                                                 [[maybe_unused]] const std::string& label) const {
  // TODO(lab03 gather_from_sequence_parallel_region forward): SP's f: all-gather the sequence
  // shards [s/tp, b, h] along dim 0 into [s, b, h], in rank order.
  TPSP_LAB_TODO("lab03 gather_from_sequence_parallel_region forward: SP's f: all-gather the sequence shards [s/tp, b, h] along dim 0 into [s, b, h], in rank order");
}
Tensor GatherFromSequenceParallelRegion::backward([[maybe_unused]] const Tensor& dy,
                                                  [[maybe_unused]] ProcessGroup& tp,
                                                  [[maybe_unused]] const std::string& label) const {
  // TODO(lab03 gather_from_sequence_parallel_region backward): each rank's gradient [s, b, h] is a
  // partial sum: reduce-scatter it along dim 0 so rank r keeps the summed rows of its own tokens.
  // When tensor_parallel_output_grad is false the gradient is already whole on every rank: just
  // keep this rank's chunk.
  TPSP_LAB_TODO("lab03 gather_from_sequence_parallel_region backward: each rank's gradient [s, b, h] is a partial sum: reduce-scatter it along dim 0 so rank r keeps the summed rows of its own tokens. When tensor_parallel_output_grad is false the gradient is already whole on every rank: just keep this rank's chunk");
}

Tensor ReduceScatterToSequenceParallelRegion::forward([[maybe_unused]] const Tensor& x,
                                                      [[maybe_unused]] ProcessGroup& tp,
                                                      [[maybe_unused]] const std::string& label) const {
  // TODO(lab03 reduce_scatter_to_sequence_parallel_region forward): SP's g: sum the partial
  // outputs [s, b, h] over the TP group and keep this rank's rows [s/tp, b, h] — one reduce-scatter
  // along dim 0 (not an all-reduce followed by a slice: that moves twice the bytes).
  TPSP_LAB_TODO("lab03 reduce_scatter_to_sequence_parallel_region forward: SP's g: sum the partial outputs [s, b, h] over the TP group and keep this rank's rows [s/tp, b, h] — one reduce-scatter along dim 0 (not an all-reduce followed by a slice: that moves twice the bytes)");
}
Tensor ReduceScatterToSequenceParallelRegion::backward([[maybe_unused]] const Tensor& dy,
                                                       [[maybe_unused]] ProcessGroup& tp,
                                                       [[maybe_unused]] const std::string& label) const {
  // TODO(lab03 reduce_scatter_to_sequence_parallel_region backward): every rank needs the gradient
  // of the whole [s, b, h] output: all-gather the shards along dim 0.
  TPSP_LAB_TODO("lab03 reduce_scatter_to_sequence_parallel_region backward: every rank needs the gradient of the whole [s, b, h] output: all-gather the shards along dim 0");
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

Tensor AllToAllSp2Hp::forward([[maybe_unused]] const Tensor& x, [[maybe_unused]] ProcessGroup& tp,
                              [[maybe_unused]] const std::string& label) const {
  return sp2hp(x, tp, label);
}
Tensor AllToAllSp2Hp::backward([[maybe_unused]] const Tensor& dy, [[maybe_unused]] ProcessGroup& tp,
                               [[maybe_unused]] const std::string& label) const {
  return hp2sp(dy, tp, label);
}
Tensor AllToAllHp2Sp::forward([[maybe_unused]] const Tensor& x, [[maybe_unused]] ProcessGroup& tp,
                              [[maybe_unused]] const std::string& label) const {
  return hp2sp(x, tp, label);
}
Tensor AllToAllHp2Sp::backward([[maybe_unused]] const Tensor& dy, [[maybe_unused]] ProcessGroup& tp,
                               [[maybe_unused]] const std::string& label) const {
  return sp2hp(dy, tp, label);
}

}  // namespace tpsp::tensor_parallel
