// attncert/number/traits.hpp — number_traits<T>: tier, name, precision and epsilon of every
// number type attncert computes in, plus the few generic operations whose meaning differs
// between tiers (shift point of a stable softmax, max, conversion, printing, judging a
// tolerance).  Generic code asks these traits instead of branching on concrete types.
#pragma once

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>

#include "attncert/error.hpp"
#include "attncert/number/decimal.hpp"
#include "attncert/number/emulated.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/number/precision_guard.hpp"
#include "attncert/number/types.hpp"

namespace attncert {

/// The three tiers (docs/architecture.md, "Three tiers"): what a result in this type means.
enum class tier { exact, enclosure, approx };

inline const char* to_string(tier t) {
  switch (t) {
    case tier::exact: return "exact";
    case tier::enclosure: return "enclosure";
    default: return "approx";
  }
}

/// Verdict of one claim.  `undecided` only arises in the enclosure tier (an interval
/// straddles the tolerance) and is never reported as pass.
enum class verdict { pass, fail, undecided, skipped };

inline const char* to_string(verdict v) {
  switch (v) {
    case verdict::pass: return "pass";
    case verdict::fail: return "fail";
    case verdict::undecided: return "undecided";
    default: return "skipped";
  }
}

template <class T>
struct number_traits;  // specialised below for every supported type

namespace detail {
/// Strict decimal parsing into double (correctly rounded by strtod): the whole string must
/// be a finite number, else input_error.
/// With finite_in_binary64 = false only the syntax is checked (inf/nan words are still
/// rejected), for types with a wider exponent range.
inline double parse_double_strict(const std::string& s, bool finite_in_binary64 = true) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) throw input_error("not a number: '" + s + "'");
  for (char c : s)
    if (std::isalpha(static_cast<unsigned char>(c)) && c != 'e' && c != 'E') throw input_error("not a finite number: '" + s + "'");
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || (finite_in_binary64 && !std::isfinite(v)))
    throw input_error("not a finite number: '" + s + "'");
  return v;
}

// Shared part of the traits of IEEE-like approx types (float, double, emulated formats).
template <class T, int P, int EMIN>
struct ieee_like_traits {
  static constexpr tier kind = tier::approx;
  static unsigned bits() { return P; }
  /// Machine epsilon 2^(1-p): the gap between 1 and the next number.
  static T epsilon() { return T(std::ldexp(1.0, 1 - P)); }
  /// Smallest positive normal number 2^EMIN.
  static T smallest_normal() { return T(std::ldexp(1.0, EMIN)); }
  static int min_normal_exponent() { return EMIN; }
  static double to_double(const T& x) { return static_cast<double>(x); }
  static T from_double(double x) { return T(x); }
  static std::string to_string(const T& x, int digits = 17) {
    std::ostringstream os;
    os.precision(digits);
    os << static_cast<double>(x);
    return os.str();
  }
  static bool is_nan(const T& x) { return std::isnan(static_cast<double>(x)); }
};
}  // namespace detail

/// binary64 (native double): every operation correctly rounded by the hardware; exp/log/tanh
/// from libm (not guaranteed correctly rounded; glibc documents < 1 ulp).
template <>
struct number_traits<double> : detail::ieee_like_traits<double, 53, -1022> {
  static const char* name() { return "binary64"; }
  static double from_string(const std::string& s) { return detail::parse_double_strict(s); }
};

/// binary32 (native float): arithmetic correctly rounded by the hardware; expf/logf from
/// libm (faithful, not guaranteed correctly rounded).
template <>
struct number_traits<float> : detail::ieee_like_traits<float, 24, -126> {
  static const char* name() { return "binary32"; }
  static float from_string(const std::string& s) {
    (void)detail::parse_double_strict(s);
    return std::strtof(s.c_str(), nullptr);
  }
};

/// Emulated binary16 / bfloat16 (emulated.hpp): every operation, exp and log included, is
/// correctly rounded to nearest-even in the format.
template <int P, int EMIN, int EMAX>
struct number_traits<emulated_float<P, EMIN, EMAX>>
    : detail::ieee_like_traits<emulated_float<P, EMIN, EMAX>, P, EMIN> {
  using T = emulated_float<P, EMIN, EMAX>;
  static const char* name() {
    if constexpr (P == 11 && EMIN == -14) return "binary16";
    else if constexpr (P == 8 && EMIN == -126) return "bfloat16";
    else return "emulated";
  }
  /// Decimal -> binary64 (correctly rounded) -> format: two roundings; exact for the
  /// short decimals used in declared constructions that are representable, otherwise
  /// faithful.
  static T from_string(const std::string& s) { return T(detail::parse_double_strict(s)); }
};

/// MPFR at run-time precision (approx tier): correctly rounded elementary operations at the
/// current precision (set by precision_guard).
template <>
struct number_traits<mpfr_float> {
  using T = mpfr_float;
  static constexpr tier kind = tier::approx;
  static const char* name() { return "mpfr"; }
  static unsigned bits() { return current_mpfr_bits(); }
  static T epsilon() { return ldexp(T(1), 1 - static_cast<int>(bits())); }
  static T smallest_normal() { return ldexp(T(1), static_cast<int>(mpfr_get_emin()) - 1); }
  static long min_normal_exponent() { return mpfr_get_emin() - 1; }
  static double to_double(const T& x) { return x.convert_to<double>(); }
  static T from_double(double x) { return T(x); }
  static T from_string(const std::string& s) {
    (void)detail::parse_double_strict(s, false);  // syntax only; the value is re-read by MPFR
    return T(s);
  }
  static std::string to_string(const T& x, int digits = 17) { return x.str(digits, std::ios_base::scientific); }
  static bool is_nan(const T& x) { return boost::multiprecision::isnan(x); }
};

/// MPFI intervals at run-time precision (enclosure tier): every operation returns an
/// interval containing the exact result of the operation on any points of its operands.
template <>
struct number_traits<mpfi_float> {
  using T = mpfi_float;
  static constexpr tier kind = tier::enclosure;
  static const char* name() { return "mpfi"; }
  static unsigned bits() { return current_mpfr_bits(); }
  /// 2^(1-p) as a thin interval (used to size tolerances, which are then exact numbers).
  static T epsilon() { return T(ldexp(mpfr_float(1), 1 - static_cast<int>(bits()))); }
  static T smallest_normal() { return T(ldexp(mpfr_float(1), static_cast<int>(mpfr_get_emin()) - 1)); }
  static long min_normal_exponent() { return mpfr_get_emin() - 1; }
  static double to_double(const T& x) { return approx_mid(x).convert_to<double>(); }
  static T from_double(double x) { return T(x); }
  /// Encloses the decimal value of s (MPFI rounds the ends outward).
  static T from_string(const std::string& s) {
    (void)detail::parse_double_strict(s, false);
    return T(s);
  }
  /// "[lo, hi]" with `digits` digits after the point (printf's %e, Boost's scientific
  /// layout), rounded outward (decimal.hpp): the printed interval contains x.
  static std::string to_string(const T& x, int digits = 17) { return interval_text(x, digits); }
  static bool is_nan(const T& x) { return mpfi_nan_p(x.backend().data()) != 0; }
};

/// GMP rationals (exact tier): the true value; epsilon is 0.
template <>
struct number_traits<mpq_rational> {
  using T = mpq_rational;
  static constexpr tier kind = tier::exact;
  static const char* name() { return "exact"; }
  static unsigned bits() { return 0; }
  static T epsilon() { return T(0); }
  static double to_double(const T& x) { return x.convert_to<double>(); }
  /// Exact: every finite double is a dyadic rational.
  static T from_double(double x) { return T(x); }
  /// Exact value of a decimal or fraction: "-0.125", "1e-20", "3/7", "2.5E3".
  static T from_string(const std::string& s);
  static std::string to_string(const T& x, int = 17) { return x.str(); }
  static bool is_nan(const T&) { return false; }
};

/// Most digits in the mantissa of one decimal number (each side of a '/' counts
/// separately): 100 000 (README "Limits on input").  Parsing is linear-ish (one
/// mpz_set_str, one mpz_ui_pow_ui), so a number at the limit takes milliseconds.
inline constexpr std::size_t max_decimal_digits = 100000;

/// Largest |exponent| written in a decimal number ("1e100000", "1e-100000"): 100 000.
/// The exponent is range-checked digit by digit before any arithmetic, so no exponent text
/// (e.g. -9223372036854775808) can overflow.
inline constexpr long max_decimal_exponent = 100000;

inline mpq_rational number_traits<mpq_rational>::from_string(const std::string& s) {
  using boost::multiprecision::mpz_int;
  const auto slash = s.find('/');
  if (slash != std::string::npos) {
    if (s.find('/', slash + 1) != std::string::npos) throw input_error("not a rational: '" + one_line(s) + "'");
    mpq_rational num = from_string(s.substr(0, slash)), den = from_string(s.substr(slash + 1));
    if (den == 0) throw input_error("zero denominator in rational '" + one_line(s) + "'");
    return num / den;
  }
  std::size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  std::string digits;  // the mantissa's digits, without the point
  long frac_digits = 0;
  bool dot = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      if (digits.size() >= max_decimal_digits)
        throw input_error("more than " + std::to_string(max_decimal_digits) + " digits in the number '" + one_line(s) + "'");
      digits += c;
      if (dot) ++frac_digits;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (digits.empty()) throw input_error("not a decimal number: '" + one_line(s) + "'");
  long e = 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
    const std::size_t first = i;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      e = e * 10 + (s[i] - '0');  // e <= max_decimal_exponent here: no overflow
      if (e > max_decimal_exponent)
        throw input_error("decimal exponent beyond +-" + std::to_string(max_decimal_exponent) + " in '" + one_line(s) + "'");
    }
    if (i == first) throw input_error("not a decimal number: '" + one_line(s) + "'");
    if (eneg) e = -e;
  }
  if (i != s.size()) throw input_error("not a decimal number: '" + one_line(s) + "'");
  mpz_int mant;
  mpz_set_str(mant.backend().data(), digits.c_str(), 10);  // digits only: cannot fail
  if (mant == 0) return mpq_rational(0);
  const long scale = e - frac_digits;  // |scale| <= 2e5: no overflow
  mpz_int p;
  mpz_ui_pow_ui(p.backend().data(), 10, static_cast<unsigned long>(scale < 0 ? -scale : scale));
  mpq_rational r = scale < 0 ? mpq_rational(mant) / mpq_rational(p) : mpq_rational(mpz_int(mant * p));
  return neg ? mpq_rational(-r) : r;
}

/// Which tier a type belongs to.
template <class T>
inline constexpr tier tier_of = number_traits<T>::kind;

// ---- generic operations whose meaning depends on the tier --------------------------

/// max(a, b).  Approx: the larger value.  Enclosure: an interval containing max(x, y) for
/// all x in a, y in b.
template <class T>
T max_of(const T& a, const T& b) {
  if constexpr (std::is_same_v<T, mpfi_float>) return interval_max(a, b);
  else return a < b ? b : a;
}

/// A point usable as the shift m of a stable softmax (exp(s - m) / sum exp(s - m)).  Any
/// real m gives the same exact softmax, so for an interval we shift by the thin upper end
/// of the row maximum: this keeps the enclosure tight and is still rigorous.
template <class T>
T shift_point(const T& rowmax) {
  if constexpr (std::is_same_v<T, mpfi_float>) return thin(upper_of(rowmax));
  else return rowmax;
}

/// Judge `error <= tolerance`.  Point types: pass or fail (NaN fails).  Intervals: pass only
/// if the whole error interval satisfies it, fail if none of it does, else undecided.
template <class T>
verdict judge_le(const T& error, const T& tolerance) {
  if constexpr (std::is_same_v<T, mpfi_float>) {
    switch (certainly_le(error, tolerance)) {
      case truth::certainly_true: return verdict::pass;
      case truth::certainly_false: return verdict::fail;
      default: return verdict::undecided;
    }
  } else {
    if (number_traits<T>::is_nan(error) || number_traits<T>::is_nan(tolerance)) return verdict::fail;
    return error <= tolerance ? verdict::pass : verdict::fail;
  }
}

/// |x| in any tier (exact for rationals; an enclosure of |X| for intervals).
template <class T>
T abs_of(const T& x) {
  using std::abs;
  using boost::multiprecision::abs;
  return abs(x);
}

}  // namespace attncert
