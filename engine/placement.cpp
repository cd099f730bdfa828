#include "engine/placement.h"

#include "engine/error.h"

namespace tpsp {

std::string Placement::str() const {
  if (is_partial()) return "partial sum";
  if (!is_shard()) return "replicated";
  std::string s = "sharded on dim " + std::to_string(dim);
  if (stride > 1) s += " with stride " + std::to_string(stride);
  if (groups > 0) s += " over " + std::to_string(groups) + " groups (replicated within a group)";
  return s;
}

std::string Placement::code() const {
  if (is_partial()) return "Partial";
  if (!is_shard()) return "Replicate";
  const std::string d = std::to_string(dim);
  if (groups > 0) return "ShardOverGroups(" + d + ", groups=" + std::to_string(groups) + ")";
  return stride > 1 ? "Shard(" + d + ", stride=" + std::to_string(stride) + ")" : "Shard(" + d + ")";
}

void check_placement(const Placement& p, const Shape& shape, int tp) {
  TPSP_CHECK(tp >= 1, "tp=", tp, " must be at least 1");
  if (!p.is_shard()) return;
  TPSP_CHECK(p.dim >= 0 && p.dim < static_cast<int>(shape.size()), p.code(), " needs dim ", p.dim,
             ", but the tensor is ", shape_str(shape));
  TPSP_CHECK(p.stride >= 1, p.code(), ": stride=", p.stride, " must be at least 1");
  TPSP_CHECK(p.groups >= 0 && (p.groups == 0 || tp % p.groups == 0), p.code(), ": tp=", tp,
             " is not divisible by groups=", p.groups);
  TPSP_CHECK(p.stride == 1 || p.groups == 0, "stride=", p.stride, " and groups=", p.groups,
             ": a strided shard over groups is not a layout the engine has");
  const int64_t size = shape[static_cast<std::size_t>(p.dim)];
  TPSP_CHECK(size % (int64_t{p.stride} * p.shards(tp)) == 0, "dim ", p.dim, " of ", shape_str(shape), " (",
             size, ") is not divisible by stride ", p.stride, " × ", p.groups > 0 ? "groups " : "tp ",
             p.shards(tp));
}

std::vector<std::pair<int64_t, int64_t>> shard_ranges(const Placement& p, const Shape& shape, int rank,
                                                      int tp) {
  check_placement(p, shape, tp);
  TPSP_CHECK(rank >= 0 && rank < tp, "rank=", rank, " is not in [0, tp=", tp, ")");
  if (!p.is_shard()) return {{0, shape.empty() ? 1 : shape[0]}};
  const int64_t block = shape[static_cast<std::size_t>(p.dim)] / p.stride, chunk = block / p.shards(tp);
  const int64_t at = p.shard_index(rank, tp) * chunk;
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int k = 0; k < p.stride; ++k) out.emplace_back(k * block + at, k * block + at + chunk);
  return out;
}

std::string shard_range_str(const Placement& p, const Shape& shape, int rank, int tp) {
  if (!p.is_shard()) return p.str();
  std::string ranges;
  const auto rs = shard_ranges(p, shape, rank, tp);
  for (std::size_t i = 0; i < rs.size(); ++i)
    ranges += std::string(i == 0               ? ""
                          : i + 1 == rs.size() ? " and "
                                               : ", ") +
              "[" + std::to_string(rs[i].first) + ", " + std::to_string(rs[i].second) + ")";
  return (p.dim == 0 ? "rows " : "indices ") + ranges + " of dim " + std::to_string(p.dim);
}

Tensor shard_of(const Tensor& whole, const Placement& p, int rank, int tp) {
  if (!p.is_shard()) return whole.clone();
  std::vector<Tensor> parts;
  for (const auto& [start, stop] : shard_ranges(p, whole.shape(), rank, tp))
    parts.push_back(whole.narrow_copy(p.dim, start, stop - start));
  return parts.size() == 1 ? parts[0] : cat(parts, p.dim);
}

Tensor whole_of_gathered(const Tensor& gathered, const Placement& p, int tp) {
  if (!p.is_shard() || (p.stride == 1 && p.groups == 0)) return gathered;
  check_placement(Placement::Shard(p.dim, p.stride), gathered.shape(), tp);  // tp pieces were gathered
  check_placement(p, gathered.shape(), tp);                                  // and the groups divide tp
  const int64_t chunk = gathered.size(p.dim) / (int64_t{tp} * p.stride);     // one rank's piece of one block
  std::vector<Tensor> parts;
  for (int k = 0; k < p.stride; ++k)
    for (int j = 0; j < p.shards(tp); ++j) {
      const int r = p.groups > 0 ? j * (tp / p.groups) : j;  // the first rank holding shard j
      parts.push_back(gathered.narrow_copy(p.dim, (int64_t{r} * p.stride + k) * chunk, chunk));
    }
  return cat(parts, p.dim);
}

std::vector<int64_t> global_index(std::vector<int64_t> local, const Placement& p, const Shape& whole,
                                  int rank, int tp) {
  if (!p.is_shard()) return local;
  const auto rs = shard_ranges(p, whole, rank, tp);
  int64_t& i = local.at(static_cast<std::size_t>(p.dim));
  const int64_t chunk = rs[0].second - rs[0].first;
  i = rs[static_cast<std::size_t>(i / chunk)].first + i % chunk;
  return local;
}

}  // namespace tpsp
