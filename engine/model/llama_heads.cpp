// The per-group QKV layout's helpers (see llama_tp.h): splitting an activation laid out per key/value
// group into q, k and v, and joining them back.
#include "engine/model/llama_tp.h"

namespace tpsp::model {

namespace {

Tensor cols(const Tensor& t, int64_t start, int64_t width) {
  return t.narrow_copy(2, start, width);
}

}  // namespace

QKV split_groups(const Tensor& t, int64_t groups, int64_t per_in, int64_t first, int64_t per, int64_t d) {
  std::vector<Tensor> q, k, v;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t base = g * (per_in + 2) * d;
    q.push_back(cols(t, base + first * d, per * d));
    k.push_back(cols(t, base + per_in * d, d));
    v.push_back(cols(t, base + (per_in + 1) * d, d));
  }
  return {cat(q, 2), cat(k, 2), cat(v, 2)};
}

Tensor join_groups(const QKV& x, int64_t groups, int64_t per, int64_t d) {
  std::vector<Tensor> parts;
  for (int64_t g = 0; g < groups; ++g) {
    parts.push_back(cols(x.q, g * per * d, per * d));
    parts.push_back(cols(x.k, g * d, d));
    parts.push_back(cols(x.v, g * d, d));
  }
  return cat(parts, 2);
}

Tensor zero_columns(const Tensor& t, int64_t width) {
  return Tensor({t.size(0), t.size(1), width}, DType::f32, t.device());
}

}  // namespace tpsp::model
