// attncert/error.hpp — the error types that map to exit codes.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace attncert {

/// Bad input or usage: malformed data, NaN/Inf, shape mismatch, fully masked rows under the
/// `error` policy, precision out of range, overflowing scores, input beyond a limit (README
/// "Limits on input").  The CLI prints the message on one line and exits with status 2.
class input_error : public std::runtime_error {
 public:
  explicit input_error(const std::string& what) : std::runtime_error(what) {}
};

/// The user interrupted the computation (SIGINT / SIGTERM, see deadline.hpp's
/// check_interrupt()).  Outputs staged so far are discarded; the CLI exits with status 130.
class interrupted : public std::runtime_error {
 public:
  explicit interrupted(const std::string& what = "interrupted") : std::runtime_error(what) {}
};

/// A broken invariant: a bug in attncert, not in the input.  Any other exception that is not
/// one of the above is treated the same way.  The CLI prints "internal error: ..." on one
/// line and exits with status 70 (EX_SOFTWARE).
class internal_error : public std::logic_error {
 public:
  explicit internal_error(const std::string& what) : std::logic_error(what) {}
};

/// `s` made safe for a one-line message: control characters and DEL (and, if `ascii_only`,
/// every byte >= 0x80) escaped as \xNN, cut after `max` characters with "...".  Use it on
/// every piece of input echoed in a message.
inline std::string one_line(std::string_view s, std::size_t max = 80, bool ascii_only = false) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f || (ascii_only && c >= 0x80)) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace attncert
