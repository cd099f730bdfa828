// A rank's inputs asked of the relay (checkers/inputs.h, checkers/input_server.h): the rank program under
// ./check's relay and ./grade's witness has no seed of the inputs, only what the relay gives it.
#pragma once

#include <chrono>
#include <memory>

#include "checkers/inputs.h"
#include "engine/comm/relay/relay_backend.h"

namespace tpsp::checkers {

/// The inputs of TP rank `tp_rank` of `tp` ranks, each asked of the relay behind `relay` (a group's
/// backend; it must outlive the source) within `timeout`. Its draw() throws std::invalid_argument when
/// asked for another rank's of_rank input, and CommError with the relay's words when the relay refuses.
std::shared_ptr<const InputSource> relay_rank_source(comm::RelayBackend& relay, int tp_rank, int tp,
                                                     std::chrono::milliseconds timeout);

}  // namespace tpsp::checkers
