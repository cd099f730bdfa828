// Shared pieces of the known-case tests (docs/known_cases.md): run a case as forked ranks,
// count recorded collectives, exact and toleranced comparisons, error checks, and cross-rank
// identity checks. Assertions inside a rank throw (doctest macros do not work in forked ranks);
// run_case turns the ranks' failures into one doctest CHECK in the parent.
//
// Tolerances are float32 (unit roundoff u = 2^-24 ≈ 6e-8, docs/tolerances.md): each test states
// the one it uses and why. Values that are exact in float32 (small integer sums, copies, identical
// collectives on every rank) are compared with ==.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/comm/env.h"
#include "engine/comm/process_group.h"
#include "engine/error.h"
#include "engine/parallel_state.h"
#include "engine/tensor.h"
#include "tests/support/ranks.h"
#include "tests/tp/tp_util.h"

namespace tpsp::cases {

using testing::expect;
using testing::expect_close;

/// Runs fn as `world` forked ranks with a deadline and CHECKs that every rank succeeded.
inline void run_case(int world, const std::function<void(int rank)>& fn, double timeout_s = 45) {
  const auto results = testing::run_ranks(world, fn, timeout_s);
  const std::string f = testing::failures(results);
  CHECK_MESSAGE(f.empty(), f);
}

/// Records appended since index `from` that match op (and group, when not empty).
inline std::vector<trace::CommRecord> records_since(comm::ProcessGroup& pg, std::size_t from,
                                                    std::optional<comm::OpKind> op = std::nullopt,
                                                    const std::string& group = "") {
  const auto all = pg.recorder().records();
  std::vector<trace::CommRecord> out;
  for (std::size_t i = from; i < all.size(); ++i)
    if ((!op || all[i].op == *op) && (group.empty() || all[i].group == group)) out.push_back(all[i]);
  return out;
}

inline std::string str(double v) {
  std::string s = std::to_string(v);
  return s;
}

/// got must equal want exactly (values exact in float32).
inline void expect_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  expect(got.shape() == want.shape(),
         what + ": shape " + shape_str(got.shape()) + " != " + shape_str(want.shape()));
  for (int64_t i = 0; i < got.numel(); ++i)
    expect(got.at(i) == want.at(i), what + ": element " + std::to_string(i) + " is " + str(got.at(i)) +
                                        ", want exactly " + str(want.at(i)));
}

/// expect_close (|got − want| ≤ atol + rtol·|want| element-wise), and with TPSP_CASES_REPORT set in
/// the environment one line "[cases] <what> max|d| … tol used …%" on stderr, to measure margins.
inline void expect_near(const Tensor& got, const Tensor& want, double rtol, double atol,
                        const std::string& what) {
  if (std::getenv("TPSP_CASES_REPORT") && got.shape() == want.shape()) {
    double maxd = 0, used = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double d = std::fabs(double(got.at(i)) - want.at(i));
      maxd = std::max(maxd, d);
      used = std::max(used, d / (atol + rtol * std::fabs(double(want.at(i)))));
    }
    std::fprintf(stderr, "[cases] %s max|d| %.3g tol used %.1f%%\n", what.c_str(), maxd, 100 * used);
  }
  expect_close(got, want, rtol, atol, what);
}

/// |got − want| ≤ atol_rel·max|want| + rtol·|want| element-wise: a tolerance relative to the
/// tensor's scale, for gradients whose magnitudes vary by orders (docs/tolerances.md).
inline void expect_close_rel(const Tensor& got, const Tensor& want, double rtol, double atol_rel,
                             const std::string& what) {
  double scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::fabs(double(want.at(i))));
  expect_near(got, want, rtol, atol_rel * scale, what);
}

/// Runs fn, which must throw E whose message contains every string in `needles`; returns the message.
template <typename E = ShapeError>
std::string expect_throws(const std::function<void()>& fn, const std::vector<std::string>& needles,
                          const std::string& what) {
  try {
    fn();
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const auto& n : needles)
      expect(msg.find(n) != std::string::npos, what + ": the error does not name '" + n + "': " + msg);
    return msg;
  }
  throw std::runtime_error(what + ": no error was raised");
}

/// Throws unless t is bitwise identical on every rank of pg (one all-gather of t's values).
inline void expect_identical_across(comm::ProcessGroup& pg, const Tensor& t, const std::string& what) {
  const Tensor all = pg.all_gather(t.clone().reshape({t.numel()}), 0, {"test.identical"});
  for (int r = 0; r < pg.size(); ++r)
    for (int64_t i = 0; i < t.numel(); ++i)
      expect(all.at(r * t.numel() + i) == t.at(i),
             what + ": element " + std::to_string(i) + " is " + str(t.at(i)) + " on group rank " +
                 std::to_string(pg.rank()) + " but " + str(all.at(r * t.numel() + i)) + " on group rank " +
                 std::to_string(r));
}

/// A deterministic pseudo-random tensor with values in [-1, 1) (a simple LCG keyed by salt).
inline Tensor pattern(const Shape& shape, uint64_t salt) {
  Tensor t(shape);
  uint64_t x = salt * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0; i < t.numel(); ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t.at(i) = static_cast<float>(static_cast<double>(x >> 40) / double(1ull << 23) - 1.0);
  }
  return t;
}

}  // namespace tpsp::cases
