#include "engine/moe/token_dispatcher.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "engine/error.h"
#include "engine/lab_todo.h"
#include "engine/moe/uneven_collectives.h"

namespace tpsp::moe {

namespace {

int64_t sum(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}

/// Copies row blocks of `src` (blocks of `sizes`, in order) into the order `perm` (block b of the result
/// is block perm[b] of src).
Tensor reorder_blocks(const Tensor& src, const std::vector<int64_t>& sizes,
                      const std::vector<int64_t>& perm) {
  std::vector<int64_t> start(sizes.size(), 0);
  for (std::size_t b = 1; b < sizes.size(); ++b) start[b] = start[b - 1] + sizes[b - 1];
  std::vector<Tensor> parts;
  for (int64_t b : perm) {
    const auto i = static_cast<std::size_t>(b);
    if (sizes[i] > 0) parts.push_back(src.slice0(start[i], start[i] + sizes[i]));
  }
  return parts.empty() ? Tensor::zeros({0, src.size(1)}) : cat(parts, 0);
}

/// Block index of chunk (q, i, e) in received order, and the permutation to expert-major order (e, q, i).
std::vector<int64_t> expert_major(const DispatchPlan& p, int etp, int ep) {
  std::vector<int64_t> perm;
  for (int64_t e = 0; e < p.num_local; ++e)
    for (int q = 0; q < etp; ++q)
      for (int i = 0; i < ep; ++i) perm.push_back((q * ep + i) * p.num_local + e);
  return perm;
}

/// ShapeError unless t is [rows, h]: what a learner's step returned before the engine reorders it.
void check_rows(const Tensor& t, int64_t rows, const char* what) {
  TPSP_CHECK(t.defined() && t.dim() == 2 && t.size(0) == rows, "MoE ", what, ": the exchanged rows must be [",
             rows, ", h] (Σ of the plan's chunks: what the count exchange says this rank receives), got ",
             t.defined() ? shape_str(t.shape()) : std::string("an undefined tensor"));
}

std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
  std::vector<int64_t> inv(perm.size());
  for (std::size_t b = 0; b < perm.size(); ++b)
    inv[static_cast<std::size_t>(perm[b])] = static_cast<int64_t>(b);
  return inv;
}

std::vector<int64_t> sizes_in(const std::vector<int64_t>& chunks, const std::vector<int64_t>& perm) {
  std::vector<int64_t> s;
  for (int64_t b : perm) s.push_back(chunks[static_cast<std::size_t>(b)]);
  return s;
}

}  // namespace

DispatchPlan plan_dispatch(const Routing& r, ExpertParallelState& eps, const std::string& label) {
  const int ep = eps.ep_size(), etp = eps.etp_size();
  DispatchPlan p;
  p.tokens = r.num_tokens();
  p.topk = r.topk;
  p.num_experts = r.num_experts;
  std::tie(p.first_local, p.num_local) = ExpertParallelState::local_experts(r.num_experts, ep, eps.ep_rank());
  const int64_t E = r.num_experts, per = p.num_local;
  TPSP_CHECK(p.tokens * p.topk < (int64_t{1} << 24), "MoE dispatch: ", p.tokens, " tokens × top-", p.topk,
             " choices on one rank: the counts travel as float32, exact below 2^24");
  // TODO(lab06 permute_order): p.order [T·k] = the choices c = t·k + j (r.indices[c] is choice j's expert
  // of token t) sorted by expert, and within one expert by token (a stable sort of 0 … T·k−1 by expert).
  // Permuted row i is then token order[i] / k, and each expert's rows are consecutive.
  // BEGIN SOLUTION
  p.order.resize(static_cast<std::size_t>(p.tokens * p.topk));
  std::iota(p.order.begin(), p.order.end(), int64_t{0});
  std::stable_sort(p.order.begin(), p.order.end(), [&](int64_t a, int64_t b) {
    return r.indices[static_cast<std::size_t>(a)] < r.indices[static_cast<std::size_t>(b)];
  });
  // END SOLUTION
  TPSP_CHECK(p.order.size() == static_cast<std::size_t>(p.tokens * p.topk),
             "MoE dispatch: the permutation has ", p.order.size(),
             " entries; it must have one per choice, T·k = ", p.tokens * p.topk);
  // TODO(lab06 count_exchange): every tp_ep rank's choices per expert, p.counts [EP·ETP·E]: counts[p·E + e]
  // = r.tokens_per_expert[e] of tp_ep rank p. One all_gather over eps.tp_ep() of a float32 [E] tensor
  // (the counts are exact in float32 below 2^24), labelled label + ".counts". A rank cannot know what
  // others send it without this exchange: the counts differ from rank to rank.
  // BEGIN SOLUTION
  Tensor mine({E});
  for (int64_t e = 0; e < E; ++e)
    mine.data()[e] = static_cast<float>(r.tokens_per_expert[static_cast<std::size_t>(e)]);
  const Tensor all = eps.tp_ep().all_gather(mine, 0, {label + ".counts"});
  for (int64_t i = 0; i < all.numel(); ++i) p.counts.push_back(static_cast<int64_t>(all.data()[i]));
  // END SOLUTION
  TPSP_CHECK(p.counts.size() == static_cast<std::size_t>(ep * etp * E),
             "MoE dispatch: the count exchange gave ", p.counts.size(),
             " counts; it must give EP·ETP·E = ", ep * etp * E);
  auto count = [&](int tp_ep_rank, int64_t e) {
    return p.counts[static_cast<std::size_t>(tp_ep_rank * E + e)];
  };
  // TODO(lab06 split_sizes): the all_to_all's split sizes over the ep group, one entry per EP rank j:
  // p.input_splits[j] = this rank's choices for EP rank j's experts [j·per, (j+1)·per) (what it sends j),
  // p.output_splits[j] = the choices of j's tp_ep rank j·ETP + etp_rank for this rank's experts
  // [first_local, first_local + per) (what it receives from j). This rank is tp_ep rank
  // ep_rank·ETP + etp_rank; read the counts with count(tp_ep_rank, expert).
  // BEGIN SOLUTION
  const int me = eps.ep_rank() * etp + eps.etp_rank();
  for (int j = 0; j < ep; ++j) {
    int64_t to = 0, from = 0;
    for (int64_t e = 0; e < per; ++e) {
      to += count(me, j * per + e);                                // my choices for EP rank j's experts
      from += count(j * etp + eps.etp_rank(), p.first_local + e);  // EP rank j's choices for mine
    }
    p.input_splits.push_back(to);
    p.output_splits.push_back(from);
  }
  // END SOLUTION
  TPSP_CHECK(p.input_splits.size() == static_cast<std::size_t>(ep) &&
                 p.output_splits.size() == static_cast<std::size_t>(ep) &&
                 sum(p.input_splits) == p.tokens * p.topk,
             "MoE dispatch: the split sizes must have EP=", ep,
             " entries each and the input splits must add up to "
             "this rank's T·k=",
             p.tokens * p.topk, " choices; got ", p.input_splits.size(), " input splits adding up to ",
             sum(p.input_splits), " and ", p.output_splits.size(), " output splits");
  p.rows_per_expert.assign(static_cast<std::size_t>(per), 0);
  for (int q = 0; q < etp; ++q) {
    int64_t rows = 0;
    for (int i = 0; i < ep; ++i)
      for (int64_t e = 0; e < per; ++e) {
        const int64_t c = count(i * etp + q, p.first_local + e);
        p.chunks.push_back(c);
        rows += c;
        p.rows_per_expert[static_cast<std::size_t>(e)] += c;
      }
    p.etp_rows.push_back(rows);
  }
  return p;
}

Tensor dispatch(const Tensor& x, const DispatchPlan& p, ExpertParallelState& eps, const std::string& label) {
  TPSP_CHECK(x.dim() == 2 && x.size(0) == p.tokens, "MoE dispatch: x must be [", p.tokens, ", h], got ",
             shape_str(x.shape()));
  Tensor received;
  // TODO(lab06 dispatch): permuted [T·k, h], row i = x's row of token order[i] / k; then one all_to_all over
  // eps.ep() with the plan's split sizes (labelled label + ".dispatch"), and when ETP > 1 all_gather_v over
  // eps.etp() with p.etp_rows (label + ".etp_all_gather"): every ETP rank computes its shard of the
  // experts for the tokens all ETP ranks received. `received` holds the chunks in that order (ETP rank,
  // EP source, local expert); the line after the block sorts them by local expert.
  // BEGIN SOLUTION
  const int64_t h = x.size(1);
  Tensor permuted = Tensor::zeros({p.tokens * p.topk, h});  // row i = token order[i] / k
  for (std::size_t i = 0; i < p.order.size(); ++i)
    std::memcpy(permuted.data() + static_cast<int64_t>(i) * h, x.data() + p.order[i] / p.topk * h,
                sizeof(float) * static_cast<std::size_t>(h));
  received = eps.ep().all_to_all(permuted, p.output_splits, p.input_splits, {label + ".dispatch"});
  if (eps.etp_size() > 1)
    received = all_gather_v(eps.etp(), received, p.etp_rows, {label + ".etp_all_gather"});
  // END SOLUTION
  check_rows(received, sum(p.chunks), "dispatch");
  return reorder_blocks(received, p.chunks, expert_major(p, eps.etp_size(), eps.ep_size()));
}

Tensor combine_rows(const Tensor& out, const DispatchPlan& p, ExpertParallelState& eps,
                    const std::string& label) {
  const std::vector<int64_t> to_expert = expert_major(p, eps.etp_size(), eps.ep_size());
  TPSP_CHECK(out.dim() == 2 && out.size(0) == sum(p.chunks), "MoE combine: the experts' output must have ",
             sum(p.chunks), " rows, got ", shape_str(out.shape()));
  Tensor rows = reorder_blocks(out, sizes_in(p.chunks, to_expert), inverse(to_expert));
  // TODO(lab06 combine): `rows` [Σ chunks, h] is back in received order (ETP rank, EP source, local
  // expert), each row an ETP partial sum of fc2 (row-parallel). When ETP > 1: reduce_scatter_v over
  // eps.etp() with p.etp_rows (label + ".etp_reduce_scatter"): the sum, and each ETP rank keeps the rows
  // its own all_to_all received. Then the reverse all_to_all over eps.ep() (the dispatch's split sizes
  // swapped, label + ".combine") -> every choice's row back on its rank in permuted order [T·k, h].
  // BEGIN SOLUTION
  if (eps.etp_size() > 1)
    rows = reduce_scatter_v(eps.etp(), rows, p.etp_rows, {label + ".etp_reduce_scatter"});
  return eps.ep().all_to_all(rows, p.input_splits, p.output_splits, {label + ".combine"});
  // END SOLUTION
}

namespace {

/// ShapeError unless rows are [T·k, h], probs [T, k] and (when defined) dy [T, h].
void check_unpermute(const Tensor& rows, const Tensor& probs, const Tensor& dy, const DispatchPlan& p) {
  TPSP_CHECK(rows.dim() == 2 && rows.size(0) == p.tokens * p.topk &&
                 probs.shape() == Shape({p.tokens, p.topk}) &&
                 (!dy.defined() || dy.shape() == Shape({p.tokens, rows.size(1)})),
             "MoE unpermute: rows must be [T·k=", p.tokens * p.topk, ", h], probs [", p.tokens, ", ", p.topk,
             "] and dy [", p.tokens, ", h]; got rows ", shape_str(rows.shape()), ", probs ",
             shape_str(probs.shape()), dy.defined() ? ", dy " + shape_str(dy.shape()) : std::string());
}

}  // namespace

Tensor unpermute(const Tensor& rows, const Tensor& probs, const DispatchPlan& p) {
  check_unpermute(rows, probs, Tensor(), p);
  // TODO(lab06 unpermute): y [T, h], token t's row = Σ_j probs[t, j]·(the row of choice c = t·k + j), where
  // permuted row i is choice p.order[i] (probs is [T, k], row-major: probs.data()[c]). Every token's
  // result goes back to the token's own row, weighted by its router probability.
  // BEGIN SOLUTION
  const int64_t h = rows.size(1);
  Tensor y = Tensor::zeros({p.tokens, h});
  for (std::size_t i = 0; i < p.order.size(); ++i) {
    const int64_t c = p.order[i];
    const float w = probs.data()[c];
    float* yt = y.data() + c / p.topk * h;
    const float* row = rows.data() + static_cast<int64_t>(i) * h;
    for (int64_t j = 0; j < h; ++j) yt[j] += w * row[j];
  }
  return y;
  // END SOLUTION
}

Tensor unpermute_backward(const Tensor& dy, const Tensor& rows, const Tensor& probs, const DispatchPlan& p,
                          Tensor& dprobs) {
  check_unpermute(rows, probs, dy, p);
  // TODO(lab06 unpermute_backward): of y_t = Σ_j probs[t, j]·row(c = t·k + j): d_rows [T·k, h], permuted row
  // i = probs[c]·dy[token of c] with c = p.order[i]; dprobs [T, k] (assign it) at c = row(c)·dy[token of
  // c], a dot product over h (accumulate it in double).
  // BEGIN SOLUTION
  const int64_t h = rows.size(1);
  Tensor d_rows = Tensor::zeros({p.tokens * p.topk, h});
  dprobs = Tensor::zeros({p.tokens, p.topk});
  for (std::size_t i = 0; i < p.order.size(); ++i) {
    const int64_t c = p.order[i];
    const float w = probs.data()[c];
    const float* g = dy.data() + c / p.topk * h;
    const float* row = rows.data() + static_cast<int64_t>(i) * h;
    float* d = d_rows.data() + static_cast<int64_t>(i) * h;
    double dot = 0;
    for (int64_t j = 0; j < h; ++j) {
      d[j] = w * g[j];
      dot += static_cast<double>(row[j]) * g[j];
    }
    dprobs.data()[c] = static_cast<float>(dot);
  }
  return d_rows;
  // END SOLUTION
}

Tensor combine_rows_backward(const Tensor& d_rows, const DispatchPlan& p, ExpertParallelState& eps,
                             const std::string& label) {
  Tensor received;
  // TODO(lab06 combine_backward): the mirror of combine: d_rows [T·k, h] in permuted order -> the all_to_all
  // over eps.ep() that dispatch made (label + ".combine.grad"), then, when ETP > 1, all_gather_v over
  // eps.etp() with p.etp_rows (label + ".etp_reduce_scatter.grad": a reduce-scatter's backward is an
  // all-gather). `received` in received order; the line after the block sorts it by local expert.
  // BEGIN SOLUTION
  received = eps.ep().all_to_all(d_rows, p.output_splits, p.input_splits, {label + ".combine.grad"});
  if (eps.etp_size() > 1)
    received = all_gather_v(eps.etp(), received, p.etp_rows, {label + ".etp_reduce_scatter.grad"});
  // END SOLUTION
  check_rows(received, sum(p.chunks), "combine backward");
  return reorder_blocks(received, p.chunks, expert_major(p, eps.etp_size(), eps.ep_size()));
}

Tensor dispatch_backward(const Tensor& d_rows, const DispatchPlan& p, ExpertParallelState& eps,
                         const std::string& label) {
  const std::vector<int64_t> to_expert = expert_major(p, eps.etp_size(), eps.ep_size());
  TPSP_CHECK(d_rows.dim() == 2 && d_rows.size(0) == sum(p.chunks),
             "MoE dispatch backward: the experts' input "
             "gradient must have ",
             sum(p.chunks), " rows, got ", shape_str(d_rows.shape()));
  Tensor rows = reorder_blocks(d_rows, sizes_in(p.chunks, to_expert), inverse(to_expert));
  // TODO(lab06 dispatch_backward): the mirror of dispatch: `rows` (received order, ETP partial sums of the
  // experts' input gradient) -> when ETP > 1 reduce_scatter_v over eps.etp() with p.etp_rows (label +
  // ".etp_all_gather.grad"), then the all_to_all over eps.ep() that combine made (label +
  // ".dispatch.grad") -> permuted [T·k, h]; dx [T, h] = for each token the sum of its k choices' rows
  // (permuted row i belongs to token p.order[i] / k).
  // BEGIN SOLUTION
  if (eps.etp_size() > 1)
    rows = reduce_scatter_v(eps.etp(), rows, p.etp_rows, {label + ".etp_all_gather.grad"});
  const Tensor permuted =
      eps.ep().all_to_all(rows, p.input_splits, p.output_splits, {label + ".dispatch.grad"});
  const int64_t h = permuted.size(1);
  Tensor dx = Tensor::zeros({p.tokens, h});  // each token's k choices summed
  for (std::size_t i = 0; i < p.order.size(); ++i) {
    float* d = dx.data() + p.order[i] / p.topk * h;
    const float* row = permuted.data() + static_cast<int64_t>(i) * h;
    for (int64_t j = 0; j < h; ++j) d[j] += row[j];
  }
  return dx;
  // END SOLUTION
}

}  // namespace tpsp::moe
