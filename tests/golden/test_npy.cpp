// Tests of the .npy reader/writer (engine/io/npy.h): round trips, files numpy wrote
// (tests/golden/data/npy/, made by tools/make_goldens.py), and the errors for files to reject.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "engine/error.h"
#include "engine/io/npy.h"
#include "tests/golden/golden_util.h"

using namespace tpsp;
using tpsp::io::NpyError;

namespace {

std::string fixture(const std::string& name) {
  return golden::data_dir() + "/npy/" + name;
}

/// A fresh scratch file path in the build tree, unique per process and name.
std::string scratch(const std::string& name) {
  const auto dir = std::filesystem::path(TPSP_BINARY_DIR) / "golden_scratch";
  std::filesystem::create_directories(dir);
  return (dir / (std::to_string(::getpid()) + "_" + name)).string();
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The message of the NpyError that f throws (FAIL if it throws nothing or something else).
template <typename F>
std::string npy_error(F&& f) {
  try {
    f();
  } catch (const NpyError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected NpyError, got: " << e.what());
  }
  FAIL("expected NpyError, nothing thrown");
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("npy: float32 round trip keeps shape and bits") {
  for (const Shape& shape : {Shape{2, 3, 5}, Shape{7}, Shape{}, Shape{0, 4}, Shape{1, 1, 1, 1}}) {
    Tensor t(shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data()[i] = std::ldexp(static_cast<float>(i) - 3.3f, -static_cast<int>(i % 40));
    if (t.numel() > 2) t.data()[2] = -0.f;
    const std::string path = scratch("rt_f32.npy");
    io::save_npy(path, t);
    const Tensor u = io::load_npy(path);
    CHECK(u.shape() == shape);
    for (int64_t i = 0; i < t.numel(); ++i) CHECK(std::signbit(u.data()[i]) == std::signbit(t.data()[i]));
    for (int64_t i = 0; i < t.numel(); ++i) CHECK(u.data()[i] == t.data()[i]);
    // The data starts on a 64-byte boundary, as numpy writes it.
    CHECK(io::read_npy_header(path).data_offset % 64 == 0);
    std::remove(path.c_str());
  }
}

TEST_CASE("npy: int64 round trip and shape checks") {
  const std::vector<int64_t> v = {-100, 0, 36, int64_t(1) << 40, -1, 7};
  const std::string path = scratch("rt_i64.npy");
  io::save_npy_int(path, v, {2, 3});
  Shape shape;
  CHECK(io::load_npy_int(path, &shape) == v);
  CHECK(shape == Shape{2, 3});
  CHECK_THROWS_AS(io::save_npy_int(path, v, {4, 2}), ShapeError);
  // A float loader on an integer file says which loader to use.
  CHECK(contains(npy_error([&] { io::load_npy(path); }), "load_npy_int"));
  std::remove(path.c_str());
}

TEST_CASE("npy: reads the files numpy wrote") {
  const Tensor a = io::load_npy(fixture("f4_2x3.npy"));
  CHECK(a.shape() == Shape{2, 3});
  for (int64_t i = 0; i < 6; ++i) CHECK(a.data()[i] == 0.5f * static_cast<float>(i) - 1.f);

  const Tensor b = io::load_npy(fixture("f8_4.npy"));  // float64, rounded to nearest float32
  REQUIRE(b.shape() == Shape{4});
  CHECK(b.data()[0] == static_cast<float>(0.1));
  CHECK(b.data()[1] == -2.5f);
  CHECK(b.data()[2] == static_cast<float>(1e-40));
  CHECK(b.data()[3] == static_cast<float>(3.0e38));

  Shape shape;
  CHECK(io::load_npy_int(fixture("i8_2x2.npy"), &shape) ==
        std::vector<int64_t>{-100, 5, int64_t(1) << 40, 0});
  CHECK(shape == Shape{2, 2});
  CHECK(io::load_npy_int(fixture("i4_4.npy"), &shape) == std::vector<int64_t>{-3, 0, 7, 2147483647});
  CHECK(shape == Shape{4});

  const Tensor s = io::load_npy(fixture("scalar_f4.npy"));
  CHECK(s.shape() == Shape{});
  CHECK(s.numel() == 1);
  CHECK(s.data()[0] == 3.25f);

  CHECK(io::load_npy(fixture("empty_f4_0x4.npy")).shape() == Shape{0, 4});

  const io::NpyHeader h2 = io::read_npy_header(fixture("v2_f4_3.npy"));
  CHECK(h2.major == 2);
  const Tensor v2 = io::load_npy(fixture("v2_f4_3.npy"));
  REQUIRE(v2.shape() == Shape{3});
  CHECK(v2.data()[0] == 1.5f);
  CHECK(v2.data()[2] == 4.f);
}

TEST_CASE("npy: writes the same bytes as numpy") {
  const std::string f = scratch("same_f4.npy"), i = scratch("same_i8.npy");
  io::save_npy(f, io::load_npy(fixture("f4_2x3.npy")));
  CHECK(bytes_of(f) == bytes_of(fixture("f4_2x3.npy")));
  Shape shape;
  const auto ids = io::load_npy_int(fixture("i8_2x2.npy"), &shape);
  io::save_npy_int(i, ids, shape);
  CHECK(bytes_of(i) == bytes_of(fixture("i8_2x2.npy")));
  std::remove(f.c_str());
  std::remove(i.c_str());
}

TEST_CASE("npy: errors name the file and the problem") {
  const std::string missing = fixture("no_such_file.npy");
  std::string e = npy_error([&] { io::load_npy(missing); });
  CHECK(contains(e, missing));
  CHECK(contains(e, "cannot open"));

  e = npy_error([&] { io::load_npy(fixture("f2_3.npy")); });
  CHECK(contains(e, "f2_3.npy"));
  CHECK(contains(e, "unsupported dtype '<f2'"));

  e = npy_error([&] { io::load_npy(fixture("be_f4_3.npy")); });
  CHECK(contains(e, "unsupported dtype '>f4'"));

  e = npy_error([&] { io::load_npy(fixture("fortran_f4_2x3.npy")); });
  CHECK(contains(e, "fortran_f4_2x3.npy"));
  CHECK(contains(e, "Fortran"));

  e = npy_error([&] { io::load_npy(fixture("truncated_f4_2x3.npy")); });
  CHECK(contains(e, "truncated_f4_2x3.npy"));
  CHECK(contains(e, "truncated data"));
  CHECK(contains(e, "needs 24 bytes but the file has 20"));

  e = npy_error([&] { io::load_npy_int(fixture("f4_2x3.npy")); });
  CHECK(contains(e, "load_npy"));

  // Not a .npy file at all, and a file cut inside its header.
  const std::string junk = scratch("junk.npy");
  std::ofstream(junk, std::ios::binary) << "hello, world";
  CHECK(contains(npy_error([&] { io::load_npy(junk); }), "magic"));
  std::ofstream(junk, std::ios::binary) << bytes_of(fixture("f4_2x3.npy")).substr(0, 40);
  CHECK(contains(npy_error([&] { io::load_npy(junk); }), "truncated header"));
  std::remove(junk.c_str());

  // An unwritable path.
  e = npy_error([&] { io::save_npy(fixture("no_such_dir/x.npy"), Tensor({2})); });
  CHECK(contains(e, "cannot open for writing"));
  CHECK_THROWS_AS(io::save_npy(scratch("undef.npy"), Tensor()), ShapeError);
}
