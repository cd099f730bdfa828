#include "engine/lab_todo.h"

namespace tpsp {

void lab_todo(const char* what, const char* file, int line) {
  throw NotImplemented(std::string("not implemented yet: ") + what + " (" + file + ":" +
                       std::to_string(line) + ")");
}

LabTodo parse_lab_todo(const std::string& msg) {
  LabTodo t;
  const std::string head = "not implemented yet: ";
  const std::string rest = msg.rfind(head, 0) == 0 ? msg.substr(head.size()) : msg;
  t.lab = rest.substr(0, rest.find(' '));
  const auto open = rest.rfind(" (");
  const bool located = open != std::string::npos && !rest.empty() && rest.back() == ')';
  // "lab05 x (where)" (a skeleton's TODO names its task only), or "lab05 x: contract (where)".
  t.what = rest.substr(0, std::min(rest.find(": "), located ? open : std::string::npos));
  if (located) {
    t.where = rest.substr(open + 2, rest.size() - open - 3);
    for (const char* top : {"/labs/", "/engine/"})
      if (const auto p = t.where.rfind(top); p != std::string::npos) {
        t.where = t.where.substr(p + 1);
        break;
      }
  }
  return t;
}

}  // namespace tpsp
