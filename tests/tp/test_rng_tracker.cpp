// lab02: Megatron's RNG tracker (engine/tensor_parallel/random.h) and case S2 (docs/known_cases.md).
// No communication is needed: each TP rank's tracker is built in this process by looping over tp_rank,
// which is exactly what model_parallel_manual_seed does on that rank.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/error.h"
#include "engine/ops/dropout.h"
#include "engine/random/philox.h"
#include "engine/tensor_parallel/random.h"

using namespace tpsp;
using namespace tpsp::tensor_parallel;

namespace {

constexpr uint64_t kSeed = 1234;

/// What the ShapeError thrown by f says ("" if f does not throw one).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// The Philox values a state (seed, offset) yields for its next n draws.
std::vector<float> philox(uint64_t seed, uint64_t offset, int64_t n) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i)
    v.push_back(random::uniform(seed, kRngTrackerStream, offset + static_cast<uint64_t>(i)));
  return v;
}

bool same(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.at(i) != b.at(i)) return false;
  return true;
}

/// Number of elements at which two equally shaped masks differ.
int64_t differing(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) n += a.at(i) != b.at(i);
  return n;
}

}  // namespace

static_assert(!std::is_copy_constructible_v<RngStatesTracker::ForkGuard>);
static_assert(!std::is_move_constructible_v<RngStatesTracker::ForkGuard>);

TEST_CASE("rng tracker: default stream identical on all TP ranks, model-parallel seed = seed + 2718 + rank") {
  const int tp = 4;
  std::vector<std::vector<float>> dflt, mp;
  for (int r = 0; r < tp; ++r) {
    RngStatesTracker t;
    model_parallel_manual_seed(t, kSeed, r);
    CHECK(t.current() == RngState{kSeed, 0});
    CHECK(t.current_name() == kDefaultRngName);
    const auto states = t.get_states();
    CHECK(states.size() == 2);
    CHECK(states.at(kModelParallelRngName) == RngState{kSeed + 2718 + static_cast<uint64_t>(r), 0});
    CHECK(states.at(kDataParallelRngName) == RngState{kSeed, 0});
    dflt.push_back(t.uniform(10));
    {
      auto g = t.fork();  // the default name is "model-parallel-rng"
      CHECK(t.current_name() == kModelParallelRngName);
      mp.push_back(t.uniform(10));
    }
    CHECK(mp.back() == philox(kSeed + 2718 + static_cast<uint64_t>(r), 0, 10));
  }
  CHECK(dflt[0] == philox(kSeed, 0, 10));
  for (int r = 1; r < tp; ++r) CHECK(dflt[static_cast<std::size_t>(r)] == dflt[0]);
  for (int r = 0; r < tp; ++r)
    for (int q = r + 1; q < tp; ++q)
      CHECK(mp[static_cast<std::size_t>(r)] != mp[static_cast<std::size_t>(q)]);
  // Seeding again starts over (reset + fresh states), on any rank.
  RngStatesTracker t;
  model_parallel_manual_seed(t, kSeed, 1);
  (void)t.uniform(5);
  model_parallel_manual_seed(t, kSeed + 1, 2);
  CHECK(t.current() == RngState{kSeed + 1, 0});
  CHECK(t.get_states().at(kModelParallelRngName) == RngState{kSeed + 1 + 2718 + 2, 0});
  CHECK(contains(error_of([&] { model_parallel_manual_seed(t, kSeed, -1); }), "tp_rank = -1"));
}

TEST_CASE("rng tracker: uniform draws are Philox at the state's offset and advance it") {
  RngStatesTracker t;
  t.current() = RngState{77, 5};  // an offset that is not a multiple of the 4 Philox lanes
  CHECK(t.uniform(0).empty());
  CHECK(t.uniform(7) == philox(77, 5, 7));
  CHECK(t.current() == RngState{77, 12});
  CHECK(t.uniform(9) == philox(77, 12, 9));
  CHECK(t.current() == RngState{77, 21});
  t.manual_seed(3);
  CHECK(t.current() == RngState{3, 0});
  CHECK(t.uniform(4) == philox(3, 0, 4));
  CHECK(contains(error_of([&] { (void)t.uniform(-2); }), "n = -2"));
}

TEST_CASE("rng tracker: fork and unfork restore the default, offsets resume") {
  RngStatesTracker t;
  t.manual_seed(10);
  t.add("a", 20);
  CHECK(t.uniform(3) == philox(10, 0, 3));
  {
    auto g = t.fork("a");
    CHECK(g.name() == "a");
    CHECK(t.current() == RngState{20, 0});
    CHECK(t.uniform(4) == philox(20, 0, 4));
  }
  CHECK(t.current_name() == kDefaultRngName);
  CHECK(t.current() == RngState{10, 3});  // the default generator is where it was
  CHECK(t.get_states().at("a") == RngState{20, 4});
  CHECK(t.uniform(2) == philox(10, 3, 2));
  {
    auto g = t.fork("a");
    CHECK(t.uniform(5) == philox(20, 4, 5));  // resumes, draws nothing twice
  }
  CHECK(t.get_states().at("a") == RngState{20, 9});
  CHECK(t.current() == RngState{10, 5});
}

TEST_CASE("rng tracker: nested forks restore in order") {
  RngStatesTracker t;
  t.manual_seed(1);
  t.add("a", 2);
  t.add("b", 3);
  (void)t.uniform(1);
  {
    auto ga = t.fork("a");
    CHECK(t.uniform(2) == philox(2, 0, 2));
    {
      auto gb = t.fork("b");
      CHECK(t.current_name() == "b");
      CHECK(t.uniform(5) == philox(3, 0, 5));
    }
    CHECK(t.current_name() == "a");
    CHECK(t.current() == RngState{2, 2});  // a's progress is kept across the inner fork
    CHECK(t.uniform(1) == philox(2, 2, 1));
    {
      auto ga2 = t.fork("a");  // forking the current state continues it (Megatron tracks the name)
      CHECK(t.uniform(2) == philox(2, 3, 2));
    }
    CHECK(t.current() == RngState{2, 5});
  }
  CHECK(t.current_name() == kDefaultRngName);
  CHECK(t.current() == RngState{1, 1});
  CHECK(t.get_states().at("a") == RngState{2, 5});
  CHECK(t.get_states().at("b") == RngState{3, 5});
}

TEST_CASE("rng tracker: duplicate name or seed and unknown fork names are refused, naming them") {
  RngStatesTracker t;
  t.add("a", 7);
  const auto before = t.get_states();
  const std::string dup_seed = error_of([&] { t.add("b", 7); });
  CHECK(contains(dup_seed, "seed 7 already exists"));
  CHECK(contains(dup_seed, "'b'"));
  const std::string dup_name = error_of([&] { t.add("a", 8); });
  CHECK(contains(dup_name, "'a' already exists"));
  CHECK(t.get_states() == before);  // unchanged: seed 8 was not recorded by the failed add
  t.add("c", 8);
  const std::string unknown = error_of([&] { auto g = t.fork("nope"); });
  CHECK(contains(unknown, "'nope' is not added"));
  CHECK(contains(unknown, "'a', 'c'"));
  CHECK(contains(error_of([&] { auto g = t.fork(); }), std::string("'") + kModelParallelRngName + "'"));
  CHECK(t.current_name() == kDefaultRngName);
  CHECK(t.current() == RngState{});
  {
    auto g = t.fork("a");
    CHECK(contains(error_of([&] { t.reset(); }), "inside fork('a')"));
  }
}

TEST_CASE("rng tracker: reset, get_states and set_states replay a checkpointed region") {
  RngStatesTracker t;
  model_parallel_manual_seed(t, kSeed, 1);
  (void)t.uniform(3);
  // Activation checkpointing: save every state, run the region, restore, run it again.
  const auto saved_states = t.get_states();
  const RngState saved_current = t.current();
  auto region = [&] {
    std::vector<float> out = t.uniform(4);
    auto g = t.fork();
    const std::vector<float> mp = t.uniform(6);
    out.insert(out.end(), mp.begin(), mp.end());
    return out;
  };
  const std::vector<float> first = region();
  CHECK(t.get_states() != saved_states);
  t.set_states(saved_states);
  t.current() = saved_current;
  CHECK(region() == first);
  // reset() forgets names and seeds, keeps the current generator.
  const RngState cur = t.current();
  t.reset();
  CHECK(t.get_states().empty());
  CHECK(t.current() == cur);
  t.add(kModelParallelRngName, kSeed + 2718 + 1);  // the seed is free again
}

TEST_CASE("rng tracker: dropout_mask_from_tracker keeps iff uniform >= p, scaled by 1 over 1-p") {
  RngStatesTracker t;
  t.manual_seed(5);
  const float p = 0.25f;
  const Tensor m = dropout_mask_from_tracker(t, {200, 200}, p);
  CHECK(t.current() == RngState{5, 40000});
  const std::vector<float> u = philox(5, 0, 40000);
  int64_t kept = 0;
  for (int64_t i = 0; i < m.numel(); ++i) {
    const float want = u[static_cast<std::size_t>(i)] >= p ? 1.f / (1.f - p) : 0.f;
    if (m.at(i) != want) FAIL("element " << i << ": " << m.at(i) << " != " << want);
    kept += m.at(i) != 0.f;
  }
  CHECK(static_cast<double>(kept) / 40000.0 == doctest::Approx(0.75).epsilon(0.02));
  const Tensor ones = dropout_mask_from_tracker(t, {3, 2}, 0.f);  // p = 0 keeps all, still consumes
  CHECK(same(ones, Tensor::full({3, 2}, 1.f)));
  CHECK(t.current() == RngState{5, 40006});
  CHECK(contains(error_of([&] { (void)dropout_mask_from_tracker(t, {2}, 1.f); }), "outside [0, 1)"));
  CHECK(contains(error_of([&] { (void)dropout_mask_from_tracker(t, {2}, -0.1f); }), "outside [0, 1)"));
}

// Case S2. Hidden dropout under SP: rank r holds tokens [r·s/tp, (r+1)·s/tp) of [s, b, h].
TEST_CASE("rng tracker S2: SP masks from the shared default stream collide across ranks") {
  const int tp = 4;
  const int64_t s = 8, b = 2, h = 6, s_local = s / tp;
  const float p = 0.5f;
  const Shape local = {s_local, b, h}, whole = {s, b, h};
  const uint64_t stream = ops::dropout_stream("layers.0.hidden_attn", 3);
  const Tensor reference_mask = ops::dropout_mask(whole, p, ops::DropoutKey{kSeed, stream, {}, {}});

  std::vector<Tensor> from_default, from_mp, from_keys, replicated_default, replicated_mp;
  for (int r = 0; r < tp; ++r) {
    RngStatesTracker t;
    model_parallel_manual_seed(t, kSeed, r);
    from_default.push_back(dropout_mask_from_tracker(t, local, p));  // the bug
    {
      auto g = t.fork();  // Megatron: the block runs inside fork() when sequence_parallel
      from_mp.push_back(dropout_mask_from_tracker(t, local, p));
    }
    from_keys.push_back(
        ops::dropout_mask(local, p, ops::DropoutKey{kSeed, stream, whole, {r * s_local, 0, 0}}));
    // Without SP every rank holds the whole replicated [s, b, h] activation.
    RngStatesTracker u;
    model_parallel_manual_seed(u, kSeed, r);
    replicated_default.push_back(dropout_mask_from_tracker(u, whole, p));
    auto g = u.fork();
    replicated_mp.push_back(dropout_mask_from_tracker(u, whole, p));
  }
  CHECK(differing(from_default[0], Tensor::full(local, 2.f)) > 0);  // some elements are dropped
  for (int r = 1; r < tp; ++r) {
    const auto R = static_cast<std::size_t>(r);
    // The bug: tokens r·s/tp.. on rank r get exactly the mask of tokens 0.. on rank 0.
    CHECK(same(from_default[R], from_default[0]));
    // Fixed: the model-parallel stream and the engine's shard-invariant keys differ per rank.
    CHECK(differing(from_mp[R], from_mp[0]) > 0);
    CHECK(differing(from_keys[R], from_keys[0]) > 0);
    // Without SP, the default stream is the right one: replicated copies get the same mask, which the
    // per-rank stream would break.
    CHECK(same(replicated_default[R], replicated_default[0]));
    CHECK(differing(replicated_mp[R], replicated_mp[0]) > 0);
  }
  // The engine's masks are also the single-process run's, element-wise (without SP: the whole mask).
  for (int r = 0; r < tp; ++r)
    CHECK(
        same(from_keys[static_cast<std::size_t>(r)], reference_mask.slice0(r * s_local, (r + 1) * s_local)));
  CHECK(same(ops::dropout_mask(whole, p, ops::DropoutKey{kSeed, stream, whole, {0, 0, 0}}), reference_mask));
  for (int r = 0; r < tp; ++r)
    for (int q = r + 1; q < tp; ++q) {
      CHECK(differing(from_mp[static_cast<std::size_t>(r)], from_mp[static_cast<std::size_t>(q)]) > 0);
      CHECK(differing(from_keys[static_cast<std::size_t>(r)], from_keys[static_cast<std::size_t>(q)]) > 0);
    }
}
