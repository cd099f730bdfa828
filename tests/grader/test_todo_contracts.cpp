// A skeleton's TODO holds only its name; the report quotes the contract from the build's lab_todos.json
// (tools/strip_solutions.py --contracts of the engine's lab files), never from the learner's file: every
// TODO of every skeleton has its contract there, a message is completed with it, and a message that
// carries its own (a skeleton made before) or names an unknown TODO is left as it is.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "checkers/grader/todo_contracts.h"

using namespace tpsp::checkers;
namespace fs = std::filesystem;

TEST_CASE("grader: every skeleton TODO names its task only, and its contract is in lab_todos.json") {
  const std::regex call("TPSP_LAB_TODO\\(\"([^\"]*)\"\\)");
  int n = 0;
  for (const auto& lab : fs::directory_iterator(fs::path(TPSP_SOURCE_DIR) / "labs")) {
    if (!lab.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(lab.path())) {
      if (f.path().extension() != ".cpp") continue;
      std::ifstream in(f.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string s = text.str();
      for (auto it = std::sregex_iterator(s.begin(), s.end(), call); it != std::sregex_iterator(); ++it) {
        const std::string what = (*it)[1];
        CAPTURE(f.path().string());
        CAPTURE(what);
        CHECK(what.find(':') == std::string::npos);  // the name only: the contract is written once
        CHECK(todo_contract(what).size() > 40);
        ++n;
      }
    }
  }
  CHECK(n >= 48);
}

TEST_CASE("grader: a TODO's report quotes the engine's contract with the learner's file and line") {
  const std::string r = todo_report(
      "not implemented yet: lab05 shard_linear_fc1 (../../labs/lab05_llama_block/llama_tp.cpp:29)");
  CHECK_MESSAGE(
      r.starts_with("not implemented yet: lab05 shard_linear_fc1: whole [2·ffn, h] = [W_gate; W_up]"), r);
  CHECK_MESSAGE(r.ends_with(" (labs/lab05_llama_block/llama_tp.cpp:29)"), r);
  // A skeleton made before the contracts left the skeletons carries its own: left as it is.
  const std::string old = "not implemented yet: lab05 shard_linear_fc1: my text (labs/x.cpp:3)";
  CHECK(todo_report(old) == old);
  // An unknown TODO: the message as it is.
  const std::string unknown = "not implemented yet: lab09 nothing (labs/x.cpp:3)";
  CHECK(todo_report(unknown) == unknown);
}
