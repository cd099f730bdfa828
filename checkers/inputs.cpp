#include "checkers/inputs.h"

#include <cctype>
#include <cmath>
#include <stdexcept>

#include "engine/error.h"
#include "engine/random/init.h"
#include "engine/random/philox.h"

namespace tpsp::checkers {

namespace {

/// The name an input is drawn under: each way of sharing has names of its own (see inputs.h). A split
/// tensor's name holds its shape too: the draw's values follow the flat index, so without it a request
/// for the same name with a larger shape would hand a rank's chunk the whole of the smaller tensor
/// (found by an attack, 2026-12-07: coordinate 0 asked row.w as [1, H·F·tp]).
std::string drawn_name(const InputSpec& spec, Share share, int dim, int rank) {
  switch (share) {
    case Share::split: {
      std::string name = "check." + spec.name + "/split" + std::to_string(dim) + "/";
      for (std::size_t i = 0; i < spec.shape.size(); ++i)
        name += (i ? "x" : "") + std::to_string(spec.shape[i]);
      return name;
    }
    case Share::of_rank:
      return "check." + spec.name + ".rank" + std::to_string(rank);
    default:
      return "check." + spec.name;
  }
}

/// The Philox key an input is drawn with. A whole tensor's is the seed itself. A split tensor's and a rank's
/// own tensor's also hold how it is shared, its shape and (of_rank) the rank, mixed in by Philox4x32-10:
/// the name reaches the draw only through a 64-bit FNV-1a stream id, for which a name can be crafted to
/// collide with another; with the key apart, a colliding name still draws only what the asking rank may
/// have (its own chunk of a tensor of that shape, its own tensor).
uint64_t draw_key(uint64_t seed, Share share, int dim, int rank, const Shape& shape) {
  if (share == Share::whole) return seed;
  uint64_t key = seed;
  const auto mix = [&key](uint64_t v, uint32_t what) {
    const auto out =
        random::philox4x32({static_cast<uint32_t>(v), static_cast<uint32_t>(v >> 32), what, 0x696e70u},
                           {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)});
    key = uint64_t{out[0]} | uint64_t{out[1]} << 32;
  };
  mix(share == Share::split ? 1 : 2, 0);
  mix(static_cast<uint64_t>(share == Share::split ? dim : rank), 1);
  for (std::size_t i = 0; i < shape.size(); ++i)
    mix(static_cast<uint64_t>(shape[i]), 2 + static_cast<uint32_t>(i));
  return key;
}

/// A rank that knows the seed: draws the whole and keeps its own chunk.
class SeededRankSource final : public InputSource {
 public:
  SeededRankSource(uint64_t seed, int rank, int size) : seed_(seed), rank_(rank), size_(size) {}
  Tensor draw(const InputSpec& spec, Share share, int dim, int rank) const override {
    const Tensor t = draw_input(spec, share, dim, rank, seed_);
    return share == Share::split ? chunk(t, dim, rank_, size_) : t;
  }

 private:
  uint64_t seed_;
  int rank_, size_;
};

/// The grader's side: whole tensors.
class SeedSource final : public InputSource {
 public:
  explicit SeedSource(uint64_t seed) : seed_(seed) {}
  Tensor draw(const InputSpec& spec, Share share, int dim, int rank) const override {
    return draw_input(spec, share, dim, rank, seed_);
  }

 private:
  uint64_t seed_;
};

}  // namespace

std::string input_name_problem(const std::string& name) {
  if (name.empty() || name.size() > 200) return "an input name has 1 to 200 characters";
  for (const char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return "an input name holds only letters, digits, '.', '_' and '-'";
  const std::size_t at = name.rfind(".rank");
  if (at != std::string::npos && at + 5 < name.size() &&
      name.find_first_not_of("0123456789", at + 5) == std::string::npos)
    return "an input name may not end in .rank<digits> (that is a rank's own input)";
  return "";
}

Tensor draw_input(const InputSpec& spec, Share share, int dim, int rank, uint64_t seed) {
  if (const std::string why = input_name_problem(spec.name); !why.empty())
    throw std::invalid_argument("input '" + spec.name + "': " + why);
  Tensor t(spec.shape);
  random::init_normal(t, draw_key(seed, share, dim, rank, spec.shape), drawn_name(spec, share, dim, rank),
                      spec.scale);
  if (spec.exact)
    for (int64_t i = 0; i < t.numel(); ++i)
      t.at(i) = std::fmax(-8.f, std::fmin(8.f, std::round(t.at(i) * 12.f) / 4.f));
  return t;
}

InputDraw::InputDraw(uint64_t seed) : source_(std::make_shared<SeedSource>(seed)) {}

InputDraw InputDraw::split(int d) const {
  InputDraw out = *this;
  out.split_ = d;
  return out;
}

Tensor InputDraw::operator()(const InputSpec& spec) const {
  if (!source_) throw std::logic_error("input '" + spec.name + "' drawn from an InputDraw without a source");
  return split_ < 0 ? source_->draw(spec, Share::whole, 0, 0) : source_->draw(spec, Share::split, split_, 0);
}

Tensor InputDraw::of_rank(const InputSpec& spec, int r) const {
  if (!source_) throw std::logic_error("input '" + spec.name + "' drawn from an InputDraw without a source");
  return source_->draw(spec, Share::of_rank, 0, r);
}

std::shared_ptr<const InputSource> seeded_rank_source(uint64_t seed, int rank, int size) {
  return std::make_shared<SeededRankSource>(seed, rank, size);
}

uint64_t model_seed_of(uint64_t seed) {
  const uint64_t stream = random::hash_name("tpsp.checkers.model_seed");
  const auto out = random::philox4x32(
      {static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32), 0x6d6f64u, 0x656cu},
      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  return uint64_t{out[0]} | uint64_t{out[1]} << 32;
}

Tensor input_tensor(const Shape& shape, const InputDraw& draw, const std::string& name, float scale,
                    bool exact) {
  return draw({name, shape, scale, exact});
}

TokenBatch input_tokens(int64_t b, int64_t s, int64_t vocab, const InputDraw& draw, const std::string& name) {
  const Tensor u = input_tensor({b * s}, draw, name);
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
