// SwiGLU and rotary position embedding (engine/ops/swiglu.h, rope.h): closed forms, the backward against
// finite differences of a double re-implementation, the properties tensor parallelism relies on (a
// sequence shard rotated with its global positions equals the same rows of the whole sequence, bit for
// bit; positions that restart per packed sequence), bf16 rounded once, and each bad input's message.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "engine/error.h"
#include "engine/ops/rope.h"
#include "engine/ops/swiglu.h"
#include "tests/ops/helpers.h"

using namespace tpsp;

namespace {

/// silu(g)·u per row of [rows, 2f] in double.
std::vector<double> swiglu_d(const std::vector<double>& x, std::size_t f) {
  std::vector<double> y(x.size() / 2);
  for (std::size_t r = 0; r < y.size() / f; ++r)
    for (std::size_t j = 0; j < f; ++j) {
      const double g = x[r * 2 * f + j], u = x[r * 2 * f + f + j];
      y[r * f + j] = g / (1.0 + std::exp(-g)) * u;
    }
  return y;
}

/// The rotation of rope.h on [s, b, n·d] in double.
std::vector<double> rope_d(const std::vector<double>& x, const Shape& shape, const std::vector<int64_t>& pos,
                           int64_t d, double base) {
  std::vector<double> y(x.size());
  const int64_t b = shape[1], width = shape[2], half = d / 2;
  for (int64_t r = 0; r < shape[0]; ++r)
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t h = 0; h < width / d; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const double a =
              static_cast<double>(pos[static_cast<std::size_t>(r)]) * std::pow(base, -2.0 * i / d);
          const std::size_t k = static_cast<std::size_t>((r * b + bi) * width + h * d + i);
          y[k] = x[k] * std::cos(a) - x[k + half] * std::sin(a);
          y[k + half] = x[k + half] * std::cos(a) + x[k] * std::sin(a);
        }
  return y;
}

}  // namespace

TEST_CASE("swiglu closed forms: a zero gate, its derivative 1/2, and the [gate | up] halves") {
  // Row [gate | up] = [0, 2 | 3, 5]: σ(0) = 1/2 exactly, so y_0 = 0 and silu'(0) = 1/2.
  const Tensor x = Tensor::from({1, 4}, {0.f, 2.f, 3.f, 5.f});
  const Tensor y = ops::swiglu_forward(x);
  REQUIRE(y.shape() == Shape{1, 2});
  CHECK(y.at({0, 0}) == 0.f);
  CHECK(y.at({0, 1}) == doctest::Approx(2.0 / (1.0 + std::exp(-2.0)) * 5.0).epsilon(1e-6));
  const Tensor dx = ops::swiglu_backward(Tensor::from({1, 2}, {1.f, 1.f}), x);
  CHECK(dx.at({0, 0}) == 1.5f);  // dy·up·silu'(0) = 1·3·½
  CHECK(dx.at({0, 2}) == 0.f);   // dy·silu(0)
  // A mistake the halves catch: reading [up | gate] gives silu(3)·0 = 0 and silu(5)·2 for the outputs.
  CHECK(y.at({0, 1}) != doctest::Approx(5.0 / (1.0 + std::exp(-5.0)) * 2.0));
}

TEST_CASE("swiglu backward equals finite differences of a double silu(gate)·up") {
  const std::size_t f = 7;
  const Tensor x = test::rand_tensor({3, 2, 14}, 41, -6.f, 6.f), dy = test::rand_tensor({3, 2, 7}, 42);
  const Tensor dx = ops::swiglu_backward(dy, x);
  std::vector<double> xd = test::to_double(x);
  const auto loss = [&] { return test::dot(swiglu_d(xd, f), dy); };
  for (std::size_t i = 0; i < xd.size(); ++i) {
    CAPTURE(i);
    // |dx| ≤ 6·1.1·1 ≈ 7; float products with one expf: a few ulp of it, 5e-6 absolute covers them.
    CHECK(dx.data()[i] == doctest::Approx(test::central_difference(xd, i, loss)).epsilon(1e-5).scale(1.0));
  }
  const std::vector<double> yd = swiglu_d(test::to_double(x), f);
  const Tensor y = ops::swiglu_forward(x);
  for (std::size_t i = 0; i < yd.size(); ++i)
    CHECK(y.data()[i] == doctest::Approx(yd[i]).epsilon(4e-7).scale(1.0));
}

TEST_CASE("rope closed forms: position 0 is the identity, d = 2 rotates by the position itself") {
  const Tensor x = test::rand_tensor({2, 1, 4}, 43);
  // Position 0: cos 1, sin 0 exactly, so every element is itself.
  const Tensor y0 = ops::rope_forward(x.slice0(0, 1), {0}, 4);
  for (int64_t i = 0; i < 4; ++i) CHECK(y0.data()[i] == x.data()[i]);
  // d = 2: θ_0 = base^0 = 1, so the pair (x0, x1) turns by p radians; two heads turn alike.
  const Tensor pair = Tensor::from({1, 1, 4}, {1.f, 0.f, 0.f, 1.f});
  const Tensor y = ops::rope_forward(pair, {3}, 2, 123.f);
  CHECK(y.at(0) == static_cast<float>(std::cos(3.0)));
  CHECK(y.at(1) == static_cast<float>(std::sin(3.0)));
  CHECK(y.at(2) == -static_cast<float>(std::sin(3.0)));
  CHECK(y.at(3) == static_cast<float>(std::cos(3.0)));
}

TEST_CASE("rope under SP: a shard rotated at its global positions is those rows of the whole, bit for bit") {
  const int64_t s = 8, tp = 2, d = 6;
  const Tensor x = test::rand_tensor({s, 3, 2 * d}, 44, -3.f, 3.f);
  std::vector<int64_t> all(s);
  for (int64_t i = 0; i < s; ++i) all[static_cast<std::size_t>(i)] = i;
  const Tensor whole = ops::rope_forward(x, all, d);
  for (int64_t r = 0; r < tp; ++r) {
    CAPTURE(r);
    const int64_t s_local = s / tp;
    const std::vector<int64_t> global(all.begin() + r * s_local, all.begin() + (r + 1) * s_local);
    const std::vector<int64_t> local(all.begin(), all.begin() + s_local);  // the mistake: 0.. on every rank
    const Tensor shard = x.slice0(r * s_local, (r + 1) * s_local);
    const Tensor want = whole.slice0(r * s_local, (r + 1) * s_local);  // a view: dim-0 slices are contiguous
    const Tensor got = ops::rope_forward(shard, global, d);
    int64_t differ = 0;
    for (int64_t i = 0; i < got.numel(); ++i) differ += got.data()[i] != want.data()[i];
    CHECK(differ == 0);
    const Tensor wrong = ops::rope_forward(shard, local, d);
    int64_t same = 0;
    for (int64_t i = 0; i < got.numel(); ++i) same += wrong.data()[i] == want.data()[i];
    CHECK((r == 0) == (same == got.numel()));  // local positions are exact on rank 0 only
  }
}

TEST_CASE("rope forward is within a few roundings of double; backward undoes it and equals the transpose") {
  const Shape shape{5, 2, 16};
  const std::vector<int64_t> pos{0, 7, 1, 0, 2048};  // packed: restarts; one far position
  const Tensor x = test::rand_tensor(shape, 45, -4.f, 4.f);
  const Tensor y = ops::rope_forward(x, pos, 8, 10000.f);
  const std::vector<double> yd = rope_d(test::to_double(x), shape, pos, 8, 10000.0);
  for (std::size_t i = 0; i < yd.size(); ++i)
    CHECK(y.data()[i] == doctest::Approx(yd[i]).epsilon(2e-6).scale(4.0));
  // backward(forward(x)) = x up to the rounding of both (a rotation and its inverse): 4 ulp of |x| ≤ 4.
  const Tensor back = ops::rope_backward(y, pos, 8, 10000.f);
  for (int64_t i = 0; i < x.numel(); ++i)
    CHECK(back.data()[i] == doctest::Approx(x.data()[i]).epsilon(2e-6).scale(4.0));
  // ⟨dy, R x⟩ = ⟨Rᵀ dy, x⟩: the backward is the transpose of the forward.
  const Tensor dy = test::rand_tensor(shape, 46);
  const Tensor dx = ops::rope_backward(dy, pos, 8, 10000.f);
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    lhs += static_cast<double>(dy.data()[i]) * yd[static_cast<std::size_t>(i)];
    rhs += static_cast<double>(dx.data()[i]) * x.data()[i];
  }
  CHECK(lhs == doctest::Approx(rhs).epsilon(1e-5));
}

TEST_CASE("swiglu and rope on bf16: the f32 op on the widened inputs, rounded once") {
  const Tensor x = test::rand_tensor({3, 2, 8}, 47, -2.f, 2.f).to(DType::bf16);
  const Tensor y = ops::swiglu_forward(x);
  CHECK(y.dtype() == DType::bf16);
  const Tensor y32 = ops::swiglu_forward(x.to(DType::f32)).to(DType::bf16);
  const Tensor r = ops::rope_forward(x, {1, 2, 3}, 4);
  CHECK(r.dtype() == DType::bf16);
  const Tensor r32 = ops::rope_forward(x.to(DType::f32), {1, 2, 3}, 4).to(DType::bf16);
  for (int64_t i = 0; i < y.numel(); ++i) CHECK(y.value(i) == y32.value(i));
  for (int64_t i = 0; i < r.numel(); ++i) CHECK(r.value(i) == r32.value(i));
}

TEST_CASE("swiglu and rope reject bad shapes, head dims, positions and bases, naming the rule") {
  CHECK_THROWS_WITH_AS(ops::swiglu_forward(Tensor({2, 5})),
                       doctest::Contains("swiglu_forward: the last dim 5"), ShapeError);
  CHECK_THROWS_WITH_AS(ops::swiglu_backward(Tensor({2, 3}), Tensor({2, 8})),
                       doctest::Contains("swiglu_backward: dy: expected shape [2, 4] but got [2, 3]"),
                       ShapeError);
  const Tensor x({4, 1, 12});
  CHECK_THROWS_WITH_AS(ops::rope_forward(x, {0, 1, 2, 3}, 5),
                       doctest::Contains("d = 5 must be positive and even"), ShapeError);
  CHECK_THROWS_WITH_AS(
      ops::rope_forward(x, {0, 1, 2, 3}, 8),
      doctest::Contains(
          "rope_forward: the last dim 12 of x [4, 1, 12] is not a multiple of the head dim d = 8"),
      ShapeError);
  CHECK_THROWS_WITH_AS(ops::rope_forward(x, {0, 1, 2}, 6),
                       doctest::Contains("rope_forward: 3 positions for s = 4"), ShapeError);
  CHECK_THROWS_WITH_AS(ops::rope_backward(x, {0, 1, -2, 3}, 6),
                       doctest::Contains("rope_backward: position -2 of row 2 is negative"), ShapeError);
  CHECK_THROWS_WITH_AS(ops::rope_forward(x, {0, 1, 2, 3}, 6, 0.f), doctest::Contains("base = 0 must be"),
                       ShapeError);
  CHECK_THROWS_WITH_AS(ops::rope_forward(Tensor({4, 12}), {0, 1, 2, 3}, 6),
                       doctest::Contains("rope_forward: x must be [s, b, n*d]"), ShapeError);
}
