// The relay's collectives as arithmetic on bytes, apart from its sockets (relay_server.cpp matches the
// ranks' requests, then asks this what each rank gets back): tested on its own against the tests' threads
// backend (tests/support/local_backend.h) by tests/witness/test_relay_arithmetic.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/op.h"

namespace tpsp::run {

using Bytes = std::vector<unsigned char>;

/// What one collective returns to each rank of the group, or why it cannot be carried.
struct CollectiveResult {
  std::string error;  ///< "" or the reason ("an input not divisible into one chunk per rank")
  /// One per group rank; ranks that receive the same bytes share one buffer (all-reduce, all-gather,
  /// broadcast).
  std::vector<std::shared_ptr<const Bytes>> out;
};

/// An all_to_all request's split header (engine/comm/relay/protocol.h), read.
struct SplitHeader {
  std::vector<uint64_t> send;    ///< bytes to each group rank
  std::vector<uint64_t> recv;    ///< bytes expected from each group rank
  std::vector<uint64_t> offset;  ///< where the bytes to each rank start, after the header
};

/// Reads the split header of an all_to_all payload for a group of n ranks into h; "" or why it is
/// malformed (shorter than the header, a count over kMaxPayload, counts that do not add up to the bytes
/// that follow the header).
std::string read_header(const Bytes& payload, std::size_t n, SplitHeader& h);

/// The result of collective `op` over `inputs` (group-rank order, every rank's payload; all of one size
/// except under broadcast, where only the root's counts):
///   all_reduce      float32 element-wise sum or max of the inputs, in rank order, to every rank;
///   reduce_scatter  chunk i of that reduction (n equal float32 chunks) to rank i;
///   all_gather      the inputs concatenated in rank order, to every rank;
///   all_to_all      every input is a split header and the bytes it sends (comm/relay/protocol.h); rank j
///                   gets what each rank addressed to it, in rank order (equal or uneven splits);
///   broadcast       the root's input to every rank (root: a group rank);
///   barrier         nothing.
/// Errors (result.error set, out empty): a result larger than one relay frame carries (all_gather,
/// all_to_all: "rank 0 would receive 83886080 bytes, more than one relay frame carries (67108864
/// bytes)"), float32 buffers of a size not divisible by 4 (or by 4·n for
/// reduce_scatter), an all_to_all header that is malformed or disagrees with a peer's ("rank 0 sends 8
/// bytes to rank 1, which expects 4 bytes from rank 0"), a root outside the group, an op that is not a
/// collective, no inputs.
CollectiveResult carry_collective(comm::OpKind op, comm::ReduceOp reduce, int root,
                                  const std::vector<const Bytes*>& inputs);

}  // namespace tpsp::run
