// The relay: a star-topology transport in one process that moves every byte between the ranks itself
// (engine/comm/relay/protocol.h; the ranks' side is RelayBackend). Its uses: ./check's launches (the
// default transport); under ./grade the witness relay, which also writes each request down as it
// arrives, in a file the ranks cannot reach, so that the grader compares each rank's own record of its
// calls with what really crossed (checkers/sandbox/witness_judge.h: a record forged in the rank's memory
// no longer matches); and `tpsp-run --backend relay`, a transport for any rank program on a build or a
// machine without Gloo (slower for large tensors: every byte goes through one process).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace tpsp::run {

/// A rank's request for one of the scenario's inputs (protocol Kind::input): who asks, in which world
/// (`ctx`, as in the log), and the request's own words (`spec`, JSON; checkers/input_server.h reads it).
struct InputAsk {
  int ctx = 0;
  int rank = 0;  ///< world rank: the relay's own knowledge, never the request's
  std::string spec;
};
/// The relay's answer: the tensor's float32 bytes; or `error`, answered to the rank as a failed call (a
/// request the scenario's code got wrong); or `violation`, which cuts the rank off and fails the run (a
/// request for data this rank may not have).
struct InputAnswer {
  std::string bytes, error, violation;
};
/// Draws the inputs that a relay serves (checkers/input_server.h); empty: the relay serves none.
using InputServer = std::function<InputAnswer(const InputAsk&)>;

/// Serves the ranks of one launch: fds[w] is world rank w's end of its socket (the rank holds the
/// other end as descriptor 3). Returns when every socket is closed. With a `log_path` (empty: no log),
/// writes one JSON object per line to it (created or truncated, mode 0600), before it acts on the request:
///   {"ctx", "rank", "kind": "hello" | "collective" | "send" | "recv" | "new_group", "group", "group_rank",
///    "group_size", "op", "tag", "bytes", "reduce", "arg"}
/// ctx: the index of the world (one per init_from_env of every rank: a batch's k-th scenario is ctx k);
/// group: the group's name ("world", "tp", "dp", ...); bytes: what the rank handed over (recv: what it
/// asked for); arg: the broadcast root, send destination or recv source (group ranks), else -1.
/// A rank that breaks the protocol (a malformed frame, a group it is not in) gets a line
/// {"ctx", "rank", "violation": "..."} and its socket is closed. Mismatched calls (ranks calling different
/// collectives under one tag) are answered with an error on every rank of the call, in the words of the
/// ProcessGroup's fingerprint check ("collective mismatch in group tp: ...").
/// An input request (Kind::input) is answered by `inputs` and logged as {"ctx", "rank", "kind": "input",
/// "spec"}; with no `inputs` it is a violation.
/// Never throws: a log that cannot be written ends the relay (the grader then finds no witness).
void serve_relay(const std::vector<int>& fds, const std::string& log_path, const InputServer& inputs = {});

}  // namespace tpsp::run
