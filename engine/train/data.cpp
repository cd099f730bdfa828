#include "engine/train/data.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "engine/error.h"
#include "engine/random/philox.h"

namespace tpsp::train {

ByteDataset::ByteDataset(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read text file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  text_ = ss.str();
  TPSP_CHECK(text_.size() >= 2, "text file '", path, "' holds ", text_.size(),
             " bytes; at least 2 are needed");
}

ByteDataset ByteDataset::from_string(std::string text) {
  ByteDataset d;
  d.text_ = std::move(text);
  TPSP_CHECK(d.text_.size() >= 2, "text holds ", d.text_.size(), " bytes; at least 2 are needed");
  return d;
}

void ByteDataset::batch(int64_t iteration, int64_t b, int64_t s, uint64_t seed, TokenBatch& ids,
                        TokenBatch& targets) const {
  TPSP_CHECK(b > 0 && s > 0, "batch needs b > 0 and s > 0, got b=", b, " s=", s);
  TPSP_CHECK(s + 1 <= size(), "sequence length s=", s, " needs s+1=", s + 1, " bytes but the text holds ",
             size());
  ids = {b, s, std::vector<int64_t>(static_cast<std::size_t>(b * s))};
  targets = ids;
  const uint64_t stream = random::hash_name("data") + static_cast<uint64_t>(iteration);
  const int64_t windows = size() - s;  // valid start offsets: [0, size - s - 1]
  for (int64_t bi = 0; bi < b; ++bi) {
    const float u = random::uniform(seed, stream, static_cast<uint64_t>(bi));
    const int64_t off = std::min<int64_t>(static_cast<int64_t>(u * static_cast<float>(windows)), windows - 1);
    for (int64_t si = 0; si < s; ++si) {
      const auto k = static_cast<std::size_t>(bi * s + si);
      ids.ids[k] = static_cast<unsigned char>(text_[static_cast<std::size_t>(off + si)]);
      targets.ids[k] = static_cast<unsigned char>(text_[static_cast<std::size_t>(off + si + 1)]);
    }
  }
}

TokenBatch ByteDataset::rows(const TokenBatch& t, int64_t first, int64_t count) {
  TPSP_CHECK(first >= 0 && count >= 0 && first + count <= t.b, "rows [", first, ", ", first + count,
             ") are outside the batch of b=", t.b);
  TokenBatch out{count, t.s, {}};
  out.ids.assign(t.ids.begin() + first * t.s, t.ids.begin() + (first + count) * t.s);
  return out;
}

}  // namespace tpsp::train
