// bfloat16 storage and conversion: round to nearest even (torch.Tensor.to(torch.bfloat16)), 2 bytes an
// element, conversions through to() / copy_from, and the dtype rules of data().
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <utility>

#include "engine/bf16.h"
#include "engine/error.h"
#include "engine/tensor.h"

using namespace tpsp;

TEST_CASE("bf16 conversion rounds to nearest even and keeps NaN") {
  CHECK(f32_to_bf16(1.0f) == 0x3F80);
  CHECK(bf16_to_f32(0x3F80) == 1.0f);
  // 1 + 2^-8 lies exactly halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  CHECK(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.f, -8))) == 1.0f);
  // 1 + 3·2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: the even one is 1 + 2^-6.
  CHECK(bf16_to_f32(f32_to_bf16(1.0f + 3 * std::ldexp(1.f, -8))) == 1.0f + std::ldexp(1.f, -6));
  CHECK(bf16_to_f32(f32_to_bf16(257.f)) == 256.f);
  CHECK(bf16_to_f32(f32_to_bf16(-3.0f)) == -3.0f);
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isinf(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::infinity()))));
}

TEST_CASE("bf16 tensors store 2 bytes an element and convert through to() and copy_from") {
  const Tensor f = Tensor::from({2, 3}, {1.f, 2.5f, -3.f, 257.f, 0.1f, 1e30f});
  const Tensor b = f.to(DType::bf16);
  CHECK(b.dtype() == DType::bf16);
  CHECK(b.nbytes() == 12);
  CHECK(b.at(3) == 256.f);  // read access converts
  CHECK(std::fabs(b.at(4) - 0.1f) <= 0.1f * std::ldexp(1.f, -8));
  const Tensor back = b.to(DType::f32);
  CHECK(back.at({0, 1}) == 2.5f);
  CHECK(f.to(DType::f32).shares_storage_with(f));  // no copy when the dtype already matches
  Tensor c({2, 3}, DType::bf16);
  c.copy_from(f);
  CHECK(c.value(5) == b.at(5));
  CHECK_THROWS_WITH_AS(b.data(), doctest::Contains("is bf16, not f32"), ShapeError);
  CHECK_THROWS_AS(f.data_bf16(), ShapeError);
  Tensor z({3}, DType::bf16);
  z.fill(1.5f);
  CHECK(z.value(2) == 1.5f);
}

TEST_CASE("bf16 tensors: clone, slices, narrow_copy and cat keep the dtype and the bits") {
  const Tensor b = Tensor::from({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8}).to(DType::bf16);
  CHECK(b.clone().dtype() == DType::bf16);
  CHECK(b.slice0(2, 4).value(0) == 5.f);
  const Tensor col = b.narrow_copy(1, 1, 1);
  CHECK((col.dtype() == DType::bf16 && col.value(3) == 8.f));
  const Tensor both = cat({b, b}, 1);
  CHECK((both.shape() == Shape{4, 4} && std::as_const(both).at({3, 2}) == 7.f));
  CHECK_THROWS_WITH_AS(cat({b, b.to(DType::f32)}, 0), doctest::Contains("dtypes bf16 and f32 differ"),
                       ShapeError);
}
