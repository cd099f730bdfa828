// The relay's wire format: how a rank's RelayBackend (relay_backend.h) asks the relay (launch/
// relay_server.h: ./check's, ./grade's witness, tpsp-run --backend relay's) to run a call, and how the relay
// answers. Each message is one Frame followed by `bytes` payload bytes, over one AF_UNIX stream socket per
// rank that the launcher hands to the rank as file descriptor 3 (TPSP_RELAY_FD).
//
// Why a relay: under ./grade the communication record of a run must come from somewhere the rank's
// own code cannot write. The relay moves every byte between the ranks itself and writes down each
// call as it arrives, so the grader compares the rank's Recorder with what really crossed. Elsewhere it
// is a transport that starts in microseconds and needs no Gloo.
#pragma once

#include <cstdint>
#include <type_traits>

namespace tpsp::comm::relay {

/// "TPSR" in little-endian order; a frame without it is a protocol error.
inline constexpr uint32_t kMagic = 0x52535054u;
/// The largest payload of one frame, bytes (a frame over it is refused as a protocol error; the
/// checkers' tensors are a few MiB at most).
inline constexpr uint64_t kMaxPayload = uint64_t{1} << 26;

/// What a request asks for. Every request is answered by one reply with the same `req`.
enum class Kind : uint8_t {
  hello = 1,       ///< join the world: payload = the world's key; reply.group = the world's group id
  collective = 2,  ///< `op` (an OpKind other than send/recv/new_group) in `group` with tag `tag`
  send = 3,        ///< payload to group rank `arg`; answered once a matching recv took it
  recv = 4,        ///< `aux` bytes from group rank `arg`; answered with them
  new_group = 5,   ///< payload = key, a 0 byte, then `aux` int32 members (group ranks of `group`)
  reply = 6,       ///< status 0: payload = the result; else payload = the error's text
  mark = 7,        ///< payload = the phase the rank's scenario enters (checker code); answered at once
  input = 8,       ///< payload = a checker input's spec (JSON, checkers/input_server.h); reply = its float32s
};

/// An all_to_all's payload starts with its split header: n uint64 (the bytes this rank sends to each
/// group rank, in rank order), then n uint64 (the bytes it expects from each), then the bytes it sends,
/// packed in rank order. Equal splits travel the same way, so the relay checks every exchange pairwise.
inline constexpr uint64_t split_header_bytes(uint64_t n) {
  return 16 * n;
}

/// Status of a reply.
enum class Status : uint8_t { ok = 0, error = 1 };

/// The fixed head of every message (48 bytes, host byte order: both ends are on one machine).
struct Frame {
  uint32_t magic = kMagic;
  Kind kind = Kind::reply;
  uint8_t op = 0;      ///< OpKind of a collective
  uint8_t reduce = 0;  ///< ReduceOp of all_reduce / reduce_scatter
  Status status = Status::ok;
  uint32_t group = 0;  ///< relay group id (0: none yet)
  uint32_t tag = 0;    ///< the ProcessGroup's transport tag (2 · (seq mod 2^20))
  int32_t arg = -1;    ///< broadcast root, send destination, recv source (group ranks)
  uint32_t pad = 0;
  uint64_t req = 0;    ///< request id chosen by the rank, echoed in the reply
  uint64_t bytes = 0;  ///< payload bytes that follow this frame
  uint64_t aux = 0;    ///< recv: bytes expected; new_group: number of members
};
static_assert(sizeof(Frame) == 48 && std::is_trivially_copyable_v<Frame>);

}  // namespace tpsp::comm::relay
