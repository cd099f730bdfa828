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

/// The result of collective `op` over `inputs` (group-rank order, every rank's payload; all of one size
/// except under broadcast, where only the root's counts):
///   all_reduce      float32 element-wise sum or max of the inputs, in rank order, to every rank;
///   reduce_scatter  chunk i of that reduction (n equal float32 chunks) to rank i;
///   all_gather      the inputs concatenated in rank order, to every rank;
///   all_to_all      chunk i of every input, in rank order, to rank i;
///   broadcast       the root's input to every rank (root: a group rank);
///   barrier         nothing.
/// Errors (result.error set, out empty): float32 buffers of a size not divisible by 4 (or by 4·n for
/// reduce_scatter), all_to_all inputs not divisible by n, a root outside the group, an op that is not a
/// collective, no inputs.
CollectiveResult carry_collective(comm::OpKind op, comm::ReduceOp reduce, int root,
                                  const std::vector<const Bytes*>& inputs);

}  // namespace tpsp::run
