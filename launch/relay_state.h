// The relay's bookkeeping (relay_server.cpp): a request as it arrived, a group, a rank's connection,
// the limits that cut off a flood. Internal to the launch library.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/comm/relay/protocol.h"
#include "launch/relay_arithmetic.h"

namespace tpsp::run::relay_state {

using comm::relay::Frame;
using comm::relay::Kind;

/// One request of world rank `rank`: its frame and payload.
struct Request {
  int rank = 0;  // world rank
  Frame f;
  Bytes payload;
};

/// A group the relay formed (a world per hello round, or a new_group).
struct Group {
  int ctx = 0;
  std::string key, name;
  std::vector<int> ranks;  // world ranks, in group-rank order
  int group_rank(int world_rank) const {
    const auto it = std::find(ranks.begin(), ranks.end(), world_rank);
    return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
  }
};

/// What one rank may make the relay hold at once (its unread input, its unsent replies, its requests
/// waiting for their peers), bytes; and the most the relay's log may grow to, bytes. A rank past either
/// is cut off as a protocol violation: a flood must not take the grader's memory or time.
inline constexpr std::size_t kHeldPerRank = (std::size_t{1} << 26) + (std::size_t{1} << 25);
inline constexpr std::size_t kMaxLog = std::size_t{16} << 20;

/// A rank's connection: its socket, what it sent and what it was sent.
struct Conn {
  int fd = -1;
  bool open = true;
  std::size_t waiting_bytes = 0;  // payloads of its requests still waiting for their peers
  Bytes in;
  Bytes out;
  std::size_t out_pos = 0;
  int hellos = 0;                      // worlds joined (the ctx of the next hello)
  std::map<uint32_t, int> new_groups;  // per parent group: new_group calls made
};

/// "hello", "collective", ... (the log's "kind").
inline const char* kind_name(Kind k) {
  switch (k) {
    case Kind::hello:
      return "hello";
    case Kind::collective:
      return "collective";
    case Kind::send:
      return "send";
    case Kind::recv:
      return "recv";
    case Kind::new_group:
      return "new_group";
    case Kind::mark:
      return "mark";
    case Kind::input:
      return "input";
    default:
      return "reply";
  }
}

}  // namespace tpsp::run::relay_state
