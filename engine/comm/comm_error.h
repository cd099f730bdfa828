// Errors raised by the communication layer (engine/comm).
//
// Argument errors (bad shapes, a dim-0 extent not divisible by the group size) are tpsp::ShapeError
// and are raised before any communication. Everything that goes wrong *during* communication is a
// CommError: Gloo's own exceptions (gloo::Exception, gloo::IoException and gloo::EnforceNotMet,
// which is not a gloo::Exception) never leave engine/comm.
#pragma once

#include <stdexcept>
#include <string>

namespace tpsp::comm {

/// A communication failure: a peer died or closed its connections, the store failed, or the group is
/// already dead after an earlier failure. The message names this rank, the group and the call
/// (op, sequence number, label). After a CommError the group is dead: every later call raises.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A call did not complete within the group's timeout (a peer never joined it, or is stuck).
class CommTimeoutError : public CommError {
 public:
  using CommError::CommError;
};

/// Ranks of one group issued different calls at the same sequence number (fingerprint check).
/// The message names both sides, e.g. "rank 1 called all_gather #7 (4096 f32, group tp) where
/// rank 0 called reduce_scatter #7 (4096 f32, group tp)".
class CollectiveMismatchError : public CommError {
 public:
  using CommError::CommError;
};

}  // namespace tpsp::comm
