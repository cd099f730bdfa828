// The marker a lab skeleton leaves where a solution body was removed.
//
// Engine files owned by a lab wrap each solution body in
//     // TODO(labNN <what>): <what the body must compute and communicate>
//     // BEGIN SOLUTION
//     ...
//     // END SOLUTION
// tools/strip_solutions.py replaces the block by TPSP_LAB_TODO("labNN <what>"); the learner's
// skeleton (labs/labNN_*/) is that stripped file. Running a stripped function throws
// NotImplemented, which the checker reports as "not implemented yet" with the TODO's contract, quoted
// from the engine's comment (checkers/grader/todo_contracts.h), not from the learner's file.
#pragma once

#include <stdexcept>
#include <string>

namespace tpsp {

/// Thrown by a lab skeleton's unimplemented function; what() is the TODO's text.
class NotImplemented : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Throws NotImplemented("not implemented yet: " + what + " (" + file + ":" + line + ")").
[[noreturn]] void lab_todo(const char* what, const char* file, int line);

/// The parts of a NotImplemented message "not implemented yet: lab02 TransformerLayer forward
/// (/path/labs/lab02_transformer_block/transformer_layer.cpp:27)" (or, from a skeleton made before the
/// contracts left the skeletons, "...forward: <TODO text> (...)"): lab "lab02", what "lab02
/// TransformerLayer forward", where "labs/lab02_transformer_block/transformer_layer.cpp:27" (the path
/// from the project's labs/ or engine/ folder on). Fields are empty when the message has no such part.
struct LabTodo {
  std::string lab, what, where;
  /// "lab02 TransformerLayer forward (labs/lab02_transformer_block/transformer_layer.cpp:27)".
  std::string brief() const { return what + (where.empty() ? "" : " (" + where + ")"); }
};
LabTodo parse_lab_todo(const std::string& message);

}  // namespace tpsp

#define TPSP_LAB_TODO(what) ::tpsp::lab_todo(what, __FILE__, __LINE__)
