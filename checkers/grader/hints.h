// ./check labNN --hint [NAME]: the guided text of a lab's tasks, kept out of the TODOs and READMEs
// (which state each task's contract) in labs/<lab dir>/HINTS.md, one section "## <TODO name>" per
// TPSP_LAB_TODO("labNN <TODO name>: ...") of the lab's files. tools/check_hints.py keeps the two
// in step (ctest labs/hints_cover_every_todo).
#pragma once

#include <string>
#include <vector>

namespace tpsp::checkers {

/// One "## NAME" section of a HINTS.md: its name and its text up to the next "## " heading (headings
/// inside ``` fences do not count).
struct HintSection {
  std::string name, body;
};

/// The sections of a HINTS.md, in file order; the text before the first "## " heading is dropped.
std::vector<HintSection> parse_hints(const std::string& markdown);

/// The sections whose name matches `query`, case-insensitively: an exact match alone if there is one,
/// else every name that starts with the query or whose words start with the query's words in order
/// ("column back" matches "ColumnParallelLinear backward").
std::vector<const HintSection*> match_hints(const std::vector<HintSection>& sections,
                                            const std::string& query);

/// "./check lab01 --hint f forward": the command that prints the hint of the TODO "lab01 f forward".
std::string hint_command(const std::string& lab, const std::string& todo_name);

/// ./check LAB --hint [QUERY]: with an empty query, lists the lab's tasks (with whether each is still a
/// TODO in the learner's files under `source_dir`/labs/) and returns 0; else prints the matching
/// section and returns 0, or prints an error listing the valid names and returns 2 (no match, several
/// matches, no HINTS.md, a lab labs/labs.json does not declare).
int run_hint(const std::string& source_dir, const std::string& lab, const std::string& query);

}  // namespace tpsp::checkers
