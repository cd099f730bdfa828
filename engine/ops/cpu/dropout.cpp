// Dropout with shard-invariant masks: the keep bit of an element depends only on (seed, stream)
// and the element's flat index in the whole tensor, never on which rank computes it.
#include <array>
#include <string>
#include <vector>

#include "engine/ops/cpu/cpu_ops.h"
#include "engine/ops/rules.h"
#include "engine/random/philox.h"
#include "engine/random/philox_core.h"

namespace tpsp::ops {
namespace {

/// Writes keep_value or 0 for the `count` consecutive global indices first, first+1, …: the same bits
/// as random::dropout_keeps(seed, stream, i, p) (engine/random/philox_core.h, which the CUDA kernels
/// call: counter (i / 4, stream), lane i % 4, top 24 bits), but one Philox block serves four
/// consecutive indices instead of being recomputed for each.
void fill_keep_row(float* out, int64_t count, uint64_t first, float p, float keep_value,
                   const DropoutKey& key) {
  const std::array<uint32_t, 2> k = {static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32)};
  std::array<uint32_t, 4> lanes{};
  uint64_t block = ~uint64_t{0};
  for (int64_t j = 0; j < count; ++j) {
    const uint64_t i = first + static_cast<uint64_t>(j);
    if (i / 4 != block) {
      block = i / 4;
      lanes = random::philox4x32({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                                  static_cast<uint32_t>(key.stream), static_cast<uint32_t>(key.stream >> 32)},
                                 k);
    }
    const float u = random::lane_to_unit(lanes[i % 4]);
    out[j] = u >= p ? keep_value : 0.f;
  }
}

}  // namespace

// The stream id is the FNV-1a 64 hash of "<site>#<iteration>", e.g. "embedding#3".
uint64_t dropout_stream(const std::string& site, int64_t iteration) {
  return random::hash_name(site + "#" + std::to_string(iteration));
}

// The public mask (ops::dropout_mask) is host code by definition: it is defined here, beside the
// CPU's dropout, and checks its rule itself.
Tensor dropout_mask(const Shape& local_shape, float p, const DropoutKey& key) {
  const DropoutGeometry g = rules::dropout(local_shape, p, key);
  const std::size_t nd = local_shape.size();
  Tensor mask(local_shape);
  const int64_t n = mask.numel();
  if (n == 0) return mask;
  if (nd == 0) {  // a scalar: global index 0
    fill_keep_row(mask.data(), 1, 0, p, g.keep_value, key);
    return mask;
  }
  // The last dim is contiguous in both the local and the global tensor.
  const int64_t inner = local_shape[nd - 1];
  std::vector<int64_t> idx(nd, 0);  // local coordinates of the current row start (last coord 0)
  for (int64_t row = 0; row < n / inner; ++row) {
    int64_t base = 0;
    for (std::size_t d = 0; d < nd; ++d) base += (g.offset[d] + idx[d]) * g.gstride[d];
    fill_keep_row(mask.data() + row * inner, inner, static_cast<uint64_t>(base), p, g.keep_value, key);
    for (std::size_t d = nd - 1; d-- > 0;) {  // odometer over the leading dims
      if (++idx[d] < local_shape[d]) break;
      idx[d] = 0;
    }
  }
  return mask;
}

namespace cpu {

Tensor CpuOps::dropout_forward(const Tensor& x, float p, const DropoutKey& key) {
  if (p == 0.f) return x.clone();
  Tensor y = ops::dropout_mask(x.shape(), p, key);
  const float* px = x.data();
  float* py = y.data();
  for (int64_t i = 0; i < y.numel(); ++i) py[i] *= px[i];
  return y;
}

Tensor CpuOps::dropout_backward(const Tensor& dy, float p, const DropoutKey& key) {
  return dropout_forward(dy, p, key);
}

}  // namespace cpu
}  // namespace tpsp::ops
