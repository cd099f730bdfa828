#include "checkers/grader/hints.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tpsp::checkers {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

/// `s` without its leading blank lines and its trailing white space.
std::string trim_blank_lines(const std::string& s) {
  std::size_t start = 0;
  for (std::size_t eol;
       (eol = s.find('\n', start)) != std::string::npos && s.find_first_not_of(" \t\r", start) >= eol;)
    start = eol + 1;
  const auto last = s.find_last_not_of(" \t\r\n");
  return last == std::string::npos || last < start ? "" : s.substr(start, last + 1 - start);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Where the TODO of task `name` still stands in the learner's files of `lab` ("labs/.../x.cpp:29"),
/// or "" when no file holds its TPSP_LAB_TODO any more.
std::string todo_location(const fs::path& source_dir, const std::string& lab, const std::string& dir,
                          const std::vector<std::string>& files, const std::string& name) {
  // TPSP_LAB_TODO("lab05 name"), or from an older skeleton TPSP_LAB_TODO("lab05 name: contract").
  const std::string call = "TPSP_LAB_TODO(", text = "\"" + lab + " " + name;
  const auto names_it = [&](const std::string& line, std::size_t at) {
    return at + text.size() < line.size() && (line[at + text.size()] == '"' || line[at + text.size()] == ':');
  };
  for (const std::string& f : files) {
    const fs::path rel = fs::path(dir) / fs::path(f).filename();
    std::ifstream in(source_dir / rel);
    int n = 0, open_at = 0;  // open_at: the line of a TPSP_LAB_TODO( whose string starts on the next line
    for (std::string line; std::getline(in, line);) {
      ++n;
      if (const auto at = line.find(call + text); at != std::string::npos && names_it(line, at + call.size()))
        return fmt::format("{}:{}", rel.string(), n);
      // clang-format may break the line after the parenthesis: the string then opens the next line.
      if (const auto first = line.find_first_not_of(" \t"); open_at == n - 1 && first != std::string::npos &&
                                                            line.compare(first, text.size(), text) == 0 &&
                                                            names_it(line, first))
        return fmt::format("{}:{}", rel.string(), open_at);
      const std::size_t end = line.find_last_not_of(" \t");
      if (end != std::string::npos && end + 1 >= call.size() &&
          line.compare(end + 1 - call.size(), call.size(), call) == 0)
        open_at = n;
    }
  }
  return "";
}

std::string name_list(const std::vector<HintSection>& sections) {
  std::string out;
  for (const HintSection& s : sections) out += "\n  " + s.name;
  return out;
}

}  // namespace

std::vector<HintSection> parse_hints(const std::string& markdown) {
  std::vector<HintSection> out;
  std::istringstream in(markdown);
  bool fenced = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    if (!fenced && line.rfind("## ", 0) == 0) {
      out.push_back({trim_blank_lines(line.substr(3)), ""});
      continue;
    }
    if (!out.empty()) out.back().body += line + "\n";
  }
  for (HintSection& s : out) s.body = trim_blank_lines(s.body);
  return out;
}

std::vector<const HintSection*> match_hints(const std::vector<HintSection>& sections,
                                            const std::string& query) {
  const std::string q = lower(query);
  const std::vector<std::string> qw = words(q);
  std::vector<const HintSection*> out;
  for (const HintSection& s : sections)
    if (lower(s.name) == q) return {&s};
  for (const HintSection& s : sections) {
    const std::string n = lower(s.name);
    const std::vector<std::string> nw = words(n);
    bool by_words = !qw.empty() && qw.size() <= nw.size();
    for (std::size_t i = 0; by_words && i < qw.size(); ++i) by_words = nw[i].rfind(qw[i], 0) == 0;
    if (n.rfind(q, 0) == 0 || by_words) out.push_back(&s);
  }
  return out;
}

std::string hint_command(const std::string& lab, const std::string& todo_name) {
  return "./check " + lab + " --hint " + todo_name;
}

int run_hint(const std::string& source_dir, const std::string& lab, const std::string& query) {
  const fs::path root(source_dir);
  const json registry = json::parse(std::ifstream(root / "labs" / "labs.json"), nullptr, false);
  std::string dir;
  std::vector<std::string> files;
  if (registry.is_object())
    for (const json& l : registry.value("labs", json::array()))
      if (l.value("id", "") == lab) {
        dir = l.value("dir", "");
        for (const json& f : l.value("files", json::array())) files.push_back(f.get<std::string>());
      }
  if (dir.empty()) {
    std::fprintf(stderr, "./check --hint: %s is not a lab of %s\n", lab.c_str(),
                 (root / "labs" / "labs.json").c_str());
    return 2;
  }
  const fs::path rel = fs::path(dir) / "HINTS.md";
  if (!fs::exists(root / rel)) {
    std::fprintf(stderr, "./check --hint: %s has no hints (%s does not exist)\n", lab.c_str(), rel.c_str());
    return 2;
  }
  const std::vector<HintSection> sections = parse_hints(read_text(root / rel));
  if (query.empty()) {
    std::printf("%s: the tasks with a hint (%s). `%s` prints one; a unique prefix of its name is enough.\n",
                lab.c_str(), rel.c_str(), hint_command(lab, "NAME").c_str());
    std::size_t width = 0;
    for (const HintSection& s : sections) width = std::max(width, s.name.size());
    for (const HintSection& s : sections) {
      const std::string at = todo_location(root, lab, dir, files, s.name);
      std::printf("  %-*s  %s\n", static_cast<int>(width), s.name.c_str(),
                  at.empty() ? "written (its TODO is gone)" : ("TODO at " + at).c_str());
    }
    return 0;
  }
  const std::vector<const HintSection*> found = match_hints(sections, query);
  if (found.size() == 1) {
    std::printf("%s — hint for \"%s %s\" (%s)\n\n%s\n", lab.c_str(), lab.c_str(), found[0]->name.c_str(),
                rel.c_str(), found[0]->body.c_str());
    return 0;
  }
  if (found.empty()) {
    std::fprintf(stderr, "./check --hint: %s has no task named '%s'; its tasks are:%s\n", lab.c_str(),
                 query.c_str(), name_list(sections).c_str());
    return 2;
  }
  std::string names;
  for (const HintSection* s : found) names += "\n  " + s->name;
  std::fprintf(stderr, "./check --hint: '%s' matches %zu tasks of %s; name one of them:%s\n", query.c_str(),
               found.size(), lab.c_str(), names.c_str());
  return 2;
}

}  // namespace tpsp::checkers
