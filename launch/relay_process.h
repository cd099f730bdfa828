// The relay of one launch in a child process: a socket pair per rank, the relay (relay_server.h) in a
// forked child holding one end of each, the ranks' ends to be handed over as their descriptor 3
// (RankSpec::pass_fd, with TPSP_RELAY_FD=3 in their environment: engine/comm/env.h then picks
// RelayBackend). Used by tpsp-run --backend relay and by ./check's and ./grade's launches.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "launch/relay_server.h"

namespace tpsp::run {

class RelayProcess {
 public:
  RelayProcess() = default;
  RelayProcess(const RelayProcess&) = delete;
  RelayProcess& operator=(const RelayProcess&) = delete;
  /// Stops a relay still running (finish()).
  ~RelayProcess();

  /// Starts the relay for `world` ranks, writing the witness record to `log` ("" = none) and serving the
  /// scenario inputs with `inputs` (none when empty). False (nothing started, errno set) when a socket
  /// pair or the fork fails.
  bool start(int world, const std::string& log, const InputServer& inputs = {});
  /// World rank r's end of its socket, to be passed as its descriptor 3; -1 before start().
  int rank_end(int r) const;
  /// Closes this process's copies of the ranks' ends, once the launcher's children hold them (the relay
  /// sees a rank's socket close only when every copy is closed).
  void release_rank_ends();
  /// After the launch: the relay ends by itself once every rank's socket is closed; one that something
  /// left running still holds is stopped after a second (every call the ranks made is in its log by
  /// then: a line is written before the call is carried). Idempotent.
  void finish();

 private:
  pid_t pid_ = -1;
  std::vector<int> rank_ends_;
};

}  // namespace tpsp::run
