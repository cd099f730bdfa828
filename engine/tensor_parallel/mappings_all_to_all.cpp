// Layer 2 of mappings.h, the all-to-alls between the sequence-parallel and the head-parallel layouts
// ([s/tp, b, h] ↔ [s, b, h/tp]; Megatron-LM mappings.py _AllToAllSP2HP / _AllToAllHP2SP). Engine code no
// lab asks for: kept out of lab03's mappings_sp.cpp so that a learner's file holds only the tasks.
#include "engine/error.h"
#include "engine/tensor_parallel/mappings.h"

namespace tpsp::tensor_parallel {

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
