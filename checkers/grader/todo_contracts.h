// The contracts of the labs' TODOs, which a report quotes when a run stops at one. A skeleton holds only
// each TODO's name (TPSP_LAB_TODO("lab05 shard_linear_fc1")); the contract is the TODO comment of the
// engine's lab file, collected into lab_todos.json by tools/strip_solutions.py --contracts at build time
// (shipped in a learner copy), so what the checker quotes is never the learner's editable text.
#pragma once

#include <string>

namespace tpsp::checkers {

/// The contract of TODO `what` ("lab05 shard_linear_fc1"), or "" when the table (the build's
/// lab_todos.json) is missing or has no such TODO.
std::string todo_contract(const std::string& what);

/// A run stopped at a TODO: "not implemented yet: <what>: <contract> (<where>)" from the rank's
/// NotImplemented message; the message itself when the contract is unknown (a skeleton made before the
/// contracts moved out of it carries its own).
std::string todo_report(const std::string& message);

}  // namespace tpsp::checkers
