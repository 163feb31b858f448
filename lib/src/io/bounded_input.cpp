// lib/src/io/bounded_input.cpp — input limits and the bounded reader: see attncert/io/bounded_input.hpp.
#include "attncert/io/bounded_input.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <system_error>

#include "attncert/error.hpp"
#include "attncert/field.hpp"

namespace attncert::io {

namespace {
std::atomic<std::size_t> g_max_input_bytes{default_max_input_bytes};

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw input_error(one_line(path, 4096) + ": " + problem);
}

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Length of the JSON number token at the start of `s` (RFC 8259 grammar:
// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?), 0 if there is none; `is_float` tells
// whether it has a fraction or an exponent.
std::size_t json_number_length(std::string_view s, bool& is_float) {
  std::size_t i = 0;
  is_float = false;
  if (i < s.size() && s[i] == '-') ++i;
  if (i >= s.size() || !is_digit(s[i])) return 0;
  if (s[i] == '0') ++i;
  else
    while (i < s.size() && is_digit(s[i])) ++i;
  if (i < s.size() && s[i] == '.') {
    if (i + 1 >= s.size() || !is_digit(s[i + 1])) return 0;
    is_float = true;
    i += 2;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    std::size_t k = i + 1;
    if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
    if (k >= s.size() || !is_digit(s[k])) return 0;
    is_float = true;
    i = k;
    while (i < s.size() && is_digit(s[i])) ++i;
  }
  return i;
}

bool fits_json_integer(std::string_view tok) {
  const char* b = tok.data();
  const char* e = tok.data() + tok.size();
  if (tok.front() == '-') {
    std::int64_t v = 0;
    return std::from_chars(b, e, v).ec == std::errc();
  }
  std::uint64_t v = 0;
  return std::from_chars(b, e, v).ec == std::errc();
}
}  // namespace

std::size_t max_input_bytes() { return g_max_input_bytes.load(std::memory_order_relaxed); }

void set_max_input_bytes(std::size_t bytes) {
  if (bytes == 0) throw input_error(field("max_input_bytes") + " must be at least 1");
  g_max_input_bytes.store(bytes, std::memory_order_relaxed);
}

std::string read_file_bounded(const std::string& path, std::size_t limit) {
  // O_NONBLOCK: opening a FIFO without a writer must not hang; cleared again right after.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(path, "cannot open: " + errno_text(errno));
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  std::string bytes;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      fail(path, "cannot read: " + errno_text(err));
    }
    if (n == 0) break;
    if (static_cast<std::size_t>(n) > limit - bytes.size()) {
      ::close(fd);
      fail(path, "larger than the input limit of " + std::to_string(limit) + " bytes (raise it with " + field("max_input_bytes") + ")");
    }
    bytes.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return bytes;
}

std::string quote_huge_number_literals(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {  // copy a string literal as it is (escapes included)
      std::size_t k = i + 1;
      while (k < text.size() && text[k] != '"') k += text[k] == '\\' ? 2 : 1;
      k = std::min(k + 1, text.size());
      out.append(text.substr(i, k - i));
      i = k;
    } else if (c == '-' || is_digit(c)) {
      bool is_float = false;
      const std::size_t len = json_number_length(text.substr(i), is_float);
      if (len == 0) {  // malformed: leave it to the parser
        out += c;
        ++i;
        continue;
      }
      const std::string_view tok = text.substr(i, len);
      // nlohmann reads this token with strtod; if that overflows, it stops with "number overflow"
      if ((is_float || !fits_json_integer(tok)) && !std::isfinite(std::strtod(std::string(tok).c_str(), nullptr))) {
        out += '"';
        out.append(tok);
        out += '"';
      } else {
        out.append(tok);
      }
      i += len;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

}  // namespace attncert::io
