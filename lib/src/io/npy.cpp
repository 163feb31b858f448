// lib/src/io/npy.cpp — the `.npy` codec (NumPy NEP 1), see attncert/io/npy.hpp.
//
// Reading is strict and bounds-checked: the header is parsed as the subset of Python literal
// syntax that ast.literal_eval accepts for str, int, bool, None, tuple, list and dict
// (quotes of either kind, string prefixes u/r, escapes, implicit string concatenation,
// comments, trailing commas, decimal/hex/octal/binary ints with underscores, one unary
// sign, and in versions 1.0/2.0 the Python 2 'L' suffix that NumPy filters out).  Every
// size is checked against the bytes present before anything is allocated.
#include "attncert/io/npy.hpp"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <system_error>

#include "attncert/error.hpp"
#include "attncert/io/atomic_file.hpp"
#include "attncert/io/bounded_input.hpp"

namespace attncert::io {
namespace {

// ---- messages ------------------------------------------------------------------------

[[noreturn]] void fail(const std::string& name, const std::string& problem) {
  throw input_error(one_line(name, 4096) + ": " + problem);
}

// Python repr of a tuple of sizes: (), (3,), (2, 3).
std::string shape_text(const std::vector<std::size_t>& dims) {
  std::string s = "(";
  for (std::size_t k = 0; k < dims.size(); ++k) {
    if (k) s += ", ";
    s += std::to_string(dims[k]);
  }
  if (dims.size() == 1) s += ",";
  return s + ")";
}

// The C-order multi-index of flat index `flat` in `shape`, as a Python tuple.
std::string index_text(std::size_t flat, const std::vector<std::size_t>& shape) {
  std::vector<std::size_t> idx(shape.size(), 0);
  for (std::size_t k = shape.size(); k-- > 0;) {
    idx[k] = flat % shape[k];
    flat /= shape[k];
  }
  return shape_text(idx);
}

// Shortest decimal that reads back as `v`.
std::string number_text(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

[[noreturn]] void shape_overflow(const std::string& name, const std::string& shape, bool has_zero) {
  fail(name, "shape overflow: " + (has_zero ? "the nonzero dimensions of shape " + shape + " multiply to"
                                            : "shape " + shape + " has") +
                 " more than 2^40 elements");
}

// Number of elements of `shape`.  The product of its nonzero dimensions must not exceed
// max_npy_elements (so no stride computed from the shape can overflow, even when another
// dimension is 0).
std::size_t element_count(const std::vector<std::size_t>& shape, const std::string& name) {
  std::size_t nonzero = 1;
  bool has_zero = false;
  for (std::size_t d : shape) has_zero |= d == 0;
  for (std::size_t d : shape) {
    if (d == 0) continue;
    if (d > max_npy_elements / nonzero) shape_overflow(name, shape_text(shape), has_zero);
    nonzero *= d;
  }
  return has_zero ? 0 : nonzero;
}

// ---- Python literal parser -----------------------------------------------------------------

struct pyval {
  enum class kind { str, integer, boolean, none, tuple, list, dict, other };
  kind k = kind::none;
  std::string s;                  // str: the value (UTF-8)
  bool negative = false;          // integer: sign
  bool huge = false;              // integer: magnitude >= 2^64
  std::uint64_t magnitude = 0;    // integer: |value| unless huge
  bool b = false;                 // boolean
  std::vector<pyval> items;       // tuple/list; dict: key, value, key, value, ...
  std::size_t begin = 0, end = 0; // source span
};

struct syntax_error {
  std::string what;
  std::size_t offset;
};

class literal_parser {
 public:
  literal_parser(std::string_view text, bool latin1, bool python2_longs)
      : t_(text), latin1_(latin1), longs_(python2_longs) {}

  pyval parse_all() {
    skip_ws();
    if (p_ >= t_.size()) throw syntax_error{"empty header", p_};
    pyval v = value();
    skip_ws();
    if (p_ < t_.size()) err("unexpected " + quote_char() + " after the literal");
    return v;
  }

 private:
  static constexpr int max_depth = 32;
  std::string_view t_;
  bool latin1_;
  bool longs_;
  std::size_t p_ = 0;
  int depth_ = 0;

  [[noreturn]] void err(const std::string& what) const { throw syntax_error{what, p_}; }
  bool at_end() const { return p_ >= t_.size(); }
  char peek(std::size_t ahead = 0) const { return p_ + ahead < t_.size() ? t_[p_ + ahead] : '\0'; }
  std::string quote_char() const {
    return at_end() ? std::string("end of header") : "'" + one_line(t_.substr(p_, 1), 80, true) + "'";
  }
  static bool ident_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           static_cast<unsigned char>(c) >= 0x80;
  }

  void skip_ws() {
    while (!at_end()) {
      const char c = t_[p_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f') {
        ++p_;
      } else if (c == '#') {
        while (!at_end() && t_[p_] != '\n' && t_[p_] != '\r') ++p_;
      } else if (c == '\\' && (peek(1) == '\n' || peek(1) == '\r')) {
        p_ += 2;
      } else {
        break;
      }
    }
  }

  pyval value() {
    const std::size_t start = p_;
    pyval v;
    const char c = peek();
    if (c == '(' || c == '[' || c == '{') {
      if (++depth_ > max_depth) err("nesting deeper than 32 levels");
      v = c == '(' ? paren() : c == '[' ? list() : dict();
      --depth_;
    } else if (c == '\'' || c == '"' || ((c == 'u' || c == 'U' || c == 'r' || c == 'R') &&
                                         (peek(1) == '\'' || peek(1) == '"'))) {
      v = strings();
    } else if (c == '+' || c == '-') {
      ++p_;
      skip_ws();
      const char d = peek();
      if (!((d >= '0' && d <= '9') || (d == '.' && peek(1) >= '0' && peek(1) <= '9')))
        err("a sign must be followed by a number");
      v = number();
      if (c == '-') v.negative = !v.negative;
    } else if ((c >= '0' && c <= '9') || (c == '.' && peek(1) >= '0' && peek(1) <= '9')) {
      v = number();
    } else if (!at_end() && ident_char(c)) {
      const std::size_t b = p_;
      while (!at_end() && ident_char(t_[p_])) ++p_;
      const std::string_view word = t_.substr(b, p_ - b);
      if (word == "True" || word == "False") {
        v.k = pyval::kind::boolean;
        v.b = word == "True";
      } else if (word == "None") {
        v.k = pyval::kind::none;
      } else {
        p_ = b;
        err("unexpected name '" + one_line(word, 40, true) + "'");
      }
    } else {
      err("unexpected " + quote_char());
    }
    v.begin = start;
    v.end = p_;
    return v;
  }

  // '(' : empty tuple, parenthesized value, or tuple.
  pyval paren() {
    const std::size_t open = p_++;
    skip_ws();
    if (peek() == ')') {
      ++p_;
      pyval v;
      v.k = pyval::kind::tuple;
      return v;
    }
    pyval first = value();
    skip_ws();
    if (peek() == ')') {
      ++p_;
      first.begin = open;
      first.end = p_;
      return first;
    }
    if (peek() != ',') err("expected ',' or ')' but found " + quote_char());
    pyval v;
    v.k = pyval::kind::tuple;
    v.items.push_back(std::move(first));
    sequence_rest(v, ')');
    return v;
  }

  pyval list() {
    ++p_;
    pyval v;
    v.k = pyval::kind::list;
    skip_ws();
    if (peek() == ']') {
      ++p_;
      return v;
    }
    v.items.push_back(value());
    skip_ws();
    if (peek() != ',' && peek() != ']') err("expected ',' or ']' but found " + quote_char());
    sequence_rest(v, ']');
    return v;
  }

  // After the first item: (',' item)* ','? close
  void sequence_rest(pyval& v, char close) {
    for (;;) {
      skip_ws();
      if (peek() == close) {
        ++p_;
        return;
      }
      if (peek() != ',') err(std::string("expected ',' or '") + close + "' but found " + quote_char());
      ++p_;
      skip_ws();
      if (peek() == close) {
        ++p_;
        return;
      }
      v.items.push_back(value());
    }
  }

  pyval dict() {
    ++p_;
    pyval v;
    v.k = pyval::kind::dict;
    for (;;) {
      skip_ws();
      if (peek() == '}') {
        ++p_;
        return v;
      }
      v.items.push_back(value());
      skip_ws();
      if (peek() != ':') err("expected ':' but found " + quote_char());
      ++p_;
      skip_ws();
      v.items.push_back(value());
      skip_ws();
      if (peek() == ',') {
        ++p_;
      } else if (peek() != '}') {
        err("expected ',' or '}' but found " + quote_char());
      }
    }
  }

  static void put_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // One or more adjacent string literals (Python concatenates them).
  pyval strings() {
    pyval v;
    v.k = pyval::kind::str;
    for (;;) {
      one_string(v.s);
      const std::size_t save = p_;
      skip_ws();
      const char c = peek();
      if (c == '\'' || c == '"' ||
          ((c == 'u' || c == 'U' || c == 'r' || c == 'R') && (peek(1) == '\'' || peek(1) == '"')))
        continue;
      p_ = save;
      return v;
    }
  }

  void one_string(std::string& out) {
    bool raw = false;
    if (peek() == 'r' || peek() == 'R') {
      raw = true;
      ++p_;
    } else if (peek() == 'u' || peek() == 'U') {
      ++p_;
    }
    const char q = t_[p_++];
    if (peek() == q && peek(1) == q) err("triple-quoted strings are not supported");
    for (;;) {
      if (at_end()) err("unterminated string");
      const char c = t_[p_];
      if (c == q) {
        ++p_;
        return;
      }
      if (c == '\n' || c == '\r') err("unterminated string");
      if (c != '\\') {
        raw_char(out, c);
        ++p_;
        continue;
      }
      // backslash
      if (p_ + 1 >= t_.size()) err("unterminated string");
      const char e = t_[p_ + 1];
      if (raw) {  // a raw string keeps the backslash; \q and \\ do not end the string
        out += '\\';
        if (e == '\n' || e == '\r') err("unterminated string");
        raw_char(out, e);
        p_ += 2;
        continue;
      }
      p_ += 2;
      switch (e) {
        case '\n': break;  // line continuation
        case '\r':
          if (peek() == '\n') ++p_;
          break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': put_utf8(out, hex_escape(2)); break;
        case 'u': put_utf8(out, hex_escape(4)); break;
        case 'U': put_utf8(out, hex_escape(8)); break;
        default:
          if (e >= '0' && e <= '7') {  // up to three octal digits
            std::uint32_t cp = static_cast<std::uint32_t>(e - '0');
            for (int k = 0; k < 2 && peek() >= '0' && peek() <= '7'; ++k, ++p_)
              cp = cp * 8 + static_cast<std::uint32_t>(peek() - '0');
            put_utf8(out, cp);
          } else {  // unknown escape: Python keeps the backslash
            out += '\\';
            --p_;
          }
      }
    }
  }

  void raw_char(std::string& out, char c) const {
    const auto u = static_cast<unsigned char>(c);
    if (latin1_ && u >= 0x80)
      put_utf8(out, u);
    else
      out += c;
  }

  std::uint32_t hex_escape(int n) {
    std::uint32_t cp = 0;
    for (int k = 0; k < n; ++k) {
      const int d = hex_digit(peek());
      if (d < 0) err("truncated \\x, \\u or \\U escape");
      cp = cp * 16 + static_cast<std::uint32_t>(d);
      ++p_;
    }
    if (cp > 0x10ffff) err("escape outside the Unicode range");
    return cp;
  }

  // Digits in `base` with single underscores between them; accumulates into v.
  void digits(pyval& v, unsigned base, bool underscore_first) {
    bool any = false;
    bool need_digit = underscore_first && peek() == '_';
    if (need_digit) ++p_;
    for (;;) {
      const int d = hex_digit(peek());
      if (d >= 0 && static_cast<unsigned>(d) < base) {
        ++p_;
        any = true;
        need_digit = false;
        if (!v.huge) {
          if (v.magnitude > (std::numeric_limits<std::uint64_t>::max() - static_cast<unsigned>(d)) / base)
            v.huge = true;
          else
            v.magnitude = v.magnitude * base + static_cast<unsigned>(d);
        }
      } else if (peek() == '_' && any && !need_digit) {
        ++p_;
        need_digit = true;
      } else {
        break;
      }
    }
    if (!any || need_digit) err("invalid number");
  }

  pyval number() {
    pyval v;
    v.k = pyval::kind::integer;
    const std::size_t start = p_;
    const char c1 = peek(1);
    if (peek() == '0' && (c1 == 'x' || c1 == 'X' || c1 == 'o' || c1 == 'O' || c1 == 'b' || c1 == 'B')) {
      p_ += 2;
      digits(v, c1 == 'x' || c1 == 'X' ? 16 : c1 == 'o' || c1 == 'O' ? 8 : 2, true);
    } else {
      bool is_float = false;
      if (peek() != '.') digits(v, 10, false);
      if (peek() == '.') {
        is_float = true;
        ++p_;
        if (peek() >= '0' && peek() <= '9') {
          pyval frac;
          digits(frac, 10, false);
        }
      }
      if (peek() == 'e' || peek() == 'E') {
        is_float = true;
        ++p_;
        if (peek() == '+' || peek() == '-') ++p_;
        pyval exp;
        digits(exp, 10, false);
      }
      if (peek() == 'j' || peek() == 'J') {
        is_float = true;
        ++p_;
      }
      if (is_float) {
        v.k = pyval::kind::other;
      } else if (t_[start] == '0') {  // Python 3 forbids leading zeros: only 0, 00, 0_0 ...
        for (std::size_t i = start; i < p_; ++i)
          if (t_[i] != '0' && t_[i] != '_') {
            p_ = start;
            err("leading zeros in a decimal integer");
          }
      }
    }
    if (longs_ && v.k == pyval::kind::integer && peek() == 'L') ++p_;  // Python 2 long
    if (!at_end() && ident_char(t_[p_])) err("invalid number");
    return v;
  }
};

// Strict UTF-8 validation (what Python's bytes.decode('utf8') accepts).
bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n;
    std::uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 1, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i <= n) return false;
    for (std::size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += n + 1;
  }
  return true;
}

// ---- header ----------------------------------------------------------------------------

struct header_info {
  dtype type = dtype::f8;
  bool big_endian = false;
  bool fortran = false;
  std::vector<std::size_t> shape;
};

std::size_t item_size(dtype t) {
  switch (t) {
    case dtype::f2: return 2;
    case dtype::f4: return 4;
    case dtype::i4: return 4;
    case dtype::b1: return 1;
    case dtype::u1: return 1;
    default: return 8;
  }
}

const char* supported_dtypes = "supported: <f2 <f4 <f8 <i4 <i8 |u1 |b1 and big-endian >f2 >f4 >f8 >i4 >i8";

header_info interpret_header(std::string_view text, int major, const std::string& name) {
  pyval d;
  try {
    d = literal_parser(text, major < 3, major < 3).parse_all();
  } catch (const syntax_error& e) {
    fail(name, "header is not a Python dict literal: " + e.what + " at offset " +
                   std::to_string(e.offset));
  }
  auto src = [&](const pyval& v) { return one_line(text.substr(v.begin, v.end - v.begin), 60, true); };
  if (d.k != pyval::kind::dict) fail(name, "header is not a dict: " + src(d));

  const pyval* descr = nullptr;
  const pyval* fortran = nullptr;
  const pyval* shape = nullptr;
  for (std::size_t i = 0; i + 1 < d.items.size(); i += 2) {
    const pyval& key = d.items[i];
    const pyval* value = &d.items[i + 1];
    const pyval** slot = nullptr;
    if (key.k == pyval::kind::str) {
      if (key.s == "descr") slot = &descr;
      if (key.s == "fortran_order") slot = &fortran;
      if (key.s == "shape") slot = &shape;
    }
    if (!slot) fail(name, "header has unexpected key " + src(key));
    if (*slot) fail(name, "header has duplicate key " + src(key));
    *slot = value;
  }
  if (!descr) fail(name, "header is missing key 'descr'");
  if (!fortran) fail(name, "header is missing key 'fortran_order'");
  if (!shape) fail(name, "header is missing key 'shape'");

  header_info h;
  // descr
  if (descr->k == pyval::kind::list)
    fail(name, "unsupported dtype " + src(*descr) + " (structured dtypes are not supported)");
  if (descr->k != pyval::kind::str)
    fail(name, "bad header value: 'descr' must be a dtype string, got " + src(*descr));
  {
    std::string_view s = descr->s;
    char order = '=';
    if (!s.empty() && (s[0] == '<' || s[0] == '>' || s[0] == '=' || s[0] == '|')) {
      order = s[0];
      s.remove_prefix(1);
    }
    bool ok = true;
    if (s == "f2") h.type = dtype::f2;
    else if (s == "f4") h.type = dtype::f4;
    else if (s == "f8") h.type = dtype::f8;
    else if (s == "i4") h.type = dtype::i4;
    else if (s == "i8") h.type = dtype::i8;
    else if (s == "b1" || s == "?") h.type = dtype::b1;
    else if (s == "u1") h.type = dtype::u1;
    else ok = false;
    if (!ok) fail(name, "unsupported dtype " + src(*descr) + " (" + supported_dtypes + ")");
    // '=' and '|' (and no prefix) mean native order, as np.dtype reads them.
    h.big_endian = order == '>' || (order != '<' && std::endian::native == std::endian::big);
  }
  // fortran_order
  if (fortran->k != pyval::kind::boolean)
    fail(name, "bad header value: 'fortran_order' must be True or False, got " + src(*fortran));
  h.fortran = fortran->b;
  // shape
  if (shape->k != pyval::kind::tuple)
    fail(name, "bad header value: 'shape' must be a tuple of non-negative integers, got " + src(*shape));
  for (const pyval& dim : shape->items) {
    if (dim.k != pyval::kind::integer || (dim.negative && (dim.magnitude != 0 || dim.huge)))
      fail(name, "bad header value: 'shape' must be a tuple of non-negative integers, got " + src(*shape));
    if (dim.huge || dim.magnitude > max_npy_elements) {
      bool has_zero = false;
      for (const pyval& other : shape->items) has_zero |= other.k == pyval::kind::integer && !other.huge &&
                                                          other.magnitude == 0;
      shape_overflow(name, src(*shape), has_zero);
    }
    h.shape.push_back(static_cast<std::size_t>(dim.magnitude));
  }
  return h;
}

// ---- element codecs ----------------------------------------------------------------------

std::uint64_t load(const unsigned char* p, std::size_t n, bool big) {
  std::uint64_t v = 0;
  for (std::size_t k = 0; k < n; ++k) v |= std::uint64_t{p[big ? n - 1 - k : k]} << (8 * k);
  return v;
}

void store_le(std::string& out, std::uint64_t v, std::size_t n) {
  for (std::size_t k = 0; k < n; ++k) out += static_cast<char>((v >> (8 * k)) & 0xff);
}

// IEEE binary16 bits -> double (exact; Inf and NaN map to the double Inf and NaN).
double half_to_double(std::uint16_t h) {
  const bool neg = h & 0x8000u;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  double v;
  if (e == 0)
    v = std::ldexp(static_cast<double>(m), -24);  // zero or subnormal
  else if (e == 31)
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  else
    v = std::ldexp(static_cast<double>(1024 + m), e - 25);
  return neg ? -v : v;
}

// double -> binary16 bits if `v` is exactly representable (finite), else false.
bool double_to_half(double v, std::uint16_t& out) {
  if (!std::isfinite(v)) return false;
  const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a == 0) {
    out = sign;
    return true;
  }
  if (a > 65504.0) return false;
  if (a < 0x1p-14) {  // subnormal: a = m * 2^-24, 1 <= m <= 1023
    const double m = std::ldexp(a, 24);
    if (m != std::floor(m)) return false;
    out = static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(m));
    return true;
  }
  int e = 0;
  (void)std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): biased exponent e - 1 + 15
  const double m = std::ldexp(a, 11 - e);  // in [1024, 2048)
  if (m != std::floor(m)) return false;
  out = static_cast<std::uint16_t>(sign | ((e + 14) << 10) | (static_cast<unsigned>(m) - 1024));
  return true;
}

const char* type_name(dtype t) {
  switch (t) {
    case dtype::f2: return "float16";
    case dtype::f4: return "float32";
    case dtype::f8: return "float64";
    case dtype::i4: return "int32";
    case dtype::i8: return "int64";
    case dtype::u1: return "uint8";
    default: return "bool";
  }
}

// ---- serialization ---------------------------------------------------------------------------

std::string serialize_named(const npy_array& a, const std::string& name) {
  const std::size_t count = element_count(a.shape, name);
  if (a.values.size() != count)
    fail(name, std::to_string(a.values.size()) + " values do not match shape " + shape_text(a.shape) +
                   " (" + std::to_string(count) + " elements)");
  const std::size_t size = item_size(a.type);

  std::string data;
  data.reserve(count * size);
  for (std::size_t i = 0; i < count; ++i) {
    const double v = a.values[i];
    bool ok = std::isfinite(v);
    std::uint64_t bits = 0;
    if (!ok && a.allow_nonfinite) {
      switch (a.type) {
        case dtype::f2:
          ok = true;
          bits = std::isnan(v) ? 0x7e00u : (v > 0 ? 0x7c00u : 0xfc00u);
          break;
        case dtype::f4:
          ok = true;
          bits = std::bit_cast<std::uint32_t>(static_cast<float>(v));
          break;
        case dtype::f8:
          ok = true;
          bits = std::bit_cast<std::uint64_t>(v);
          break;
        default: break;
      }
    } else if (ok) {
      switch (a.type) {
        case dtype::f2: {
          std::uint16_t h = 0;
          ok = double_to_half(v, h);
          bits = h;
          break;
        }
        case dtype::f4:
          ok = std::fabs(v) <= std::numeric_limits<float>::max() &&
               static_cast<double>(static_cast<float>(v)) == v;
          if (ok) bits = std::bit_cast<std::uint32_t>(static_cast<float>(v));
          break;
        case dtype::f8: bits = std::bit_cast<std::uint64_t>(v); break;
        case dtype::i4:
          ok = v == std::trunc(v) && v >= -0x1p31 && v < 0x1p31;
          if (ok) bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(v));
          break;
        case dtype::i8:
          ok = v == std::trunc(v) && v >= -0x1p63 && v < 0x1p63;
          if (ok) bits = static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
          break;
        case dtype::b1:
          ok = v == 0 || v == 1;
          bits = v == 1 ? 1 : 0;
          break;
        case dtype::u1:
          ok = v == std::trunc(v) && v >= 0 && v <= 255;
          if (ok) bits = static_cast<std::uint64_t>(v);
          break;
      }
    }
    if (!ok)
      fail(name, "value " + number_text(v) + " at index " + index_text(i, a.shape) +
                     " is not exactly representable as " + type_name(a.type));
    store_le(data, bits, size);
  }

  // The header exactly as NumPy 1.24's np.save lays it out.
  std::string header = "{'descr': '" + dtype_descr(a.type) + "', 'fortran_order': False, 'shape': " +
                       shape_text(a.shape) + ", }";
  if (!a.shape.empty()) {
    const std::size_t digits = std::to_string(a.shape[0]).size();
    if (digits < 21) header.append(21 - digits, ' ');
  }
  const std::size_t hlen = header.size() + 1;  // + final '\n'
  int major = 1;
  std::size_t pad = 64 - (8 + 2 + hlen) % 64;
  if (hlen + pad > 65535) {
    major = 2;
    pad = 64 - (8 + 4 + hlen) % 64;
  }
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  store_le(out, hlen + pad, major == 1 ? 2 : 4);
  out += header;
  out.append(pad, ' ');
  out += '\n';
  out += data;
  return out;
}

}  // namespace

std::string dtype_descr(dtype t) {
  switch (t) {
    case dtype::f2: return "<f2";
    case dtype::f4: return "<f4";
    case dtype::f8: return "<f8";
    case dtype::i4: return "<i4";
    case dtype::i8: return "<i8";
    case dtype::u1: return "|u1";
    default: return "|b1";
  }
}

npy_array parse_npy(const std::string& bytes, const std::string& name, nonfinite policy) {
  static const char magic[] = "\x93NUMPY";
  if (bytes.size() < 6 || bytes.compare(0, 6, magic, 6) != 0)
    fail(name, "not a .npy file (bad magic string)");
  if (bytes.size() < 8) fail(name, "truncated header: the file ends inside the version number");
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  if (minor != 0 || major < 1 || major > 3)
    fail(name, "unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                   " (supported: 1.0, 2.0, 3.0)");
  const std::size_t len_size = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_size) fail(name, "truncated header: the file ends inside the header length");
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t header_len = static_cast<std::size_t>(load(u + 8, len_size, false));
  const std::size_t header_start = 8 + len_size;
  if (bytes.size() - header_start < header_len)
    fail(name, "truncated header: expected " + std::to_string(header_len) + " header bytes, found " +
                   std::to_string(bytes.size() - header_start));
  const std::string_view header(bytes.data() + header_start, header_len);
  if (major == 3 && !valid_utf8(header)) fail(name, "header is not valid UTF-8");

  const header_info h = interpret_header(header, major, name);
  const std::size_t count = element_count(h.shape, name);
  const std::size_t size = item_size(h.type);
  const std::size_t data_start = header_start + header_len;
  const std::size_t needed = count * size;
  const std::size_t found = bytes.size() - data_start;
  if (found < needed)
    fail(name, "truncated data: expected " + std::to_string(needed) + " bytes, found " + std::to_string(found));
  if (found > needed)
    fail(name, "trailing garbage: " + std::to_string(found - needed) + " bytes after the " +
                   std::to_string(needed) + " data bytes");

  npy_array a;
  a.type = h.type;
  a.shape = h.shape;
  a.allow_nonfinite = policy == nonfinite::allow;
  a.values.resize(count);
  const unsigned char* data = u + data_start;
  const std::size_t nd = h.shape.size();
  // Odometer over the C-order multi-index; `f` tracks the Fortran-order element offset.
  std::vector<std::size_t> idx(nd, 0), fstride(nd, 1);
  for (std::size_t k = 1; k < nd; ++k) fstride[k] = fstride[k - 1] * h.shape[k - 1];
  std::size_t f = 0;
  for (std::size_t c = 0; c < count; ++c) {
    const unsigned char* p = data + (h.fortran ? f : c) * size;
    const std::uint64_t bits = load(p, size, h.big_endian);
    double v = 0;
    switch (h.type) {
      case dtype::f2: v = half_to_double(static_cast<std::uint16_t>(bits)); break;
      case dtype::f4: v = static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(bits))); break;
      case dtype::f8: v = std::bit_cast<double>(bits); break;
      case dtype::i4: v = static_cast<double>(static_cast<std::int32_t>(static_cast<std::uint32_t>(bits))); break;
      case dtype::i8: {
        const auto i = static_cast<std::int64_t>(bits);
        v = static_cast<double>(i);
        if (v >= 0x1p63 || static_cast<std::int64_t>(v) != i)
          fail(name, "int64 value " + std::to_string(i) + " at index " + index_text(c, h.shape) +
                         " is not exactly representable as a double");
        break;
      }
      case dtype::b1:
        if (bits > 1)
          fail(name, "invalid bool byte " + std::to_string(bits) + " at index " + index_text(c, h.shape) +
                         " (must be 0 or 1)");
        v = static_cast<double>(bits);
        break;
      case dtype::u1: v = static_cast<double>(bits); break;
    }
    if (std::isnan(v) && policy == nonfinite::reject) fail(name, "contains NaN at index " + index_text(c, h.shape));
    if (std::isinf(v) && policy == nonfinite::reject) fail(name, std::string("contains ") + (v > 0 ? "+Inf" : "-Inf") + " at index " +
                                      index_text(c, h.shape));
    a.values[c] = v;
    if (h.fortran) {
      for (std::size_t k = nd; k-- > 0;) {
        f += fstride[k];
        if (++idx[k] < h.shape[k]) break;
        f -= fstride[k] * h.shape[k];
        idx[k] = 0;
      }
    }
  }
  return a;
}

npy_array read_npy(const std::string& path, nonfinite policy) {
  return parse_npy(read_file_bounded(path), path, policy);
}

std::string serialize_npy(const npy_array& a) { return serialize_named(a, "npy array"); }

void write_npy(const std::string& path, const npy_array& a) { write_file_atomic(path, serialize_named(a, path)); }

}  // namespace attncert::io
