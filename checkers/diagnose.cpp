#include "checkers/diagnose.h"

#include <cmath>

#include "checkers/scenario.h"
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

/// sum − want is the same vector in every row of the last dim (a bias added once per rank).
bool rows_differ_by_one_vector(const Tensor& sum, const Tensor& want, double rtol, double atol) {
  const int64_t h = want.size(-1), rows = want.numel() / h;
  for (int64_t r = 1; r < rows; ++r)
    for (int64_t j = 0; j < h; ++j) {
      const double d0 = double(sum.at(j)) - want.at(j), d = double(sum.at(r * h + j)) - want.at(r * h + j);
      if (std::fabs(d - d0) > 2 * atol + rtol * std::fabs(want.at(r * h + j))) return false;
    }
  return true;
}

}  // namespace

std::string diagnose(const Tensor& got, const Tensor& want, const Tensor& whole,
                     const std::vector<Tensor>& all_got, int rank, int split_dim, double rtol, double atol) {
  const int n = static_cast<int>(all_got.size());
  if (got.shape() != want.shape()) {
    if (got.shape() == whole.shape() && split_dim >= 0)
      return "this rank returned the whole tensor " + shape_str(got.shape()) +
             " where it should hold only its shard " + shape_str(want.shape()) + " (chunk " +
             std::to_string(rank) + " of dim " + std::to_string(split_dim) + ")";
    if (split_dim == kReplicated && got.dim() >= 1 && want.dim() >= 1 && got.size(0) * n == want.size(0))
      return "this rank holds " + shape_str(got.shape()) +
             ", 1/tp of the rows: the gather along the sequence is missing";
    return "shape " + shape_str(got.shape()) + " where " + shape_str(want.shape()) + " is expected";
  }
  if (all_zero(got) && !all_zero(want))
    return "all zeros: the result never reached the returned tensor (a stale or unwritten buffer?)";
  if (n > 1 && all_close(got, scaled(want, static_cast<float>(n)), rtol, atol))
    return "×tp: every value is tp=" + std::to_string(n) +
           " times too large — the same sum was taken twice (an all-reduce in both directions, or in both f "
           "and g)";
  if (n > 1 && all_close(got, scaled(want, 1.f / static_cast<float>(n)), rtol, atol))
    return "÷tp: every value is tp=" + std::to_string(n) +
           " times too small — averaged where it must be summed";
  if (n > 1 && split_dim == kReplicated) {
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
             "them is missing (g in forward, or f in backward)";
    if (same_shapes && got.dim() >= 2 && rows_differ_by_one_vector(sum, want, rtol, atol))
      return "one rank's partial sum: the ranks' results add up to the answer plus a bias counted on every "
             "rank, so the all-reduce that sums them is missing (g in forward, or f in backward)";
    if (own_rows_only(got, want, rank, n, rtol, atol))
      return "only this rank's own rows are filled and the rest is zero: the gradient of a replicated input "
             "must "
             "be all-gathered, not zero-padded";
  }
  if (n > 1 && split_dim >= 0) {
    for (int k = 0; k < n; ++k)
      if (k != rank && all_close(got, chunk(whole, split_dim, k, n), rtol, atol))
        return "rank " + std::to_string(rank) + " holds chunk " + std::to_string(k) + " of dim " +
               std::to_string(split_dim) + ": shards in the wrong order (rank r must hold chunk r)";
  }
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
