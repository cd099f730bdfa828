#include "engine/moe/uneven_collectives.h"

#include <numeric>

#include "engine/error.h"
#include "engine/lab_todo.h"
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
  // TODO(lab06 all_gather_v): x [counts[rank], h] on every rank of g -> [Σ counts, h], rank q's rows at
  // [Σ_{p<q} counts[p], …) in rank order. One call: g.all_to_all with split sizes (every rank sends its
  // rows to each rank: input splits `mine` for every peer, output splits `counts`), passing o.
  // BEGIN SOLUTION
  std::vector<Tensor> copies(static_cast<std::size_t>(g.size()), x);  // every peer gets this rank's rows
  return g.all_to_all(cat(copies, 0), counts, std::vector<int64_t>(copies.size(), mine), o);
  // END SOLUTION
}

Tensor reduce_scatter_v(comm::ProcessGroup& g, const Tensor& x, const std::vector<int64_t>& counts,
                        const comm::CallOpts& o) {
  check_counts(g, counts, "reduce_scatter_v");
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  TPSP_CHECK(x.dim() >= 1 && x.size(0) == total, "reduce_scatter_v in group ", g.name(), ": the input has ",
             x.dim() >= 1 ? x.size(0) : 0, " rows, the counts add up to ", total);
  if (g.size() == 1) return x;
  // TODO(lab06 reduce_scatter_v): x [Σ counts, h], segment q = rows [Σ_{p<q} counts[p], …) on every rank
  // -> this rank's segment summed over the ranks of g [counts[rank], h] (the sum of row-parallel partial
  // results: not their mean, and no rank keeps another's segment). One g.all_to_all with split sizes
  // (segment q to rank q; from every rank its copy of this rank's segment), passing o, then the sum in
  // float32 in rank order.
  // BEGIN SOLUTION
  const int64_t mine = counts[static_cast<std::size_t>(g.rank())];
  const Tensor pieces =  // rank q's segment goes to q; this rank gets every rank's copy of its own
      g.all_to_all(x, std::vector<int64_t>(static_cast<std::size_t>(g.size()), mine), counts, o);
  Tensor sum = pieces.slice0(0, mine).to(DType::f32);
  for (int q = 1; q < g.size(); ++q)
    sum = ops::add(sum, pieces.slice0(q * mine, (q + 1) * mine).to(DType::f32));
  return sum.to(x.dtype());
  // END SOLUTION
}

}  // namespace tpsp::moe
