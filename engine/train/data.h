// Byte-level text data for the demo and the tests: vocabulary = the 256 byte values.
#pragma once

#include <cstdint>
#include <string>

#include "engine/tokens.h"

namespace tpsp::train {

/// A text file read whole as bytes; token id = byte value (vocabulary 256).
class ByteDataset {
 public:
  /// Reads the file. Throws std::runtime_error naming the path if it cannot be read, and
  /// ShapeError if it holds fewer than 2 bytes.
  explicit ByteDataset(const std::string& path);
  /// Uses the given bytes as the corpus (tests).
  static ByteDataset from_string(std::string text);

  int64_t size() const { return static_cast<int64_t>(text_.size()); }
  static constexpr int64_t kVocab = 256;

  /// The global batch of an iteration: b windows of s+1 bytes at offsets drawn from
  /// Philox(seed, iteration); ids = bytes [o, o+s), targets = bytes [o+1, o+s+1), both [b, s].
  /// Every rank calling with the same arguments gets the same batch (all ranks of a TP group
  /// must see identical tokens). Throws ShapeError if s + 1 > size().
  void batch(int64_t iteration, int64_t b, int64_t s, uint64_t seed, TokenBatch& ids,
             TokenBatch& targets) const;

  /// Rows [first, first + count) of a batch — a data-parallel rank's share of the global batch.
  static TokenBatch rows(const TokenBatch& t, int64_t first, int64_t count);

 private:
  ByteDataset() = default;
  std::string text_;
};

}  // namespace tpsp::train
