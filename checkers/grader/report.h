// What ./check prints and writes: the header with the seed, one line per failed run (every run with
// --verbose) with its problems, the summary line "N passed, N failed[, K need another lab's code]",
// the JSON report, the scenario list, and the refusal to grade a binary older than its sources.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "checkers/grader/grade.h"

namespace tpsp::checkers {

class Report {
 public:
  /// Prints the header "tpsp check — seed S (your code | engine's solution), backend B".
  Report(uint64_t seed, bool solution, std::string binary, std::string backend, std::vector<std::string> labs,
         bool verbose);
  /// Prints the lab's name; returns false (and counts a failure) when its rank program `bin` is not built.
  bool begin_lab(const std::string& lab, const std::string& bin);
  /// Prints and records one graded run whose dumps are in `dir`.
  void add(const GradeResult& g, const std::string& dir);
  int runs() const { return runs_; }
  int failed() const { return failed_; }
  /// Prints `line` under the lab's name now; counts nothing (the JSON has each run's "host_code").
  void lab_note(const std::string& line);
  /// A line printed just above the summary line (and kept as "notes" in the JSON); counts nothing.
  void add_note(const std::string& line) { notes_.push_back(line); }
  /// Writes the JSON report (seed, source, backend, labs, counts, one object per run); false on error.
  bool write_json(const std::string& path) const;
  /// Prints the rerun hint and the summary line; returns the exit status (0 only if every run passed).
  int finish() const;

 private:
  std::string color(const char* code, const std::string& s) const;
  uint64_t seed_;
  bool solution_;
  std::string binary_, backend_;
  std::vector<std::string> labs_;
  bool verbose_, tty_;
  int runs_ = 0, passed_ = 0, failed_ = 0, todo_ = 0, needs_ = 0;
  std::vector<std::string> notes_;
  std::set<std::string> shown_;  // each TODO / "needs" message is printed once
  nlohmann::json results_ = nlohmann::json::array();
};

/// Prints every lab's scenarios (./check --list).
void print_scenario_list();

/// "" when every learner source that goes into the rank programs of `labs` is older than its
/// program, else the message naming the newer files and the make command (from lab_sources.json,
/// written by CMake beside bin/). A missing manifest or program is not this check's concern.
std::string stale_sources(const std::vector<std::string>& labs, const std::string& bin_dir);

}  // namespace tpsp::checkers
