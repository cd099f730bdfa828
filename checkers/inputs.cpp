#include "checkers/inputs.h"

#include <cmath>

#include "engine/error.h"
#include "engine/random/init.h"

namespace tpsp::checkers {

Tensor input_tensor(const Shape& shape, uint64_t seed, const std::string& name, float scale, bool exact) {
  Tensor t(shape);
  random::init_normal(t, seed, "check." + name, scale);
  if (exact)
    for (int64_t i = 0; i < t.numel(); ++i)
      t.at(i) = std::fmax(-8.f, std::fmin(8.f, std::round(t.at(i) * 12.f) / 4.f));
  return t;
}

TokenBatch input_tokens(int64_t b, int64_t s, int64_t vocab, uint64_t seed, const std::string& name) {
  const Tensor u = input_tensor({b * s}, seed, name);
  TokenBatch ids{b, s, {}};
  for (int64_t k = 0; k < b * s; ++k)
    ids.ids.push_back(static_cast<int64_t>(std::fabs(u.at(k)) * 1000) % vocab);
  return ids;
}

Tensor chunk(const Tensor& whole, int d, int r, int n) {
  TPSP_CHECK(whole.size(d) % n == 0, "chunk: dim ", d, " of ", shape_str(whole.shape()),
             " is not divisible into ", n, " chunks");
  const int64_t c = whole.size(d) / n;
  return d == 0 ? whole.slice0(r * c, (r + 1) * c).clone() : whole.narrow_copy(d, r * c, c);
}

Tensor pad_dim(const Tensor& t, int d, int64_t size) {
  if (t.size(d) == size) return t;
  Shape s = t.shape();
  s[static_cast<std::size_t>(d)] = size - t.size(d);
  return cat({t, Tensor(s)}, d);
}

}  // namespace tpsp::checkers
