// Known cases L1–L3 (docs/known_cases.md): ColumnParallelLinear and RowParallelLinear of
// engine/tensor_parallel/layers.h against dense closed forms computed in double in the test.
//
// Tolerance for L2/L3 (float32, u = 2^-24 ≈ 6e-8): every compared value is a dot product of
// k ≤ 12 terms of O(1) data (|x|, |w|, |L| < 1), whose float32 error is at most k·u·Σ|terms| ≤
// 12 · 6e-8 · 12 ≈ 9e-6; the oracle is double. So |Δ| ≤ 1e-5 + 1e-5·|want| (a wrong slice or a
// missing reduction is off by O(1)); measured ≤ 2% of it (TPSP_CASES_REPORT=1). L1 is exact (sums
// of ones), compared with ==.
#include "engine/tensor_parallel/layers.h"
#include "engine/tensor_parallel/mappings.h"
#include "tests/cases/cases_util.h"

using namespace tpsp;
using namespace tpsp::cases;
using namespace tpsp::tensor_parallel;
using comm::OpKind;

namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-5;

/// Dense oracle for Y = X·Wᵀ + b with loss Σ(Y ⊙ L) on rows [n, in]: Y, dW = Lᵀ X, db = 1ᵀ L, dX = L W.
struct Dense {
  Tensor y, dw, db, dx;
};
Dense dense(const Tensor& X, const Tensor& W, const Tensor& b, const Tensor& L) {
  const int64_t in = W.size(1), out = W.size(0), n = X.numel() / in;
  Dense d{Tensor({n, out}), Tensor({out, in}), Tensor({out}), Tensor({n, in})};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b.at(o);
      for (int64_t k = 0; k < in; ++k) acc += double(X.at(i * in + k)) * W.at(o * in + k);
      d.y.at(i * out + o) = float(acc);
    }
  for (int64_t o = 0; o < out; ++o) {
    double sb = 0;
    for (int64_t i = 0; i < n; ++i) sb += L.at(i * out + o);
    d.db.at(o) = float(sb);
    for (int64_t k = 0; k < in; ++k) {
      double acc = 0;
      for (int64_t i = 0; i < n; ++i) acc += double(L.at(i * out + o)) * X.at(i * in + k);
      d.dw.at(o * in + k) = float(acc);
    }
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < in; ++k) {
      double acc = 0;
      for (int64_t o = 0; o < out; ++o) acc += double(L.at(i * out + o)) * W.at(o * in + k);
      d.dx.at(i * in + k) = float(acc);
    }
  return d;
}

void close(const Tensor& got, const Tensor& want, const std::string& what) {
  expect_near(got, want, kRtol, kAtol, what);
}

}  // namespace

TEST_CASE("case L1: frozen column-parallel weight still all-reduces dgrad at tp=8") {
  run_case(8, [](int) {
    ParallelState ps(comm::init_from_env(), 8);
    comm::ProcessGroup& tp = ps.tp();
    Tensor X({8, 8});
    for (int64_t i = 0; i < 8; ++i) X.at({i, i}) = 1.f;
    // W = ones [8/tp, 8] with no weight-gradient buffer (frozen), bias zeros, output all-gathered.
    Tensor db({1});
    ColumnParallelLinear lin(Tensor::full({1, 8}, 1.f), Tensor({1}), Tensor(), db, {.gather_output = true},
                             "l1");
    LinearSaved saved;
    const Tensor y = lin.forward(X, saved, tp);
    expect_equal(y, Tensor::full({8, 8}, 1.f), "output");
    const std::size_t before = tp.recorder().size();
    const Tensor dx = lin.backward(Tensor::full({8, 8}, 1.f), saved, tp);  // loss = sum
    expect_equal(dx, Tensor::full({8, 8}, 8.f), "X.grad");
    expect_equal(db, Tensor::full({1}, 8.f), "bias grad (8 rows of ones)");
    const auto ar = records_since(tp, before, OpKind::all_reduce);
    expect(ar.size() == 1 && ar[0].group_size == 8, "the dgrad all-reduce of the frozen layer is missing");
  });
}

TEST_CASE("case L1: frozen weights under SP and row-parallel still return the full dgrad at tp=8") {
  run_case(8, [](int) {
    ParallelState ps(comm::init_from_env(), 8);
    comm::ProcessGroup& tp = ps.tp();
    const int r = tp.rank();
    // Column-parallel under SP: X = I as [s=8, b=1, 8], this rank's token row; dX is reduce-scattered.
    Tensor x({1, 1, 8});
    x.at(r) = 1.f;
    ColumnParallelLinear col(Tensor::full({1, 8}, 1.f), Tensor(), Tensor(), Tensor(),
                             {.gather_output = true, .sequence_parallel = true}, "l1.sp");
    LinearSaved s1;
    expect_equal(col.forward(x, s1, tp), Tensor::full({8, 1, 8}, 1.f), "SP output");
    expect_equal(col.backward(Tensor::full({8, 1, 8}, 1.f), s1, tp), Tensor::full({1, 1, 8}, 8.f),
                 "SP X.grad");
    // Row-parallel, frozen, input not parallel: W = ones [8, 8/tp]; dX = ones·W = 8 everywhere.
    Tensor X({8, 8});
    for (int64_t i = 0; i < 8; ++i) X.at({i, i}) = 1.f;
    RowParallelLinear row(Tensor::full({8, 1}, 1.f), Tensor(), Tensor(), Tensor(),
                          {.input_is_parallel = false}, "l1.row");
    LinearSaved s2;
    expect_equal(row.forward(X, s2, tp), Tensor::full({8, 8}, 1.f), "row output");
    expect_equal(row.backward(Tensor::full({8, 8}, 1.f), s2, tp), Tensor::full({8, 8}, 8.f), "row X.grad");
  });
}

TEST_CASE("case L2: row-parallel under SP, dX compared on every rank at tp=4") {
  run_case(4, [](int) {
    ParallelState ps(comm::init_from_env(), 4);
    comm::ProcessGroup& tp = ps.tp();
    const int r = tp.rank();
    const int64_t s = 8, b = 2, in = 12, out = 5, il = in / 4, sl = s / 4;
    const Tensor X = pattern({s, b, in}, 1), W = pattern({out, in}, 2), bias = pattern({out}, 3),
                 L = pattern({s, b, out}, 4);
    const Dense d = dense(X, W, bias, L);
    Tensor dw({out, il}), dbias({out});
    RowParallelLinear row(W.narrow_copy(1, r * il, il), bias, dw, dbias, {.sequence_parallel = true},
                          "l2.row");
    LinearSaved saved;
    const Tensor y = row.forward(X.narrow_copy(2, r * il, il), saved, tp);
    close(y, d.y.reshape({s, b, out}).slice0(r * sl, (r + 1) * sl), "Y (this rank's tokens)");
    const Tensor dx = row.backward(L.slice0(r * sl, (r + 1) * sl).clone(), saved, tp);
    // dX = (all-gathered dY)·W_r: the full sequence, this rank's input features — different on every rank.
    close(dx, d.dx.reshape({s, b, in}).narrow_copy(2, r * il, il), "dX on TP rank " + std::to_string(r));
    close(dw, d.dw.narrow_copy(1, r * il, il), "dW on TP rank " + std::to_string(r));
    // The bias gradient covers this rank's tokens only (summed over TP by the model, case S1).
    const Tensor db_local =
        dense(X.slice0(r * sl, (r + 1) * sl).clone(), W, bias, L.slice0(r * sl, (r + 1) * sl).clone()).db;
    close(dbias, db_local, "db (this rank's tokens)");

    // The column-parallel half of the SP pair: dX is reduce-scattered, a token shard per rank.
    const int64_t ol = 4, out_c = 16;
    const Tensor Wc = pattern({out_c, in}, 5), bc = pattern({out_c}, 6), Lc = pattern({s, b, out_c}, 7);
    const Dense dc = dense(X, Wc, bc, Lc);
    Tensor dwc({ol, in}), dbc({ol});
    ColumnParallelLinear col(Wc.slice0(r * ol, (r + 1) * ol).clone(), bc.slice0(r * ol, (r + 1) * ol).clone(),
                             dwc, dbc, {.sequence_parallel = true}, "l2.col");
    LinearSaved sc;
    const Tensor yc = col.forward(X.slice0(r * sl, (r + 1) * sl).clone(), sc, tp);
    close(yc, dc.y.reshape({s, b, out_c}).narrow_copy(2, r * ol, ol), "column Y");
    const Tensor dxc = col.backward(Lc.narrow_copy(2, r * ol, ol), sc, tp);
    close(dxc, dc.dx.reshape({s, b, in}).slice0(r * sl, (r + 1) * sl),
          "column dX on TP rank " + std::to_string(r));
    close(dwc, dc.dw.slice0(r * ol, (r + 1) * ol), "column dW");
    close(dbc, dc.db.slice0(r * ol, (r + 1) * ol), "column db");
  });
}

TEST_CASE("case L3: closed forms of column- and row-parallel linear, tp=3, in=6, out=9, n=5") {
  run_case(3, [](int) {
    ParallelState ps(comm::init_from_env(), 3);
    comm::ProcessGroup& tp = ps.tp();
    const int r = tp.rank();
    const int64_t n = 5, in = 6, out = 9, ol = out / 3, il = in / 3;
    const Tensor X = pattern({n, in}, 11), W = pattern({out, in}, 12), bias = pattern({out}, 13),
                 L = pattern({n, out}, 14);
    const Dense d = dense(X, W, bias, L);
    const std::string at = " on TP rank " + std::to_string(r);

    // Column-parallel: W split on dim 0 (output features), bias split, dX all-reduced (full).
    Tensor dwc({ol, in}), dbc({ol});
    ColumnParallelLinear col(W.slice0(r * ol, (r + 1) * ol).clone(),
                             bias.slice0(r * ol, (r + 1) * ol).clone(), dwc, dbc, {}, "l3.col");
    LinearSaved sc;
    close(col.forward(X, sc, tp), d.y.narrow_copy(1, r * ol, ol), "column Y" + at);
    const Tensor dxc = col.backward(L.narrow_copy(1, r * ol, ol), sc, tp);
    close(dwc, d.dw.slice0(r * ol, (r + 1) * ol), "column dW = Lᵀ X" + at);
    close(dbc, d.db.slice0(r * ol, (r + 1) * ol), "column db = 1ᵀ L" + at);
    close(dxc, d.dx, "column dX = L W" + at);

    // Row-parallel: W split on dim 1 (input features), full bias, dX a slice of the input features.
    Tensor dwr({out, il}), dbr({out});
    RowParallelLinear row(W.narrow_copy(1, r * il, il), bias, dwr, dbr, {}, "l3.row");
    LinearSaved sr;
    close(row.forward(X.narrow_copy(1, r * il, il), sr, tp), d.y, "row Y" + at);
    const Tensor dxr = row.backward(L, sr, tp);
    close(dwr, d.dw.narrow_copy(1, r * il, il), "row dW = Lᵀ X" + at);
    close(dbr, d.db, "row db = 1ᵀ L (full)" + at);
    close(dxr, d.dx.narrow_copy(1, r * il, il), "row dX = L W" + at);

    // Row-parallel with input_is_parallel = false: the full X comes in, dX goes out full (gathered).
    Tensor dwf({out, il}), dbf({out});
    RowParallelLinear rowf(W.narrow_copy(1, r * il, il), bias, dwf, dbf, {.input_is_parallel = false},
                           "l3.rowf");
    LinearSaved sf;
    close(rowf.forward(X, sf, tp), d.y, "row (full input) Y" + at);
    close(rowf.backward(L, sf, tp), d.dx, "row (full input) dX" + at);
  });
}
