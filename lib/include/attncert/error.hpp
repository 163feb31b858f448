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

/// `s` made safe for a one-line message: control characters and DEL escaped as \xNN, cut
/// after `max` characters with "...".  Use it on every piece of input echoed in a message.
inline std::string one_line(std::string_view s, std::size_t max = 80) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
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
