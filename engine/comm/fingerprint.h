// Collective fingerprints: before each collective the ranks of a group all-gather a small struct
// describing the call (sequence number, op, element count, dtype, shape, dim/root, reduce op, group)
// and raise CollectiveMismatchError on every rank if any rank's call differs, instead of hanging or
// silently mixing up buffers. (PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL does the same check.) Part of the
// ProcessGroup's protocol: it runs over any Backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/comm/backend.h"
#include "engine/comm/op.h"
#include "engine/tensor.h"

namespace tpsp::comm {

/// What one rank is about to call. Plain bytes, exchanged as is.
struct Fingerprint {
  static constexpr int kMaxDims = 6;
  uint64_t seq = 0;    ///< Per-group collective number.
  uint64_t count = 0;  ///< Elements of the caller's tensor (all_gather: the local shard).
  int64_t arg = 0;     ///< dim (all_gather/reduce_scatter), root (broadcast), ranks hash (new_group).
  int64_t shape[kMaxDims] = {};  ///< First dims of the tensor's shape.
  uint32_t ndim = 0;
  uint8_t op = 0;      ///< OpKind
  uint8_t dtype = 0;   ///< DType
  uint8_t reduce = 0;  ///< ReduceOp (all_reduce/reduce_scatter), else 0
  uint8_t pad = 0;
  char group[16] = {};  ///< Group name (truncated).
};
static_assert(std::is_trivially_copyable_v<Fingerprint>);

/// Builds the fingerprint of one call.
Fingerprint make_fingerprint(OpKind op, uint64_t seq, const Shape& shape, DType dtype, int64_t arg,
                             ReduceOp reduce, const std::string& group);

/// "all_gather #7 (4096 f32, group tp)"; with `with_shape` the shape is added after the dtype.
std::string describe(const Fingerprint& fp, bool with_shape = false);

/// All-gathers `mine` over the backend (tag `tag`, bounded by `timeout`) and throws
/// CollectiveMismatchError if any rank's fingerprint differs from rank 0's. Every rank builds the same
/// message: "collective mismatch in group tp: rank 1 called all_gather #7 (4096 f32, group tp) where rank 0
/// called reduce_scatter #7 (4096 f32, group tp)". Gloo errors propagate unchanged.
void check_fingerprints(Backend& backend, const Fingerprint& mine, uint32_t tag,
                        std::chrono::milliseconds timeout);

/// After matching fingerprints of an uneven all_to_all: all-gathers every rank's bytes to and from each
/// peer (tag `tag`) and throws CollectiveMismatchError, the same on every rank, where rank i sends j a
/// different count than j expects from i, in rows of `row_bytes` bytes: "split sizes disagree in all_to_all
/// #3 in group ep: rank 0 sends 5 rows to rank 1, which expects 3 rows from rank 0". `what` names the call.
void check_split_sizes(Backend& backend, const std::vector<uint64_t>& send_bytes,
                       const std::vector<uint64_t>& recv_bytes, uint64_t row_bytes, const std::string& what,
                       uint32_t tag, std::chrono::milliseconds timeout);

}  // namespace tpsp::comm
