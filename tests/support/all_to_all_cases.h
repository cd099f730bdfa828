// The uneven all_to_all every transport must carry, as one body the comm tests (threads backend, Gloo),
// the witness tests (the relay) and the GPU tests (host-staged cuda tensors, NCCL) all run: split sizes
// that differ per pair of ranks, pairs that exchange nothing, a rank that sends nothing at all.
#pragma once

#include <cstdint>

#include "engine/comm/process_group.h"

namespace tpsp::testing {

/// Rows rank `from` sends rank `to` in a world of n: (2·from + to + 1) mod 3, and 0 from the last rank
/// (n > 1), so some pairs exchange nothing and one rank receives without sending.
int64_t rows_between(int from, int to, int n);

/// Runs the uneven all_to_all on `pg` (blocking, then async; tensors [rows, 3] on `device`, element
/// (row k of what rank i sends j, column c) = 1000·i + 100·j + 10·k + c: exact in float32) and checks
/// every element of the output, its shape, and the call's record (bytes to and from each peer, the
/// bytes that left this rank). Throws std::runtime_error naming the first difference.
void check_uneven_all_to_all(comm::ProcessGroup& pg, Device device = Device::cpu);

}  // namespace tpsp::testing
