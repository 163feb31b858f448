// attncert/number/interval.hpp — explicit helpers for enclosures, and three-valued truth.
//
// Boost's mpfi_float comparison operators throw on overlapping intervals from a noexcept
// function (terminate).  attncert never uses <, >, == on intervals: it uses these helpers,
// and predicates on enclosures answer with `truth` (certainly true / certainly false /
// unknown), never a plain bool that hides "unknown".
#pragma once

#include <string>

#include "attncert/number/types.hpp"

namespace attncert {

/// Three-valued answer of a predicate on an enclosure.
enum class truth { certainly_false = 0, certainly_true = 1, unknown = 2 };

inline const char* to_string(truth t) {
  switch (t) {
    case truth::certainly_true: return "certainly true";
    case truth::certainly_false: return "certainly false";
    default: return "unknown";
  }
}

/// Lower / upper end of an interval as an mpfr_float at the interval's precision (exact).
inline mpfr_float lower_of(const mpfi_float& x) { return boost::multiprecision::lower(x); }
inline mpfr_float upper_of(const mpfi_float& x) { return boost::multiprecision::upper(x); }
/// Midpoint (approx tier: a point inside the interval, no claim beyond that).
inline mpfr_float approx_mid(const mpfi_float& x) { return boost::multiprecision::median(x); }

/// A thin interval [v, v] (exact: v is a floating-point number).
inline mpfi_float thin(const mpfr_float& v) {
  mpfi_float r;
  mpfi_set_fr(r.backend().data(), v.backend().data());
  return r;
}

/// Interval hull of a and b.
inline mpfi_float hull_of(const mpfi_float& a, const mpfi_float& b) { return boost::multiprecision::hull(a, b); }

/// Does the interval contain 0?
inline bool contains_zero(const mpfi_float& x) { return boost::multiprecision::zero_in(x); }

/// Is every point of x > 0 / < 0 / does it contain only points that satisfy the predicate?
inline truth certainly_positive(const mpfi_float& x) {
  if (lower_of(x) > 0) return truth::certainly_true;
  if (upper_of(x) <= 0) return truth::certainly_false;
  return truth::unknown;
}
inline truth certainly_nonzero(const mpfi_float& x) {
  if (!contains_zero(x)) return truth::certainly_true;
  if (lower_of(x) == 0 && upper_of(x) == 0) return truth::certainly_false;
  return truth::unknown;
}
/// x <= y for every pair of points (x in X, y in Y).
inline truth certainly_le(const mpfi_float& x, const mpfi_float& y) {
  if (upper_of(x) <= lower_of(y)) return truth::certainly_true;
  if (lower_of(x) > upper_of(y)) return truth::certainly_false;
  return truth::unknown;
}

/// Is the point v inside X?  (Used by soundness tests: the exact value lies inside.)
inline bool contains(const mpfi_float& x, const mpfr_float& v) { return lower_of(x) <= v && v <= upper_of(x); }

/// Interval version of max(a, b): encloses {max(x, y) : x in a, y in b}.
inline mpfi_float interval_max(const mpfi_float& a, const mpfi_float& b) {
  using boost::multiprecision::max;
  mpfr_float lo = lower_of(a) > lower_of(b) ? lower_of(a) : lower_of(b);
  mpfr_float hi = upper_of(a) > upper_of(b) ? upper_of(a) : upper_of(b);
  mpfi_float r;
  mpfi_interv_fr(r.backend().data(), lo.backend().data(), hi.backend().data());
  return r;
}

}  // namespace attncert
