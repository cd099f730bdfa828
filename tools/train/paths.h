// Where the tools find the project's files.
#pragma once

#include <string>

namespace tpsp::train {

/// The default training text, data/genesis_kjv.txt: in the source tree this build came from, or else
/// beside the executable (bin/../data or bin/../../data, for a tree moved after building). When
/// neither exists it returns the source-tree path, so that the error names where it looked first.
std::string default_text_path();

}  // namespace tpsp::train
