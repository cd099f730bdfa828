// Philox-4x32-10 known answers, uniform/normal draws and whole-parameter initialisation.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/random/init.h"
#include "engine/random/philox.h"

using namespace tpsp;

TEST_CASE("philox4x32-10 matches the Random123 known-answer vectors") {
  const auto zero = random::philox4x32({0, 0, 0, 0}, {0, 0});
  CHECK(zero == std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  const auto ones =
      random::philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu});
  CHECK(ones == std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  // Random123's third vector: pi digits.
  const auto pi =
      random::philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u});
  CHECK(pi == std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdcceb, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("uniform draws are the top 24 bits of the philox lane, between 0 and 1") {
  const auto lanes = random::philox4x32({1, 0, 7, 0}, {42, 0});  // index 4..7 of stream 7, seed 42
  for (uint64_t l = 0; l < 4; ++l) CHECK(random::uniform(42, 7, 4 + l) == float(lanes[l] >> 8) / 16777216.f);
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float u = random::uniform(1, 2, uint64_t(i));
    REQUIRE(u >= 0.f);
    REQUIRE(u < 1.f);
    sum += u;
  }
  // Mean of n uniforms: σ = 1/√(12n) ≈ 9.1e-4; 5σ.
  CHECK(std::fabs(sum / n - 0.5) < 5 * 9.2e-4);
  CHECK(random::uniform(1, 2, 3) != random::uniform(1, 3, 3));  // streams differ
  CHECK(random::uniform(1, 2, 3) != random::uniform(2, 2, 3));  // seeds differ
}

TEST_CASE("hash_name is FNV-1a 64") {
  CHECK(random::hash_name("") == 0xcbf29ce484222325ull);
  CHECK(random::hash_name("a") == 0xaf63dc4c8601ec8cull);
  CHECK(random::hash_name("foobar") == 0x85944171f73967e8ull);
}

TEST_CASE("init_normal is deterministic per (seed, name), differs across names, has mean 0 and std sigma") {
  const float sigma = 0.02f;
  Tensor a({400, 250}), b({400, 250}), c({400, 250}), d({400, 250});
  random::init_normal(a, 1234, "decoder.layers.0.mlp.linear_fc1.weight", sigma);
  random::init_normal(b, 1234, "decoder.layers.0.mlp.linear_fc1.weight", sigma);
  random::init_normal(c, 1234, "decoder.layers.1.mlp.linear_fc1.weight", sigma);
  random::init_normal(d, 1235, "decoder.layers.0.mlp.linear_fc1.weight", sigma);
  int64_t same_c = 0, same_d = 0;
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    REQUIRE(a.at(i) == b.at(i));
    same_c += a.at(i) == c.at(i);
    same_d += a.at(i) == d.at(i);
    sum += a.at(i);
    sq += double(a.at(i)) * a.at(i);
  }
  CHECK(same_c < 10);
  CHECK(same_d < 10);
  const double n = double(a.numel()), mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  // n = 1e5: the sample mean has σ/√n = 6.3e-5 (5σ below), the sample std has σ/√(2n) = 4.5e-5.
  CHECK(std::fabs(mean) < 5 * 6.4e-5);
  CHECK(std::fabs(sd - sigma) < 5 * 4.5e-5);
}

TEST_CASE("init_normal of a vocabulary padded from 37 to 38 rows keeps the first 37 rows") {
  Tensor small({37, 12}), padded({38, 12});
  random::init_normal(small, 7, "embedding.word_embeddings.weight", 1.f);
  random::init_normal(padded, 7, "embedding.word_embeddings.weight", 1.f);
  for (int64_t i = 0; i < small.numel(); ++i) REQUIRE(small.at(i) == padded.at(i));
}
