#include "engine/moe/uneven_collectives.h"

#include <numeric>

#include "engine/error.h"
#include "engine/ops/ops.h"

namespace tpsp::moe {

namespace {

void check_counts(const comm::ProcessGroup& g, const std::vector<int64_t>& counts, const char* what) {
  TPSP_CHECK(counts.size() == static_cast<std::size_t>(g.size()), what, " in group ", g.name(), ": ",
             counts.size(), " counts for ", g.size(), " ranks");
}

}  // namespace

Tensor all_gather_v(comm::ProcessGroup& g, const Tensor& x, const std::vector<int64_t>& counts,
                    const comm::CallOpts& o) {
  check_counts(g, counts, "all_gather_v");
  const int64_t mine = counts[static_cast<std::size_t>(g.rank())];
  TPSP_CHECK(x.dim() >= 1 && x.size(0) == mine, "all_gather_v in group ", g.name(), ": rank ", g.rank(),
             " brings ", x.dim() >= 1 ? x.size(0) : 0, " rows but its count is ", mine);
  if (g.size() == 1) return x;
  std::vector<Tensor> copies(static_cast<std::size_t>(g.size()), x);  // every peer gets this rank's rows
  return g.all_to_all(cat(copies, 0), counts, std::vector<int64_t>(copies.size(), mine), o);
}

Tensor reduce_scatter_v(comm::ProcessGroup& g, const Tensor& x, const std::vector<int64_t>& counts,
                        const comm::CallOpts& o) {
  check_counts(g, counts, "reduce_scatter_v");
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  TPSP_CHECK(x.dim() >= 1 && x.size(0) == total, "reduce_scatter_v in group ", g.name(), ": the input has ",
             x.dim() >= 1 ? x.size(0) : 0, " rows, the counts add up to ", total);
  if (g.size() == 1) return x;
  const int64_t mine = counts[static_cast<std::size_t>(g.rank())];
  const Tensor pieces =  // rank q's segment goes to q; this rank gets every rank's copy of its own
      g.all_to_all(x, std::vector<int64_t>(static_cast<std::size_t>(g.size()), mine), counts, o);
  Tensor sum = pieces.slice0(0, mine).to(DType::f32);
  for (int q = 1; q < g.size(); ++q)
    sum = ops::add(sum, pieces.slice0(q * mine, (q + 1) * mine).to(DType::f32));
  return sum.to(x.dtype());
}

}  // namespace tpsp::moe
