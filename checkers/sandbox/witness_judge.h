// Judging a confined launch's communication records against the witness relay's log
// (launch/relay_server.h): every call a rank's result.json lists must be one the relay carried for that rank,
// with the same op, byte count, reduction and peer, in the same order per group, and the relay must
// have carried nothing the record leaves out (issue 13: a record written by the rank's own code).
#pragma once

#include <string>
#include <vector>

#include "checkers/grader/grade.h"

namespace tpsp::checkers {

/// The witness's verdict on one run: the differences between the ranks' records and what the relay
/// carried (empty: the record matched).
using WitnessVerdict = std::vector<std::string>;

/// After a confined launch of `runs` (its k-th run is the relay's world ctx k): compares every rank's
/// DIR/rank<w>/result.json "calls" with the relay's log `relay_log`; one verdict per run, in runs' order.
/// A run without a result.json on some rank is judged on the ranks that have one; a missing log is a
/// problem of every run. Never throws.
std::vector<WitnessVerdict> judge_witness(const std::string& relay_log,
                                          const std::vector<const PlannedRun*>& runs);

/// The report's paragraph for a verdict with problems, naming the first difference per rank; "" for a
/// matched record.
std::string witness_problem(const WitnessVerdict& verdict);

}  // namespace tpsp::checkers
