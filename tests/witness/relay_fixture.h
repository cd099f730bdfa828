// A relay (launch/relay_server.h) in a forked child for the witness tests: its ranks' sockets, their world
// groups over RelayBackend, and its log once it ended.
#pragma once

#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/comm/process_group.h"
#include "engine/comm/relay/relay_backend.h"
#include "launch/relay_server.h"

namespace tpsp::testing {

/// A relay serving `world` ranks in a forked child, writing its log under a fresh directory and serving
/// the checker inputs with `inputs` (none when empty).
struct RelayFixture {
  std::string dir;
  std::vector<int> rank_fds;
  pid_t pid = -1;

  explicit RelayFixture(int world, const run::InputServer& inputs = {}) {
    char tmpl[] = "/tmp/tpsp-witness-test.XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    std::vector<int> relay_fds;
    for (int r = 0; r < world; ++r) {
      int sv[2];
      REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
      relay_fds.push_back(sv[0]);
      rank_fds.push_back(sv[1]);
    }
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      for (int fd : rank_fds) ::close(fd);
      run::serve_relay(relay_fds, dir + "/relay.jsonl", inputs);
      std::_Exit(0);
    }
    for (int fd : relay_fds) ::close(fd);
  }

  /// The world group of rank `r` over the relay (run in that rank's process).
  std::shared_ptr<comm::ProcessGroup> world(int r, int world_size, double timeout_s = 20) {
    comm::GroupOptions o;
    o.fingerprints = false;
    o.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    return comm::ProcessGroup::create_world(
        comm::RelayBackend::connect_world(rank_fds[static_cast<std::size_t>(r)], r, world_size, "w",
                                          o.timeout),
        o);
  }

  /// Closes this process's ends, waits for the relay to end and returns its log lines.
  std::vector<nlohmann::json> finish() {
    for (int fd : rank_fds) ::close(fd);
    int st = 0;
    ::waitpid(pid, &st, 0);
    std::vector<nlohmann::json> lines;
    std::ifstream in(dir + "/relay.jsonl");
    for (std::string l; std::getline(in, l);) lines.push_back(nlohmann::json::parse(l));
    return lines;
  }

  ~RelayFixture() { std::filesystem::remove_all(dir); }
};

}  // namespace tpsp::testing
