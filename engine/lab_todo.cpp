#include "engine/lab_todo.h"

namespace tpsp {

void lab_todo(const char* what, const char* file, int line) {
  throw NotImplemented(std::string("not implemented yet: ") + what + " (" + file + ":" + std::to_string(line) + ")");
}

}  // namespace tpsp
