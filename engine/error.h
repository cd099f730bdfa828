// Error reporting for tpsp: every rule violation raises with a message that names the rule and the values.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace tpsp {

/// Raised when an argument breaks a documented rule (shapes, divisibility, id ranges).
/// The message names the rule and the offending values, e.g. "s=3 is not divisible by tp=2".
class ShapeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Raised when a numerical invariant breaks at run time (e.g. NaN reaching the loss).
class NumericError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
/// Concatenates any streamable values into one string (used by TPSP_CHECK).
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace tpsp

/// TPSP_CHECK(cond, parts...): throws tpsp::ShapeError("<parts...>") when cond is false.
#define TPSP_CHECK(cond, ...)                                                \
  do {                                                                       \
    if (!(cond)) throw ::tpsp::ShapeError(::tpsp::detail::cat(__VA_ARGS__)); \
  } while (0)
