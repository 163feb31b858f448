// attncert/error.hpp — the error types that map to exit codes.
#pragma once

#include <stdexcept>
#include <string>

namespace attncert {

/// Bad input or usage: malformed data, NaN/Inf, shape mismatch, fully masked rows under the
/// `error` policy, precision out of range, overflowing scores.  The CLI prints the message
/// on one line and exits with status 2.
class input_error : public std::runtime_error {
 public:
  explicit input_error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace attncert
