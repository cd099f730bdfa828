// ./check's side of "predict the communication" (checkers/predict/predict.h): where a lab's
// prediction file is, `./check labNN --predict` (the comparison, explained line by line), and the
// one line a normal check adds to its summary. A prediction never changes a check's pass/fail.
#pragma once

#include <string>
#include <vector>

namespace tpsp::checkers {

/// The prediction file of `lab`: <source dir>/<the lab's dir in labs/labs.json>/prediction.txt;
/// "" when labs.json cannot be read or does not name the lab.
std::string prediction_path(const std::string& source_dir, const std::string& lab);

/// ./check --predict: for each lab prints the step, then each line ✓ or a numbered, explained
/// difference, and "prediction labNN: <summary>". `file` (when not empty, one lab only) replaces
/// the lab's prediction.txt. Returns 0 when every prediction is right, 1 when one differs, is not
/// filled in or has a line to fix, 2 when a file cannot be read.
int check_predictions(const std::vector<std::string>& labs, const std::string& source_dir,
                      const std::string& file);

/// The summary line of `lab`'s prediction for a normal check: "prediction lab01: 2 of 2 calls right",
/// "... not filled in yet (labs/…/prediction.txt; ./check lab01 --predict)"; "" when the lab has no
/// step or no file.
std::string prediction_summary(const std::string& source_dir, const std::string& lab);

}  // namespace tpsp::checkers
