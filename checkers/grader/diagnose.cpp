#include "checkers/grader/diagnose.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "checkers/inputs.h"
#include "engine/ops/elementwise.h"

namespace tpsp::checkers {

bool all_close(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = std::fabs(double(a.at(i)) - b.at(i));
    if (!(d <= atol + rtol * std::fabs(b.at(i)))) return false;
  }
  return true;
}

namespace {

Tensor scaled(const Tensor& t, float s) {
  Tensor c = t.clone();
  ops::scale_(c, s);
  return c;
}

bool all_zero(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.at(i) != 0.f) return false;
  return true;
}

/// got equals want on dim-0 chunk `rank` of n and is zero elsewhere.
bool own_rows_only(const Tensor& got, const Tensor& want, int rank, int n, double rtol, double atol) {
  if (got.shape() != want.shape() || got.dim() == 0 || got.size(0) % n != 0 || n == 1) return false;
  for (int k = 0; k < n; ++k) {
    const Tensor g = chunk(got, 0, k, n), w = chunk(want, 0, k, n);
    if (k == rank ? !all_close(g, w, rtol, atol) : !all_zero(g)) return false;
  }
  return true;
}

/// Elements of t that are NaN or ±inf.
int64_t count_non_finite(const Tensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) n += !std::isfinite(t.at(i));
  return n;
}

/// sum − want is the same vector in every row of the last dim (a bias added once per rank).
bool rows_differ_by_one_vector(const Tensor& sum, const Tensor& want, double rtol, double atol) {
  const int64_t h = want.size(-1), rows = want.numel() / h;
  if (rows < 2) return false;  // one row always differs from itself by one vector
  for (int64_t r = 1; r < rows; ++r)
    for (int64_t j = 0; j < h; ++j) {
      const double d0 = double(sum.at(j)) - want.at(j), d = double(sum.at(r * h + j)) - want.at(r * h + j);
      if (std::fabs(d - d0) > 2 * atol + rtol * std::fabs(want.at(r * h + j))) return false;
    }
  return true;
}

/// The c minimising |got − c·want|² when want has at least 4 non-zero values, else 0.
double fitted_scale(const Tensor& got, const Tensor& want) {
  double gw = 0, ww = 0;
  int64_t nonzero = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    gw += double(got.at(i)) * want.at(i), ww += double(want.at(i)) * want.at(i);
    nonzero += want.at(i) != 0.f;
  }
  return nonzero >= 4 && ww > 0 ? gw / ww : 0.0;
}

/// Every rank's tensor equals rank 0's.
bool same_on_every_rank(const std::vector<Tensor>& all_got, double rtol, double atol) {
  for (std::size_t k = 1; k < all_got.size(); ++k)
    if (!all_close(all_got[k], all_got[0], rtol, atol)) return false;
  return true;
}

/// For a whole tensor assembled from n equal pieces along dim 0 or the last dim: when every piece
/// of got is one of want's pieces but some sit in the wrong place, "chunk 0 holds chunk 1, ..." and
/// the dim; otherwise "".
/// A 1-D count of token positions (RoPE's): one restarting at 0 every s/tp entries (each rank numbered its
/// own shard's rows), or one running 0 … s−1 where the answer restarts (packed documents ignored).
std::string positions_signature(const Tensor& got, const Tensor& want, int n) {
  const int64_t len = got.numel();
  if (got.dim() != 1 || len < 2) return "";
  const auto ramp = [&](int64_t period) {
    for (int64_t i = 0; i < len; ++i)
      if (got.at(i) != static_cast<float>(i % period)) return false;
    return true;
  };
  if (n > 1 && len % n == 0 && ramp(len / n))
    return fmt::format(
        "positions restart at 0 every s/tp = {} tokens: each rank numbered its own shard's rows, but q and k "
        "are "
        "rotated after the sequence was gathered, so the positions run over the whole sequence (Megatron's "
        "get_rotary_seq_len multiplies the local length by tp under SP)",
        len / n);
  if (ramp(len) && want.at(len - 1) != static_cast<float>(len - 1))
    return "positions run 0 … s−1 across the packed documents: they must restart at 0 where each document "
           "starts (cu_seqlens)";
  return "";
}

std::string misplaced_pieces(const Tensor& got, const Tensor& want, int n, double rtol, double atol) {
  if (got.dim() == 0) return "";
  for (const int d : {0, static_cast<int>(got.dim()) - 1}) {
    if (got.size(d) % n != 0) continue;
    std::string moves;
    bool every_piece_found = true;
    for (int k = 0; k < n && every_piece_found; ++k) {
      const Tensor g = chunk(got, d, k, n);
      if (all_close(g, chunk(want, d, k, n), rtol, atol)) continue;
      int from = -1;
      for (int j = 0; j < n && from < 0; ++j)
        if (j != k && all_close(g, chunk(want, d, j, n), rtol, atol)) from = j;
      if (from < 0) every_piece_found = false;
      moves += (moves.empty() ? "" : ", ") + std::string("chunk ") + std::to_string(k) + " holds chunk " +
               std::to_string(from);
    }
    if (every_piece_found && !moves.empty())
      return "the " + std::to_string(n) + " pieces along dim " + std::to_string(d) +
             " are right but in the wrong places (" + moves +
             "): assemble them in rank order, rank k's piece at chunk k";
    if (got.dim() == 1) break;
  }
  return "";
}

/// A shard whose values are the whole tensor's, cut at the wrong place: the same piece on every rank
/// (no per-rank offset), another rank's piece (order, or the wrong rank → group map), or for a strided
/// placement one contiguous chunk of the fused dim (rank r must hold its chunk of every block); "" else.
std::string wrong_shard(const Tensor& got, const Tensor& whole, const std::vector<Tensor>& all_got, int rank,
                        const Diagnosis& dg) {
  const Placement& p = dg.placement;
  const int n = static_cast<int>(all_got.size());
  const auto close = [&](const Tensor& t) { return all_close(got, t, dg.rtol, dg.atol); };
  // "chunk 1 of dim 0" for a plain shard, the ranges otherwise ("rows [2, 4) and [10, 12) of dim 0").
  const auto piece = [&](int k) {
    return p.stride == 1 && p.groups == 0 ? fmt::format("chunk {} of dim {}", k, p.dim)
                                          : shard_range_str(p, whole.shape(), k, n);
  };
  if (p.stride > 1)
    for (int k = 0; k < n; ++k)
      if (const Placement plain = Placement::Shard(p.dim); close(shard_of(whole, plain, k, n))) {
        const int64_t block = whole.size(p.dim) / p.stride,
                      start = shard_ranges(plain, whole.shape(), k, n)[0].first;
        const int64_t stop = start + got.size(p.dim);
        const std::string blocks =
            (stop - 1) / block == start / block
                ? fmt::format("all inside block {} of {}", start / block, p.stride)
                : fmt::format("blocks {}-{} of {}", start / block, (stop - 1) / block, p.stride);
        const std::string swiglu = p.stride != 2 ? ""
                                   : (stop - 1) / block != start / block
                                       ? " (for SwiGLU's fused [gate; up]: gate and up mixed)"
                                   : start < block ? " (for SwiGLU's fused [gate; up]: gate only)"
                                                   : " (for SwiGLU's fused [gate; up]: up only)";
        return fmt::format(
            "rank {} holds {}: one contiguous chunk of the fused dim, {}{}; with stride {} the dim is {} "
            "blocks "
            "and rank r holds chunk r of each — rank {} must hold {}",
            rank, shard_range_str(plain, whole.shape(), k, n), blocks, swiglu, p.stride, p.stride, rank,
            piece(rank));
      }
  if (p.stride > 1 && got.size(p.dim) % p.stride == 0) {
    // The rank's chunks of the blocks, stacked in another order ([up_r; gate_r]).
    const Tensor want = shard_of(whole, p, rank, n);
    const int64_t part = got.size(p.dim) / p.stride;
    std::vector<int64_t> from;
    for (int64_t i = 0; i < p.stride; ++i)
      for (int64_t j = 0; j < p.stride; ++j)
        if (all_close(got.narrow_copy(p.dim, i * part, part), want.narrow_copy(p.dim, j * part, part),
                      dg.rtol, dg.atol)) {
          from.push_back(j);
          break;
        }
    if (static_cast<int64_t>(from.size()) == p.stride)
      return fmt::format(
          "rank {} holds the right chunks of the {} blocks of the fused dim, stacked in the wrong order (its "
          "pieces are the chunks of blocks {} in that order){}",
          rank, p.stride, fmt::join(from, ", "),
          p.stride == 2 ? ": for SwiGLU's fused [gate; up] the local output must split into [gate_r | up_r]"
                        : "");
  }
  if (p.shards(n) > 1 && same_on_every_rank(all_got, dg.rtol, dg.atol)) {
    std::string which;
    for (int k = 0; k < n && which.empty(); ++k)
      if (close(shard_of(whole, p, k, n))) which = " (" + piece(k) + ")";
    return fmt::format(
        "every rank holds the same shard{}: nothing in it depends on the rank, but rank {} must "
        "hold {} — a per-rank offset is missing",
        which, rank, piece(rank));
  }
  for (int k = 0; k < n; ++k) {
    if (p.shard_index(k, n) == p.shard_index(rank, n) || !close(shard_of(whole, p, k, n))) continue;
    const int per = p.groups > 0 ? n / p.groups : 1, g = p.shard_index(k, n);
    if (per == 1)
      return fmt::format("rank {} holds {}: shards in the wrong order (rank r must hold chunk r{})", rank,
                         piece(k), p.stride > 1 ? " of each block" : "");
    return fmt::format(
        "rank {} holds group {}'s chunk ({}) but is in group {} = r / (tp / groups) = {} / {}: the {} ranks "
        "of a group are consecutive{} — {}",
        rank, g, piece(k), rank / per, rank, per, per,
        g == rank % p.groups ? fmt::format(" (group {} = r % groups maps rank {} the wrong way)", g, rank)
                             : "",
        fmt::format("rank {} must hold {}", rank, piece(rank)));
  }
  return "";
}

}  // namespace

std::string diagnose(const Tensor& got, const Tensor& want, const Tensor& whole,
                     const std::vector<Tensor>& all_got, int rank, const Diagnosis& dg) {
  const int n = static_cast<int>(all_got.size());
  const double rtol = dg.rtol, atol = dg.atol;
  if (got.shape() != want.shape()) {
    if (got.shape() == whole.shape() && dg.placement.is_shard())
      return "this rank returned the whole tensor " + shape_str(got.shape()) +
             " where it should hold only its shard " + shape_str(want.shape()) + " (" +
             shard_range_str(dg.placement, whole.shape(), rank, n) + ")";
    if (dg.placement.is_replicate() && got.dim() >= 1 && got.dim() == want.dim()) {
      Shape rows = got.shape(), last = got.shape();
      rows[0] *= n, last.back() *= n;
      if (rows == want.shape())
        return "this rank holds " + shape_str(got.shape()) +
               ", 1/tp of the rows: the gather along the sequence is missing";
      if (last == want.shape())
        return "this rank holds " + shape_str(got.shape()) +
               ", 1/tp of the last dim: the all-gather along the last dim (e.g. scatter's backward) is "
               "missing";
    }
    return "shape " + shape_str(got.shape()) + " where " + shape_str(want.shape()) + " is expected";
  }
  if (all_zero(got) && !all_zero(want))
    return "all zeros: the result never reached the returned tensor (a stale or unwritten buffer?)";
  if (const int64_t nan = count_non_finite(got); nan > 0 && count_non_finite(want) == 0)
    return fmt::format(
        "{} of {} values are NaN or inf: ./check fills every fresh output with NaN until it is written, and "
        "an async call's output or receive buffer until the call completes, so a buffer read too early — "
        "e.g. an async collective's output or a recv_async buffer read before its wait() — shows as NaN "
        "(or the computation overflowed)",
        nan, got.numel());
  if (std::string positions = positions_signature(got, want, n); !positions.empty()) return positions;
  if (dg.passes > 1 && all_close(got, scaled(want, 1.f / static_cast<float>(dg.passes)), rtol, atol)) {
    const std::string assigned = fmt::format(
        "the result of ONE backward pass where {} ran: a gradient must be accumulated (+=) into its buffer, "
        "not "
        "assigned — the last pass overwrote the earlier ones",
        dg.passes);
    if (n == dg.passes)  // at tp = passes the two signatures give the same factor: name both
      return fmt::format(
          "values are 1/{} of the expected ones: either {}, or ÷tp (tp={}): averaged over the TP group where "
          "it "
          "must be summed (at another tp the two differ: run --tp 3)",
          dg.passes, assigned, n);
    return fmt::format("values are 1/{} of the expected ones, {}", dg.passes, assigned);
  }
  if (n > 1 && all_close(got, scaled(want, static_cast<float>(n)), rtol, atol))
    return "×tp: every value is tp=" + std::to_string(n) +
           " times too large — the same sum was taken twice (an all-reduce in both directions, in both f and "
           "g, "
           "or a reduction of values that were already whole)";
  if (n > 1 && all_close(got, scaled(want, 1.f / static_cast<float>(n)), rtol, atol))
    return "÷tp: every value is tp=" + std::to_string(n) +
           " times too small — averaged where it must be summed";
  if (const double c = fitted_scale(got, want);
      c != 0.0 && std::fabs(c - 1.0) > 1e-3 &&
      all_close(got, scaled(want, static_cast<float>(c)), rtol, atol))
    return fmt::format(
        "scaled: every value is {:.4g} times the expected one — one factor is wrong (a mean over the wrong "
        "count, or a scale applied twice or never)",
        c);
  if (got.dim() >= 2 && !all_close(got, want, rtol, atol) && rows_differ_by_one_vector(got, want, rtol, atol))
    return "every row is off by the same vector: a bias counted the wrong number of times (a row-parallel "
           "bias "
           "added to each rank's partial sum before the reduction is counted tp times, an error of (tp−1)·b; "
           "a "
           "bias added although skip_bias_add is set, or never added, is off by b)";
  if (n > 1 && dg.placement.is_replicate()) {
    // Before the partial sum: zero-padded own rows also add up to the answer, and say more.
    if (own_rows_only(got, want, rank, n, rtol, atol))
      return "only this rank's own rows are filled and the rest is zero: the gradient of a replicated input "
             "must be all-gathered, not zero-padded";
    Tensor sum(got.shape());
    bool same_shapes = true;
    for (const Tensor& g : all_got) {
      if (g.shape() != got.shape()) {
        same_shapes = false;
        break;
      }
      ops::add_(sum, g);
    }
    if (same_shapes && all_close(sum, want, rtol, atol))
      return "one rank's partial sum: the ranks' results add up to the answer, so the all-reduce that sums "
             "them is missing (g in forward, f in backward, or the TP sum of a gradient each rank holds only "
             "its share of)";
    if (same_shapes && got.dim() >= 2 && rows_differ_by_one_vector(sum, want, rtol, atol))
      return "one rank's partial sum: the ranks' results add up to the answer plus a bias counted on every "
             "rank, so the all-reduce that sums them is missing (g in forward, or f in backward)";
    if (std::string moved = misplaced_pieces(got, want, n, rtol, atol); !moved.empty()) return moved;
  }
  if (n > 1 && dg.placement.is_shard())
    if (std::string wrong = wrong_shard(got, whole, all_got, rank, dg); !wrong.empty()) return wrong;
  if (got.dim() >= 2) {
    const int64_t a = got.size(-2), b = got.size(-1);
    if (a != b || a > 1) {
      const int64_t outer = got.numel() / (a * b);
      bool transposed = a * b > 1;
      for (int64_t o = 0; o < outer && transposed; ++o)
        for (int64_t i = 0; i < a && transposed; ++i)
          for (int64_t j = 0; j < b && transposed; ++j) {
            const int64_t gi = o * a * b + i * b + j;
            // got read as [b, a] transposed: element (j, i) of a [b, a] matrix.
            const int64_t wi = o * a * b + j * a + i;
            const double w = want.at(wi), d = std::fabs(double(got.at(gi)) - w);
            transposed = d <= atol + rtol * std::fabs(w);
          }
      if (transposed) return "transposed: the values are right but the last two dims are swapped";
    }
  }
  return "";
}

}  // namespace tpsp::checkers
