#include "tools/train/paths.h"

#include <filesystem>
#include <system_error>
#include <vector>

namespace fs = std::filesystem;

namespace tpsp::train {

std::string default_text_path() {
  const fs::path rel = fs::path("data") / "genesis_kjv.txt";
  const fs::path in_source = fs::path(TPSP_SOURCE_DIR) / rel;
  std::vector<fs::path> candidates{in_source};
  std::error_code ec;
  const fs::path exe = fs::canonical("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path().parent_path() / rel);
    candidates.push_back(exe.parent_path().parent_path().parent_path() / rel);
  }
  for (const fs::path& p : candidates)
    if (fs::is_regular_file(p, ec)) return p.string();
  return in_source.string();
}

}  // namespace tpsp::train
