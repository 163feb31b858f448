// Reading the certificate: exact numbers, polynomials, matrices and index lists, with the
// checker's own limits.  See checker.hpp.
#include <algorithm>
#include <cctype>

#include "checker.hpp"

namespace attncert::verify::checker {

void check(bool ok, const std::string& what) {
  if (!ok) throw invalid(what);
}

// The checker's own limits (README "Limits on input"): digits per decimal mantissa and
// |written decimal exponent| as for claims; JSON nesting depth.  Integers (and the two sides of
// p/q) are what the prover writes — a claim's 1e100000 becomes an integer of 100 001 digits,
// and minors multiply entries — so they are bounded only by the file size (64 MiB by default):
// mpz_set_str reads them in subquadratic time.
constexpr std::size_t max_digits = 100000;
constexpr std::size_t max_integer_digits = std::size_t{1} << 26;
constexpr long max_exponent = 100000;

std::string shown(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (const char ch : s) {
    if (out.size() >= 80) return out + "...";
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
    else out += ch;
  }
  return out;
}

// [+-]?digits, at most max_integer_digits digits (read with mpz_set_str: no octal, no hex).
Z parse_integer(const std::string& s, const std::string& where, bool sign_allowed) {
  std::size_t i = 0;
  const bool neg = sign_allowed && !s.empty() && (s[0] == '-' || s[0] == '+') ? s[i++] == '-' : false;
  if (i == s.size() || s.find_first_not_of("0123456789", i) != std::string::npos)
    throw malformed(where + ": not an integer '" + shown(s) + "'");
  if (s.size() - i > max_integer_digits) throw malformed(where + ": more than " + std::to_string(max_integer_digits) + " digits");
  Z v;
  mpz_set_str(v.backend().data(), s.c_str() + i, 10);
  return neg ? Z(-v) : v;
}

Q parse_rational(const std::string& s, const std::string& where) {
  // "p", "-p", "p/q" (q > 0), or a decimal "d.ddde±x".
  if (s.empty()) throw malformed(where + ": empty number");
  if (const auto slash = s.find('/'); slash != std::string::npos) {
    const Z p = parse_integer(s.substr(0, slash), where), q = parse_integer(s.substr(slash + 1), where, false);
    if (q == 0) throw malformed(where + ": zero denominator in '" + shown(s) + "'");
    return Q(p) / Q(q);
  }
  if (s.find_first_not_of("+-0123456789") == std::string::npos) return Q(parse_integer(s, where));  // an integer
  std::size_t i = 0;
  bool neg = false;
  if (s[i] == '-' || s[i] == '+') neg = s[i++] == '-';
  std::string digits;
  long frac = 0;
  bool dot = false;
  for (; i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.'); ++i) {
    if (s[i] == '.') {
      if (dot) throw malformed(where + ": bad number '" + shown(s) + "'");
      dot = true;
    } else {
      if (digits.size() >= max_digits) throw malformed(where + ": more than " + std::to_string(max_digits) + " digits");
      digits += s[i];
      if (dot) ++frac;
    }
  }
  long ex = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) eneg = s[i++] == '-';
    const std::size_t first = i;
    for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
      ex = ex * 10 + (s[i] - '0');  // ex <= max_exponent before this step: no overflow
      if (ex > max_exponent) throw malformed(where + ": exponent out of range in '" + shown(s) + "'");
    }
    if (i == first) throw malformed(where + ": bad exponent in '" + shown(s) + "'");
    if (eneg) ex = -ex;
  }
  if (i != s.size() || digits.empty()) throw malformed(where + ": bad number '" + shown(s) + "'");
  Z m;
  mpz_set_str(m.backend().data(), digits.c_str(), 10);
  const long e = ex - frac;  // |e| <= 2 * 10^5
  Z ten;
  mpz_ui_pow_ui(ten.backend().data(), 10, static_cast<unsigned long>(e < 0 ? -e : e));
  Q v = e >= 0 ? Q(m * ten) : Q(m) / Q(ten);
  return neg ? Q(-v) : v;
}

Q exact_number(const nlohmann::json& j, const std::string& where) {
  if (j.is_string()) return parse_rational(j.get<std::string>(), where);
  if (j.is_number_integer()) return Q(j.dump());
  throw malformed(where + ": expected an exact number (string or integer)");
}

const nlohmann::json& field(const nlohmann::json& j, const std::string& key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw malformed(where + "/" + key + ": missing");
  return j.at(key);
}

std::string text_field(const nlohmann::json& j, const std::string& key, const std::string& where) {
  const nlohmann::json& v = field(j, key, where);
  if (!v.is_string()) throw malformed(where + "/" + key + ": expected a string");
  return v.get<std::string>();
}

using qmatrix = std::vector<std::vector<Q>>;
qmatrix rational_matrix(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array() || j.empty() || !j[0].is_array() || j[0].empty()) throw malformed(where + ": expected a non-empty 2-D array");
  qmatrix m;
  for (std::size_t i = 0; i < j.size(); ++i) {
    if (!j[i].is_array() || j[i].size() != j[0].size()) throw malformed(where + ": ragged");
    std::vector<Q> r;
    for (std::size_t k = 0; k < j[i].size(); ++k) r.push_back(exact_number(j[i][k], where + "/" + std::to_string(i) + "/" + std::to_string(k)));
    m.push_back(r);
  }
  return m;
}

zpoly integer_polynomial(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array()) throw malformed(where + ": expected a coefficient list");
  zpoly p;
  for (std::size_t k = 0; k < j.size(); ++k) {
    const Q v = exact_number(j[k], where + "/" + std::to_string(k));
    if (denominator(v) != 1) throw malformed(where + ": non-integer coefficient");
    p.push_back(numerator(v));
  }
  if (!p.empty() && p.back() == 0) throw malformed(where + ": trailing zero coefficient");
  return p;
}

std::vector<long> index_list(const nlohmann::json& j, const std::string& where, long bound) {
  if (!j.is_array()) throw malformed(where + ": expected an index list");
  std::vector<long> v;
  for (const auto& e : j) {
    if (!e.is_number_integer()) throw malformed(where + ": expected integers");
    const long x = integer<long>(e, where);
    if (x < 0 || x >= bound || (!v.empty() && x <= v.back())) throw malformed(where + ": indices must be increasing and in range");
    v.push_back(x);
  }
  return v;
}


}  // namespace attncert::verify::checker
