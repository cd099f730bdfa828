// Private inputs (issue 28): under the relay a rank gets only what the scenario gives it. The input server
// (checkers/input_server.h) is asked directly as any rank would ask it (well-formed or not), and through a
// relay by ranks holding RelayBackend: each receives its own chunk and its own of_rank tensor, wholes are
// the same for all, and a request for another rank's data either cannot be written or cuts the rank off.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "checkers/input_server.h"
#include "checkers/inputs.h"
#include "checkers/rank/relay_inputs.h"
#include "engine/comm/comm_error.h"
#include "engine/comm/relay/protocol.h"
#include "engine/random/init.h"
#include "tests/support/ranks.h"
#include "tests/witness/relay_fixture.h"

using namespace tpsp;
using namespace tpsp::checkers;
using nlohmann::json;

namespace {

constexpr uint64_t kSeed = 20261207;

run::InputAnswer ask(const run::InputServer& server, int rank, const json& spec) {
  return server({0, rank, spec.dump()});
}

Tensor as_tensor(const std::string& bytes, const Shape& shape) {
  Tensor t(shape);
  REQUIRE(bytes.size() == static_cast<std::size_t>(t.numel()) * sizeof(float));
  std::memcpy(t.data(), bytes.data(), bytes.size());
  return t;
}

bool same(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.at(i) != b.at(i)) return false;
  return true;
}

const json kW = {{"name", "t.w"}, {"shape", {8, 6}}, {"scale", 0.5}, {"exact", false}};

}  // namespace

TEST_CASE("input server: a rank's chunk and own tensor are decided by its world rank, never by the request") {
  const run::InputServer server = input_server(kSeed, 2);  // world 4 = dp 2 × tp 2
  const InputSpec w{"t.w", {8, 6}, 0.5f};
  const Tensor whole_split = draw_input(w, Share::split, 1, 0, kSeed);
  for (int rank = 0; rank < 4; ++rank) {
    json split = kW;
    split["share"] = "split";
    split["dim"] = 1;
    const run::InputAnswer a = ask(server, rank, split);
    REQUIRE(a.violation.empty());
    CHECK(same(as_tensor(a.bytes, {8, 3}), chunk(whole_split, 1, rank % 2, 2)));
    json own = kW;
    own["share"] = "of_rank";
    const run::InputAnswer o = ask(server, rank, own);
    CHECK(same(as_tensor(o.bytes, {8, 6}), draw_input(w, Share::of_rank, 0, rank % 2, kSeed)));
    json whole = kW;
    whole["share"] = "whole";
    CHECK(same(as_tensor(ask(server, rank, whole).bytes, {8, 6}), draw_input(w, Share::whole, 0, 0, kSeed)));
  }
  // The three ways of sharing draw three different tensors: no whole request returns a split one's whole.
  CHECK_FALSE(same(draw_input(w, Share::whole, 0, 0, kSeed), whole_split));
  CHECK_FALSE(same(draw_input(w, Share::split, 0, 0, kSeed), whole_split));
  CHECK_FALSE(same(draw_input(w, Share::of_rank, 0, 1, kSeed), draw_input(w, Share::whole, 0, 0, kSeed)));
}

TEST_CASE("input server: a request for another rank's tensor by its drawn name is a violation") {
  const run::InputServer server = input_server(kSeed, 2);
  for (const char* name : {"g.partial.rank1", "x.rank0", "a/split0", "", "check.x y"}) {
    const run::InputAnswer a = ask(server, 0, {{"name", name}, {"shape", {4}}, {"share", "whole"}});
    CHECK_MESSAGE(!a.violation.empty(), name);
    CHECK(a.bytes.empty());
  }
  // Names that merely contain ".rank" are inputs like any other.
  CHECK(ask(server, 0, {{"name", "x.rank1.bias"}, {"shape", {4}}, {"share", "whole"}}).violation.empty());
}

TEST_CASE("input server: malformed requests are violations, a split the layout cannot make is an error") {
  const run::InputServer server = input_server(kSeed, 2);
  const auto violation = [&](const std::string& text) { return server({0, 1, text}).violation; };
  CHECK(violation("not json").find("not {") != std::string::npos);
  CHECK(!violation(R"({"name": "x", "shape": [], "share": "whole"})").empty());
  CHECK(!violation(R"({"name": "x", "shape": [1, 1, 1, 1, 1], "share": "whole"})").empty());
  CHECK(!violation(R"({"name": "x", "shape": [4096, 8192], "share": "whole"})").empty());  // over 2^22
  CHECK(!violation(R"({"name": "x", "shape": [-4], "share": "whole"})").empty());
  CHECK(!violation(R"({"name": "x", "shape": [4], "share": "all"})").empty());
  CHECK(!violation(R"({"name": "x", "shape": [4], "share": "split", "dim": 1})").empty());
  CHECK(!violation(R"({"name": "x", "shape": [4], "share": "whole", "scale": "big"})").empty());
  CHECK(!violation(R"({"name": "x", "shape": [4], "share": "whole", "dim": 1e40})").empty());
  const run::InputAnswer odd =
      server({0, 1, R"({"name": "x", "shape": [3, 2], "share": "split", "dim": 0})"});
  CHECK(odd.violation.empty());
  CHECK(odd.error == "input 'x': dim 0 of size 3 is not divisible by tp=2");
}

TEST_CASE("model_seed_of: a function of the seed that is not the seed") {
  CHECK(model_seed_of(kSeed) == model_seed_of(kSeed));
  CHECK(model_seed_of(kSeed) != kSeed);
  CHECK(model_seed_of(kSeed) != model_seed_of(kSeed + 1));
  CHECK(model_seed_of(0) != 0);
}

TEST_CASE("relay: ranks get their inputs through it, and a rank asking for another's is cut off") {
  constexpr int n = 2;
  testing::RelayFixture relay(n, input_server(kSeed, n));
  const InputSpec p{"g.partial", {3, 4}, 1.f, true};
  const auto results = testing::run_ranks(n, [&](int r) {
    auto world = relay.world(r, n, 5);
    auto& backend = dynamic_cast<comm::RelayBackend&>(world->backend());
    const InputDraw in(relay_rank_source(backend, r, n, std::chrono::seconds(5)));
    testing::expect(same(in.of_rank(p, r), draw_input(p, Share::of_rank, 0, r, kSeed)), "own tensor");
    testing::expect(same(in.split(0)({"t.x", {4, 4}}),
                         chunk(draw_input({"t.x", {4, 4}}, Share::split, 0, 0, kSeed), 0, r, n)),
                    "own chunk");
    bool refused = false;
    try {
      in.of_rank(p, 1 - r);  // the rank side refuses to ask for another rank's tensor
    } catch (const std::invalid_argument&) {
      refused = true;
    }
    testing::expect(refused, "of_rank of another rank refused on the rank's side");
    if (r == 1) {  // asked by its drawn name, past the rank side: the relay cuts the rank off
      bool cut = false;
      try {
        in({"g.partial.rank0", {3, 4}, 1.f, true});
      } catch (const comm::CommError&) {
        cut = true;
      }
      testing::expect(cut, "a request for g.partial.rank0 by name is refused");
    }
  });
  CHECK_MESSAGE(testing::all_ok(results), testing::summary(results));
  int violations = 0, inputs = 0;
  for (const json& e : relay.finish()) {
    violations += e.contains("violation") && e["rank"] == 1;
    inputs += e.value("kind", "") == "input";
  }
  CHECK(violations == 1);
  CHECK(inputs == 5);  // 2 + 2 asked, and rank 1's forbidden one (logged before it was refused)
}

TEST_CASE(
    "input server: asking a split tensor with a larger shape draws another tensor (an attack of "
    "2026-12-07)") {
  // The draw's values follow the flat index: were the split name blind to the shape, coordinate 0 asking
  // row.w as [1, 8·6·2] would receive the first 48 values of the split stream, the whole [8, 6] weight.
  const run::InputServer server = input_server(kSeed, 2);
  const Tensor whole = draw_input({"t.w", {8, 6}, 0.5f}, Share::split, 1, 0, kSeed);
  json wide = kW;
  wide["shape"] = {1, 96};
  wide["share"] = "split";
  wide["dim"] = 1;
  const Tensor got = as_tensor(ask(server, 0, wide).bytes, {1, 48});
  int64_t equal = 0;
  for (int64_t i = 0; i < 48; ++i) equal += got.at(i) == whole.at(i);
  CHECK(equal == 0);
  // The same shape still gives the rank exactly its chunk.
  json same_shape = kW;
  same_shape["share"] = "split";
  same_shape["dim"] = 1;
  CHECK(same(as_tensor(ask(server, 0, same_shape).bytes, {8, 3}), chunk(whole, 1, 0, 2)));
}

TEST_CASE("input draws: a name whose stream id collides with another rank's still draws other values") {
  // A whole request is drawn with the seed as Philox key and the name's 64-bit FNV-1a as the stream: a
  // name crafted to collide with "check.g.partial.rank1" would draw exactly this. Rank 1's own tensor and
  // a split tensor's chunks are drawn with keys that also hold how they are shared, so it does not.
  const InputSpec p{"g.partial", {3, 4}, 1.f, true};
  Tensor colliding(p.shape);
  random::init_normal(colliding, kSeed, "check.g.partial.rank1", 1.f);
  for (int64_t i = 0; i < colliding.numel(); ++i)
    colliding.at(i) = std::fmax(-8.f, std::fmin(8.f, std::round(colliding.at(i) * 12.f) / 4.f));
  CHECK_FALSE(same(colliding, draw_input(p, Share::of_rank, 0, 1, kSeed)));
  Tensor split_stream(p.shape);
  random::init_normal(split_stream, kSeed, "check.g.partial/split0/3x4", 1.f);
  CHECK_FALSE(same(split_stream, draw_input({"g.partial", {3, 4}}, Share::split, 0, 0, kSeed)));
  // Every key apart: two ranks' own tensors, two dims, two shapes.
  CHECK_FALSE(same(draw_input(p, Share::of_rank, 0, 0, kSeed), draw_input(p, Share::of_rank, 0, 1, kSeed)));
}

TEST_CASE(
    "relay: a rank that floods input requests without reading the replies is cut off (an attack of "
    "2026-12-07)") {
  // One write holds twenty requests for a 16 MiB whole input (an attack made the relay draw and hold 4 GiB
  // so): past 2^26 elements in one launch the rank is cut off, whether or not it reads the replies.
  testing::RelayFixture relay(1, input_server(kSeed, 1));
  const int fd = relay.rank_fds[0];
  using comm::relay::Frame;
  using comm::relay::Kind;
  const std::string key = "w";
  Frame hello;
  hello.kind = Kind::hello;
  hello.bytes = key.size();
  std::string out(reinterpret_cast<const char*>(&hello), sizeof hello);
  out += key;
  REQUIRE(::write(fd, out.data(), out.size()) == static_cast<ssize_t>(out.size()));
  Frame reply;
  REQUIRE(::read(fd, &reply, sizeof reply) == static_cast<ssize_t>(sizeof reply));
  REQUIRE(reply.group != 0);
  const std::string spec = json{{"name", "flood"}, {"shape", {1 << 22}}, {"share", "whole"}}.dump();
  std::string flood;
  for (int i = 0; i < 20; ++i) {
    Frame f;
    f.kind = Kind::input;
    f.group = reply.group;
    f.req = static_cast<uint64_t>(i + 2);
    f.bytes = spec.size();
    flood.append(reinterpret_cast<const char*>(&f), sizeof f);
    flood += spec;
  }
  REQUIRE(::write(fd, flood.data(), flood.size()) == static_cast<ssize_t>(flood.size()));
  const timeval limit{60, 0};  // a relay that never cuts the rank off fails the test instead of hanging it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  // The relay cuts the rank off and closes its socket: reading (and dropping) what it sent ends at EOF.
  std::vector<char> sink(1 << 20);
  std::size_t got = 0;
  for (ssize_t n; (n = ::read(fd, sink.data(), sink.size())) > 0;) got += static_cast<std::size_t>(n);
  CHECK(got < (std::size_t{272} << 20));  // at most the sixteen replies within the limit (16 MiB each)
  int violations = 0;
  for (const json& e : relay.finish())
    violations += e.contains("violation");  // past 2^26 elements, or past 96 MiB held: either cuts it off
  CHECK(violations == 1);
}
