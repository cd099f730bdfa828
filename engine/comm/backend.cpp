// The key functions of the transport interfaces (backend.h): their vtables live here, in every build,
// whichever transports it has (Gloo, the relay, NCCL, the tests' threads).
#include "engine/comm/backend.h"

namespace tpsp::comm {

PendingP2P::~PendingP2P() = default;
Backend::~Backend() = default;

}  // namespace tpsp::comm
