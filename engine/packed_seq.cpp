// Packed sequences: validating cu_seqlens, positions per sequence, packing with per-sequence
// padding to a multiple of tp (see packed_seq.h).
#include "engine/packed_seq.h"

#include <algorithm>

#include "engine/error.h"

namespace tpsp {

void validate_cu_seqlens(const std::vector<int64_t>& cu, int64_t total, const char* what) {
  TPSP_CHECK(cu.size() >= 2, what, ": cu_seqlens has ", cu.size(),
             " entries; it needs n + 1 >= 2 (the boundaries of n >= 1 packed sequences)");
  TPSP_CHECK(cu.front() == 0, what, ": cu_seqlens[0] = ", cu.front(),
             " must be 0 (the first sequence starts at token 0)");
  for (std::size_t k = 1; k < cu.size(); ++k)
    TPSP_CHECK(cu[k] > cu[k - 1], what, ": cu_seqlens[", k, "] = ", cu[k], " is not greater than cu_seqlens[",
               k - 1, "] = ", cu[k - 1],
               ": cu_seqlens must be strictly increasing (every packed sequence needs at least one token)");
  TPSP_CHECK(cu.back() == total, what, ": the last cu_seqlens[", cu.size() - 1, "] = ", cu.back(),
             " must equal the packed total T = ", total, " tokens");
}

std::vector<int64_t> packed_sequence_index(const std::vector<int64_t>& cu) {
  std::vector<int64_t> seq(static_cast<std::size_t>(cu.back()));
  for (std::size_t k = 0; k + 1 < cu.size(); ++k)
    std::fill(seq.begin() + cu[k], seq.begin() + cu[k + 1], static_cast<int64_t>(k));
  return seq;
}

std::vector<PositionRun> packed_position_runs(const std::vector<int64_t>& cu, int64_t row_begin,
                                              int64_t row_end) {
  std::vector<PositionRun> runs;
  for (std::size_t k = 0; k + 1 < cu.size(); ++k) {
    const int64_t a = std::max(row_begin, cu[k]), b = std::min(row_end, cu[k + 1]);
    if (a < b) runs.push_back({a - row_begin, a - cu[k], b - a});
  }
  return runs;
}

PackedBatch pack_sequences(const std::vector<std::vector<int64_t>>& ids,
                           const std::vector<std::vector<int64_t>>& targets, int64_t pad_multiple,
                           int64_t pad_id) {
  TPSP_CHECK(!ids.empty(), "pack_sequences: no sequence to pack");
  TPSP_CHECK(ids.size() == targets.size(), "pack_sequences: ", ids.size(), " id sequences but ",
             targets.size(), " target sequences");
  TPSP_CHECK(pad_multiple >= 1, "pack_sequences: pad_multiple = ", pad_multiple, " must be >= 1");
  PackedBatch out;
  out.params.cu_seqlens.push_back(0);
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const int64_t len = static_cast<int64_t>(ids[k].size());
    TPSP_CHECK(len >= 1, "pack_sequences: sequence ", k, " is empty");
    TPSP_CHECK(targets[k].size() == ids[k].size(), "pack_sequences: sequence ", k, " has ", len, " ids but ",
               targets[k].size(), " targets");
    const int64_t padded = (len + pad_multiple - 1) / pad_multiple * pad_multiple;
    out.ids.ids.insert(out.ids.ids.end(), ids[k].begin(), ids[k].end());
    out.ids.ids.insert(out.ids.ids.end(), static_cast<std::size_t>(padded - len), pad_id);
    out.targets.ids.insert(out.targets.ids.end(), targets[k].begin(), targets[k].end());
    out.targets.ids.insert(out.targets.ids.end(), static_cast<std::size_t>(padded - len), kIgnoreIndex);
    out.params.cu_seqlens.push_back(out.params.cu_seqlens.back() + padded);
    out.seqlens.push_back(len);
  }
  const int64_t total = out.params.cu_seqlens.back();
  out.ids.b = out.targets.b = 1;
  out.ids.s = out.targets.s = total;
  return out;
}

}  // namespace tpsp
