// Argument checks shared by every ProcessGroup backend: they raise tpsp::ShapeError naming the op,
// the group and the offending values, before any communication.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/comm/backend.h"
#include "engine/tensor.h"

namespace tpsp::comm {

/// `dim` with negatives counted from the end; ShapeError unless 0 <= dim < t.dim().
int64_t normalize_dim(const Tensor& t, int64_t dim, const char* op, const std::string& group);
/// ShapeError unless t is a defined f32 or bf16 tensor on a device the backend moves.
void check_tensor(const Tensor& t, const char* op, const std::string& group, const Backend& backend);
/// Output shape of all_gather: `in` with extent n*k at `dim` ([.., k, ..] -> [.., n*k, ..]).
Shape all_gather_shape(const Tensor& in, int64_t dim, int n, const std::string& group,
                       const Backend& backend);
/// Output shape of reduce_scatter: [.., n*k, ..] -> [.., k, ..]. ShapeError if the extent at dim is
/// not divisible by n, e.g. "reduce_scatter in group tp: dim 0 extent 6 of input [6, 4] is not
/// divisible by the group size 4".
Shape reduce_scatter_shape(const Tensor& in, int64_t dim, int n, const std::string& group,
                           const Backend& backend);
/// ShapeError unless in.size(0) % n == 0 (all_to_all splits dim 0 into n equal chunks).
void check_all_to_all(const Tensor& in, int n, const std::string& group, const Backend& backend);
/// The most elements either side of an uneven all_to_all may hold (2^40: beyond any machine's memory, and
/// far from overflowing a byte count).
inline constexpr int64_t kMaxSplitElements = int64_t{1} << 40;
/// ShapeError unless an uneven all_to_all's split sizes (rows of dim 0) fit: one entry per rank in each
/// list, none negative, each list's rows at most kMaxSplitElements elements, input_split_sizes adding up
/// to in.size(0), and the rows this rank keeps
/// (input_split_sizes[rank]) equal to those it expects from itself (output_split_sizes[rank]), e.g.
/// "all_to_all in group ep ('moe.combine'): input_split_sizes [2, 3] add up to 5 rows, but the input [4, 8]
/// has 4" (`group`: the group's name, and the call's label when it has one).
void check_all_to_all_splits(const Tensor& in, const std::vector<int64_t>& output_split_sizes,
                             const std::vector<int64_t>& input_split_sizes, int rank, int n,
                             const std::string& group, const Backend& backend);
/// ShapeError unless 0 <= peer < n (root, src, dst).
void check_peer(int peer, int n, const char* what, const char* op, const std::string& group);
/// Allocates `out` with `shape` and `dtype` on `device` if it is undefined; otherwise ShapeError unless
/// it has that shape, dtype and device.
void prepare_out(Tensor& out, const Shape& shape, DType dtype, const char* op, const std::string& group,
                 Device device = Device::cpu);

}  // namespace tpsp::comm
