// Unit tests of the launcher's pure parts: Slurm task-list parsing, the BLAS thread rule, the store
// directory layout and the line relay (fed in odd chunks, read back through a pipe).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "launch/env.h"
#include "launch/output.h"
#include "launch/store_dir.h"

using namespace tpsp::run;

TEST_CASE("unit: Slurm tasks-per-node lists expand like Slurm writes them") {
  CHECK(expand_tasks_per_node("4") == std::vector<int>{4});
  CHECK(expand_tasks_per_node("2(x3)") == std::vector<int>{2, 2, 2});
  CHECK(expand_tasks_per_node("4(x2),3") == std::vector<int>{4, 4, 3});
  CHECK(expand_tasks_per_node("1,2,3") == std::vector<int>{1, 2, 3});
  CHECK(expand_tasks_per_node("x").empty());
  CHECK(expand_tasks_per_node("2(y3)").empty());
  CHECK(expand_tasks_per_node("2(x0)").empty());
}

TEST_CASE("unit: BLAS threads are cores / local ranks, at least 1") {
  CHECK(default_blas_threads(16, 4) == 4);
  CHECK(default_blas_threads(2, 4) == 1);
  CHECK(default_blas_threads(7, 2) == 3);
  CHECK(default_blas_threads(8, 0) == 8);
  CHECK(usable_cpus() >= 1);
  CHECK(parse_int("12") == 12);
  CHECK_FALSE(parse_int("12x").has_value());
  CHECK_FALSE(parse_int("").has_value());
}

TEST_CASE("unit: the Slurm store layout is deterministic and one path component") {
  const auto a = slurm_store_layout("/shared/", "123", "4");
  CHECK(a.root == "/shared/tpsp-slurm-123.4");
  CHECK(a.store == "/shared/tpsp-slurm-123.4/store");
  const auto b = slurm_store_layout("/shared", "12/../3", "");
  CHECK(b.root == "/shared/tpsp-slurm-12_.._3._");
  const auto c = slurm_store_layout("/tmp", "1", "0", "my cluster", "37015");
  CHECK(c.root == "/tmp/tpsp-slurm-my_cluster-1.0-p37015");
}

namespace {

// Reads everything currently in pipe `fd` (non-blocking).
std::string read_available(int fd) {
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) return text;
    text.append(buffer, static_cast<std::size_t>(n));
  }
}

}  // namespace

TEST_CASE("unit: the relay emits whole prefixed lines and keeps the last K") {
  int out[2], err[2];
  REQUIRE(pipe2(out, O_NONBLOCK) == 0);
  REQUIRE(pipe2(err, O_NONBLOCK) == 0);
  REQUIRE(fcntl(out[1], F_SETPIPE_SZ, 1 << 20) >= (1 << 17));  // room for the long line below
  {
    LineRelay relay({0, 7}, 2, out[1], err[1]);
    relay.feed(1, Stream::kOut, "hel");
    CHECK(read_available(out[0]).empty());  // nothing until the line is complete
    relay.feed(0, Stream::kOut, "zero\n");
    relay.feed(1, Stream::kOut, "lo\nwor");
    relay.feed(1, Stream::kErr, "oops\n");
    relay.feed(1, Stream::kOut, "ld\nlast");
    relay.finish(1, Stream::kOut);
    CHECK(read_available(out[0]) == "[rank 0] zero\n[rank 7] hello\n[rank 7] world\n[rank 7] last\n");
    CHECK(read_available(err[0]) == "[rank 7] oops\n");
    REQUIRE(relay.tail(1).size() == 2);
    CHECK(relay.tail(1)[0].text == "world");
    CHECK(relay.tail(1)[1].text == "last");
    CHECK(relay.line_count(1) == 4);

    // A line without a newline is cut into bounded pieces instead of growing without limit.
    relay.feed(0, Stream::kOut, std::string(LineRelay::kMaxLineBytes + 10, 'x'));
    const std::string got = read_available(out[0]);
    CHECK(got == "[rank 0] " + std::string(LineRelay::kMaxLineBytes, 'x') + "\n");
  }
  for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
}

TEST_CASE("unit: with a byte bound the relay cuts a rank's output once and keeps its tail") {
  int out[2], err[2];
  REQUIRE(pipe2(out, O_NONBLOCK) == 0);
  REQUIRE(pipe2(err, O_NONBLOCK) == 0);
  {
    LineRelay relay({0, 1}, 1, out[1], err[1]);
    relay.limit_bytes_per_rank(40);  // "[rank 0] " is 9 bytes: two 10-byte lines fit (2 x 20), not three
    for (int i = 0; i < 5; ++i) relay.feed(0, Stream::kOut, "0123456789\n");
    relay.feed(1, Stream::kOut, "other\n");
    CHECK(read_available(out[0]) ==
          "[rank 0] 0123456789\n[rank 0] 0123456789\n"
          "[rank 0] (output cut here: over 40 bytes)\n[rank 1] other\n");
    CHECK(relay.line_count(0) == 5);
    CHECK(relay.tail(0).back().text == "0123456789");
  }
  for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
}
