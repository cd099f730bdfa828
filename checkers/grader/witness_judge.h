// Judging a confined launch's communication records against the witness relay's log
// (launch/relay_server.h): every call a rank's result.json lists must be one the relay carried for that rank,
// with the same op, byte count, reduction and peer, in the same order per group, and the relay must
// have carried nothing the record leaves out (issue 13: a record written by the rank's own code).
#pragma once

#include <string>
#include <vector>

#include "checkers/grader/launch.h"

namespace tpsp::checkers {

/// After a confined launch of `runs` (its k-th run is the relay's world ctx k): compares every rank's
/// DIR/rank<w>/result.json "calls" with the relay's log `relay_log` and writes DIR.witness.json
/// ({"problems": [...]}, empty when the record matched) beside each run's DIR. A run without a
/// result.json on some rank is judged on the ranks that have one. Never throws.
void judge_witness(const std::string& relay_log, const std::vector<const PlannedRun*>& runs);

/// The witness's verdict on the run dumped in `dir`: "" when its record matched the relay's log or when
/// the run was not confined; else one paragraph naming the first difference per rank. A confined run
/// whose DIR.witness.json is missing is a problem too (require_witness).
std::string witness_problem(const std::string& dir);

/// From now on, every run graded must have a witness verdict (./grade's confined runs).
void require_witness();

}  // namespace tpsp::checkers
