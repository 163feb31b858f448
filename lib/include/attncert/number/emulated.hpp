// attncert/number/emulated.hpp
//
// Emulated IEEE-754-style binary floating-point formats narrower than
// binary32 (binary16, bfloat16, ...).  Every operation is rounded ONCE to
// nearest, ties to even, in the target format, with gradual underflow
// (subnormals), overflow to +-infinity, signed zeros and NaN.
//
// Tier: every public function of this header is tier "approx": it models the
// rounding a low-precision device performs; it does not itself produce
// enclosures.  The guarantee of each function (correctly rounded, faithful,
// exact) is stated next to it.
//
// Requirements on the environment (not checked at run time):
//  * the floating-point rounding mode is the default, round to nearest even
//    (std::nearbyint and binary64 arithmetic are used);
//  * no -ffast-math / flush-to-zero (subnormal binary32/binary64 values are
//    used to store and compute subnormals of the format);
//  * MPFR is linked (-lmpfr -lgmp); it is used for the rare hard cases of the
//    elementary functions and of hypot.
#pragma once

#include <mpfr.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace attncert {

// P = precision in bits including the implicit bit, EMIN = exponent of the
// smallest normal (2^EMIN), EMAX = exponent of the largest finite binade.
template <int P, int EMIN, int EMAX>
class emulated_float;

// IEEE 754 binary16 (half precision).
using binary16 = emulated_float<11, -14, 15>;
// Brain floating point: the top 16 bits of a binary32.
using bfloat16 = emulated_float<8, -126, 127>;

namespace detail {

// 2^e as a binary64, exact for -1074 <= e <= 1023 (usable in constant
// expressions, unlike std::ldexp in C++20).
constexpr double pow2(int e) noexcept {
  double r = 1.0;
  for (; e > 0; --e) r *= 2.0;
  for (; e < 0; ++e) r *= 0.5;
  return r;
}

// Largest finite value of the format: (2 - 2^(1-P)) * 2^EMAX.
template <int P, int EMIN, int EMAX>
inline constexpr double max_finite = (pow2(P) - 1.0) * pow2(EMAX - P + 1);

// Width of the window, in binary64 ulps of the libm result, inside which an
// elementary function result is considered too close to a rounding boundary
// of the format and is recomputed with MPFR.  The libm results must be
// within this many ulps of the exact value (glibc documents at most 2 ulps
// for exp, log, tanh, expm1, log1p, hypot on x86-64).
inline constexpr double fallback_window_ulps = 4.0;

// Test hook: number of calls that took the MPFR path (all formats, all
// functions, all threads).  Only ever incremented.
inline std::atomic<std::uint64_t> mpfr_fallback_count{0};

// True when the 16-bit interchange encoding (sign, w-bit biased exponent,
// P-1 fraction bits, bias EMAX, EMIN = 1 - EMAX) describes the format.
template <int P, int EMIN, int EMAX>
inline constexpr bool has_16bit_encoding =
    P >= 2 && P <= 14 && EMAX == (1 << (16 - P - 1)) - 1 && EMIN == 1 - EMAX;

constexpr int digits10_of(int p) noexcept { return static_cast<int>(static_cast<long>(p - 1) * 30103L / 100000L); }
constexpr int max_digits10_of(int p) noexcept {
  return 1 + static_cast<int>((static_cast<long>(p) * 30103L + 99999L) / 100000L);
}
// Smallest k with 10^k >= 2^emin (10^k is then a normal value).
constexpr int min_exponent10_of(int emin) noexcept {
  const double lo = pow2(emin);
  int k = 0;
  double t = 1.0;
  while (t / 10.0 >= lo) { t /= 10.0; --k; }
  return k;
}
// Largest k with 10^k <= max.
constexpr int max_exponent10_of(double max) noexcept {
  int k = 0;
  double t = 1.0;
  while (t * 10.0 <= max) { t *= 10.0; ++k; }
  return k;
}

}  // namespace detail

// Rounds a binary64 value to nearest, ties to even, in the format
// (P, EMIN, EMAX).  Tier approx; guarantee: correctly rounded (exact
// round-to-nearest-even of the binary64 input).  NaN, +-inf and +-0 are
// returned unchanged; a nonzero result that rounds to zero keeps the sign of
// x; a result whose rounding exceeds the largest finite value
// (2 - 2^(1-P)) * 2^EMAX becomes +-inf (so the overflow threshold
// max + half an ulp, a tie, goes to infinity as IEEE 754 specifies).
//
// Method: with e = floor(log2 |x|) (from frexp) the quantum of the format at
// x is 2^q, q = max(e, EMIN) - (P-1) (clamping e at EMIN gives the fixed
// subnormal quantum 2^(EMIN-P+1)).  s = x * 2^-q is exact (|s| < 2^P; a
// scaling by a power of two is exact unless it over/underflows binary64,
// which it cannot here), std::nearbyint(s) rounds to an integer, ties to
// even, and the scaling back is exact again.
template <int P, int EMIN, int EMAX>
double round_to_format(double x) noexcept {
  static_assert(P >= 2 && P <= 53, "precision must be in [2, 53]");
  static_assert(EMIN <= -1 && EMAX >= 1, "the format must contain 1/2 and 2");
  static_assert(EMIN - P + 1 >= -1074 && EMAX <= 1023, "the format must lie inside binary64");
  if (!std::isfinite(x) || x == 0.0) return x;
  int ex = 0;
  (void)std::frexp(x, &ex);  // |x| = m * 2^ex, m in [1/2, 1): floor(log2|x|) = ex - 1
  const int q = std::max(ex - 1, EMIN) - (P - 1);
  const double s = std::ldexp(x, -q);                  // exact
  const double r = std::ldexp(std::nearbyint(s), q);   // exact (or inf near DBL_MAX)
  if (std::fabs(r) > detail::max_finite<P, EMIN, EMAX>) {
    return std::copysign(std::numeric_limits<double>::infinity(), x);
  }
  return r == 0.0 ? std::copysign(0.0, x) : r;
}

namespace detail {

// ---------------------------------------------------------------------------
// MPFR helpers for the hard cases.
// ---------------------------------------------------------------------------

// RAII for one mpfr_t.
class mpfr_var {
 public:
  explicit mpfr_var(mpfr_prec_t prec) { mpfr_init2(v_, prec); }
  ~mpfr_var() { mpfr_clear(v_); }
  mpfr_var(const mpfr_var&) = delete;
  mpfr_var& operator=(const mpfr_var&) = delete;
  mpfr_ptr get() noexcept { return v_; }
  mpfr_srcptr get() const noexcept { return v_; }

 private:
  mpfr_t v_;
};

// RAII: widen MPFR's (thread-local) exponent range to the maximum and save
// the caller's flags; restore both on exit, so the fallback is invisible to
// code that emulates a format with mpfr_set_emin/mpfr_set_emax.
class mpfr_state_guard {
 public:
  mpfr_state_guard() noexcept
      : emin_(mpfr_get_emin()), emax_(mpfr_get_emax()), flags_(mpfr_flags_save()) {
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
  }
  ~mpfr_state_guard() {
    mpfr_set_emin(emin_);
    mpfr_set_emax(emax_);
    mpfr_flags_restore(flags_, MPFR_FLAGS_ALL);
  }
  mpfr_state_guard(const mpfr_state_guard&) = delete;
  mpfr_state_guard& operator=(const mpfr_state_guard&) = delete;

 private:
  mpfr_exp_t emin_, emax_;
  mpfr_flags_t flags_;
};

// Precision of the MPFR recomputation and the relative distance to a
// midpoint below which the 256-bit value is not trusted to decide.
inline constexpr mpfr_prec_t mpfr_fallback_prec = 256;
inline constexpr long mpfr_undecided_log2 = 250;

// True if the binary64 value y lies within fallback_window_ulps binary64 ulps
// of a rounding boundary of the format: a midpoint between two adjacent
// format values (in the normal or subnormal range, including the midpoint
// between 0 and the smallest subnormal) or the overflow threshold
// max + ulp/2 (which is the midpoint between max and 2^(EMAX+1)).
// Only the midpoints of y's own quantum grid need checking: the nearest
// midpoint of a neighbouring binade is at least a quarter quantum away,
// i.e. about 2^(50-P) binary64 ulps.
template <int P, int EMIN, int EMAX>
bool near_rounding_boundary(double y) noexcept {
  if (!std::isfinite(y) || y == 0.0) return false;
  const double a = std::fabs(y);
  int ex = 0;
  (void)std::frexp(a, &ex);
  const int q = std::max(ex - 1, EMIN) - (P - 1);
  const double s = std::ldexp(a, -q);       // exact
  const double k = std::floor(s);
  const double d = std::fabs((s - k) - 0.5);  // exact (Sterbenz / few bits)
  const double ulp = std::nextafter(a, std::numeric_limits<double>::infinity()) - a;
  return d <= fallback_window_ulps * std::ldexp(ulp, -q);
}

// Rounds the MPFR value z to nearest-even in the format, deciding by exact
// comparison of z with the midpoint of the two format values around it.
// z is assumed to carry a relative error below 2^-255 (a correctly rounded
// 256-bit value).  If |z - midpoint| <= 2^-250 * |z| the exact value might lie
// on either side; then `exact_tie(m)` is asked whether the exact value is the
// midpoint m itself (only possible for algebraic functions such as hypot);
// if so the tie goes to even, otherwise std::runtime_error is thrown.
template <int P, int EMIN, int EMAX, class ExactTie>
double mpfr_round_to_format(mpfr_srcptr z, ExactTie&& exact_tie, const char* what) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (mpfr_nan_p(z)) return std::numeric_limits<double>::quiet_NaN();
  const bool neg = mpfr_signbit(z) != 0;
  if (mpfr_inf_p(z)) return neg ? -inf : inf;
  if (mpfr_zero_p(z)) return neg ? -0.0 : 0.0;
  const mpfr_exp_t ez = mpfr_get_exp(z);  // |z| in [2^(ez-1), 2^ez)
  if (ez - 1 > EMAX) return neg ? -inf : inf;                   // |z| >= 2^(EMAX+1)
  if (ez < static_cast<mpfr_exp_t>(EMIN) - P - 1) return neg ? -0.0 : 0.0;  // |z| < 2^(EMIN-P-1)
  const long q = std::max<long>(static_cast<long>(ez) - 1, EMIN) - (P - 1);
  const mpfr_prec_t prec = mpfr_get_prec(z);
  mpfr_var s(prec);
  mpfr_abs(s.get(), z, MPFR_RNDN);
  mpfr_mul_2si(s.get(), s.get(), -q, MPFR_RNDN);  // exact; 2^-3 <= s < 2^P
  const long k = mpfr_get_si(s.get(), MPFR_RNDD);  // floor(s)
  mpfr_var d(prec + 64);
  if (mpfr_sub_d(d.get(), s.get(), static_cast<double>(k) + 0.5, MPFR_RNDN) != 0) {
    throw std::logic_error(std::string("attncert: ") + what + ": inexact midpoint difference");
  }
  mpfr_var tol(prec);
  mpfr_mul_2si(tol.get(), s.get(), -mpfr_undecided_log2, MPFR_RNDN);  // exact
  bool up = false;
  if (mpfr_cmpabs(d.get(), tol.get()) > 0) {
    up = mpfr_sgn(d.get()) > 0;
  } else if (mpfr_zero_p(d.get()) &&
             exact_tie(std::ldexp(static_cast<double>(k) + 0.5, static_cast<int>(q)))) {
    up = (k % 2) != 0;  // tie: to the even neighbour
  } else {
    throw std::runtime_error(std::string("attncert: ") + what +
                             ": result within 2^-250 of a rounding midpoint, "
                             "correct rounding undecided at 256 bits");
  }
  double r = std::ldexp(static_cast<double>(k + (up ? 1 : 0)), static_cast<int>(q));
  if (r > max_finite<P, EMIN, EMAX>) r = inf;
  return neg ? -r : r;
}

// The correctly rounded elementary functions.
enum class elementary { exp, log, tanh, expm1, log1p };

inline const char* elementary_name(elementary f) noexcept {
  switch (f) {
    case elementary::exp: return "exp";
    case elementary::log: return "log";
    case elementary::tanh: return "tanh";
    case elementary::expm1: return "expm1";
    case elementary::log1p: return "log1p";
  }
  return "?";
}

inline double elementary_libm(elementary f, double x) noexcept {
  switch (f) {
    case elementary::exp: return std::exp(x);
    case elementary::log: return std::log(x);
    case elementary::tanh: return std::tanh(x);
    case elementary::expm1: return std::expm1(x);
    case elementary::log1p: return std::log1p(x);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

// Exact special values (returns true and sets r): NaN, infinities, and the
// arguments at which the function is rational: exp(0)=1, log(1)=0, log(0)=-inf,
// tanh(+-0)=+-0, expm1(+-0)=+-0, log1p(+-0)=+-0, log1p(-1)=-inf, and NaN for
// arguments outside the domain.  Everywhere else the exact result at a
// (rational) format value is transcendental.
inline bool elementary_special(elementary f, double x, double& r) noexcept {
  constexpr double inf = std::numeric_limits<double>::infinity();
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  if (std::isnan(x)) { r = x; return true; }
  switch (f) {
    case elementary::exp:
      if (x == 0.0) { r = 1.0; return true; }
      if (std::isinf(x)) { r = x > 0 ? inf : 0.0; return true; }
      return false;
    case elementary::log:
      if (x < 0.0) { r = nan; return true; }
      if (x == 0.0) { r = -inf; return true; }
      if (x == 1.0) { r = 0.0; return true; }
      if (std::isinf(x)) { r = inf; return true; }
      return false;
    case elementary::tanh:
      if (x == 0.0) { r = x; return true; }
      if (std::isinf(x)) { r = x > 0 ? 1.0 : -1.0; return true; }
      return false;
    case elementary::expm1:
      if (x == 0.0) { r = x; return true; }
      if (std::isinf(x)) { r = x > 0 ? inf : -1.0; return true; }
      return false;
    case elementary::log1p:
      if (x < -1.0) { r = nan; return true; }
      if (x == -1.0) { r = -inf; return true; }
      if (x == 0.0) { r = x; return true; }
      if (std::isinf(x)) { r = inf; return true; }
      return false;
  }
  return false;
}

// The MPFR path alone (exposed for tests): f(x) at 256 bits, RNDN, rounded
// to the format by exact midpoint comparison.  x must not be a special
// argument (see elementary_special).  Throws std::runtime_error if
// undecidable at 256 bits.
template <int P, int EMIN, int EMAX>
double elementary_mpfr(elementary f, double x) {
  mpfr_state_guard guard;
  mpfr_var mx(64);
  mpfr_set_d(mx.get(), x, MPFR_RNDN);  // exact
  mpfr_var z(mpfr_fallback_prec);
  switch (f) {
    case elementary::exp: mpfr_exp(z.get(), mx.get(), MPFR_RNDN); break;
    case elementary::log: mpfr_log(z.get(), mx.get(), MPFR_RNDN); break;
    case elementary::tanh: mpfr_tanh(z.get(), mx.get(), MPFR_RNDN); break;
    case elementary::expm1: mpfr_expm1(z.get(), mx.get(), MPFR_RNDN); break;
    case elementary::log1p: mpfr_log1p(z.get(), mx.get(), MPFR_RNDN); break;
  }
  // Transcendental results are never a midpoint: no exact tie is possible.
  return mpfr_round_to_format<P, EMIN, EMAX>(z.get(), [](double) { return false; },
                                             elementary_name(f));
}

// The full correctly rounded evaluation (see "how exp is rounded" below).
template <int P, int EMIN, int EMAX>
double elementary_cr(elementary f, double x) {
  double r = 0.0;
  if (elementary_special(f, x, r)) return r;
  const double y = elementary_libm(f, x);
  if (!near_rounding_boundary<P, EMIN, EMAX>(y)) return round_to_format<P, EMIN, EMAX>(y);
  mpfr_fallback_count.fetch_add(1, std::memory_order_relaxed);
  return elementary_mpfr<P, EMIN, EMAX>(f, x);
}

// hypot via MPFR (exposed for tests); exact ties (e.g. Pythagorean triples)
// are recognised by checking m^2 == a^2 + b^2 exactly.
template <int P, int EMIN, int EMAX>
double hypot_mpfr(double a, double b) {
  mpfr_state_guard guard;
  mpfr_var ma(64), mb(64);
  mpfr_set_d(ma.get(), a, MPFR_RNDN);
  mpfr_set_d(mb.get(), b, MPFR_RNDN);
  mpfr_var z(mpfr_fallback_prec);
  mpfr_hypot(z.get(), ma.get(), mb.get(), MPFR_RNDN);
  auto exact_tie = [&](double m) {
    // a^2, b^2 have <= 2P bits; their sum needs at most 2P + 1 + (exponent
    // gap) bits; the gap is below 2 * 2300 for any format inside binary64.
    const mpfr_prec_t wide = 2 * 53 + 2 * 2300 + 8;
    mpfr_var s(wide), t(wide), mm(wide);
    mpfr_sqr(s.get(), ma.get(), MPFR_RNDN);
    mpfr_sqr(t.get(), mb.get(), MPFR_RNDN);
    mpfr_add(s.get(), s.get(), t.get(), MPFR_RNDN);
    mpfr_set_d(mm.get(), m, MPFR_RNDN);
    mpfr_sqr(mm.get(), mm.get(), MPFR_RNDN);
    return mpfr_equal_p(s.get(), mm.get()) != 0;
  };
  return mpfr_round_to_format<P, EMIN, EMAX>(z.get(), exact_tie, "hypot");
}

}  // namespace detail

// ===========================================================================
// Why + - * / and sqrt computed in binary64 and rounded once are correctly
// rounded in the format.
//
// Let x be the exact result of a o b (a, b format values) or of sqrt(a).  We
// return RN_P(RN_53(x)).  Figueroa ("When is double rounding innocuous?",
// ACM SIGNUM Newsletter 30(3), 1995) proves RN_P(RN_Q(x)) = RN_P(x) for
// + - * / sqrt of P-bit operands whenever Q >= 2P + 2 (Q >= 2P + 1 suffices
// for + -, Q >= 2P for *).  Here Q = 53 >= 2*24 + 2, since P <= 24.  His
// setting has unbounded exponents; the bounded ranges are covered as follows.
//  * binary64 neither overflows nor underflows: nonzero format values lie in
//    [2^-149, 2^128], so nonzero results of the five operations lie in
//    [2^-298, 2^277], inside binary64's normal range.
//  * overflow: IEEE decides overflow on the unbounded-exponent rounding
//    RN_P(x), which Figueroa's theorem makes equal to RN_P(RN_53(x)).
//  * subnormal results.  Sums and differences landing in the subnormal range
//    are exact (both operands are multiples of the quantum 2^(EMIN-P+1) and
//    the result has at most P+1 bits), so they are exact in binary64 too.
//    Products have at most 2P <= 53 bits and are exact in binary64.  sqrt
//    never lands there: sqrt(2^(EMIN-P+1)) >= 2^EMIN because EMIN <= 1 - P
//    (asserted by the class; true of every IEEE-style format).  For a
//    quotient x = a/b write a = A 2^alpha, b = B 2^beta (A, B odd, < 2^P) and
//    let m = M 2^mu (M odd, < 2^(P+1)) be any midpoint.  If x != m then
//    a - m b is a nonzero multiple of 2^min(alpha, mu + beta), hence
//    |x - m| >= 2^(min(alpha - beta, mu) - P).  If also |x - m| <= half a
//    binary64 ulp of m, then m < 2x < 2^(alpha - beta + P + 1) and
//    m < 2^(mu + P + 1), so half an ulp of m is at most
//    2^(min(alpha - beta, mu) + P - 53) < 2^(min(alpha - beta, mu) - P) as
//    2P < 53: a contradiction.  So RN_53(x) is never a midpoint unless x is,
//    and since format values are binary64 values, RN_53 keeps x on its side
//    of every midpoint.
// For binary16 most of this is moot: every binary16 value is a multiple of
// 2^-24 below 2^16, so sums and differences (at most 41 bits) and products
// (at most 22 bits) are exact in binary64; only / and sqrt round twice.
// ===========================================================================
//
// ===========================================================================
// How exp is rounded (and log, tanh, expm1, log1p).
//
//  1. Special arguments give exact results without rounding: exp(0) = 1,
//     log(1) = 0, log(+-0) = -inf, tanh/expm1/log1p(+-0) = +-0,
//     log1p(-1) = -inf, infinities map to their limits, NaN and arguments
//     outside the domain give NaN.
//  2. Otherwise y = std::exp(x) in binary64.  If y is farther than
//     detail::fallback_window_ulps (4) binary64 ulps from every rounding
//     boundary of the format (the midpoints between adjacent format values,
//     in the normal and in the subnormal range, and the overflow threshold
//     max + ulp/2), the exact value lies in the same rounding interval as y
//     (libm is accurate to fewer than 4 ulps), and round_to_format(y) is the
//     correctly rounded result.  (For binary16 and bfloat16 the exhaustive
//     tests measure the margin: over all inputs the glibc results never come
//     closer than 3.6e7 binary64 ulps to a boundary, so the fallback is never
//     taken there and the libm accuracy assumption has ample slack.)
//  3. Else the function is recomputed with MPFR at 256 bits (mpfr_exp,
//     MPFR_RNDN) and the 256-bit value z is compared EXACTLY (in MPFR) with
//     the midpoint between the two format values around it; it is not first
//     rounded to binary64.  z is within 2^-256 relative of the exact value.
//  4. At a format value x (a rational number) other than the special
//     arguments of step 1, exp(x), log(x), tanh(x), expm1(x), log1p(x) are
//     transcendental (Lindemann-Weierstrass: e^x is transcendental for
//     algebraic x != 0, hence so is log x for algebraic x != 0, 1, and
//     tanh x = (e^{2x} - 1)/(e^{2x} + 1), e^x - 1, log(1 + x) are too), so
//     the exact value is never a midpoint (midpoints are rational) and the
//     comparison in step 3 decides, unless the exact value lies within
//     2^-250 relative of a midpoint.  That case is detected and reported by
//     throwing std::runtime_error, never silently resolved.  (Exhaustive
//     tests over all binary16 and bfloat16 inputs never reach it.)
// ===========================================================================

// A binary floating-point number with P significant bits (implicit bit
// included), normal exponents EMIN..EMAX, subnormals, signed zeros, infinities
// and NaN.  The value is stored exactly in a binary32, which contains every
// value of such a format.  Every operation rounds once, to nearest even.
template <int P, int EMIN, int EMAX>
class emulated_float {
  static_assert(P >= 2 && P <= 24, "values must fit a binary32: P <= 24");
  static_assert(EMIN <= -1 && EMAX >= 1 && EMAX <= 127 && EMIN - P + 1 >= -149,
                "values must fit a binary32: 2^(EMIN-P+1) >= 2^-149, EMAX <= 127");
  static_assert(EMIN <= 1 - P, "sqrt of a positive value must never be subnormal");

 public:
  static constexpr int precision = P;
  static constexpr int emin = EMIN;
  static constexpr int emax = EMAX;

  // +0.  Tier approx; exact.
  constexpr emulated_float() noexcept = default;

  // The value of x rounded to nearest even in the format.  Tier approx;
  // correctly rounded (one rounding of the exact value).
  emulated_float(double x) noexcept  // NOLINT(google-explicit-constructor)
      : v_(static_cast<float>(round_to_format<P, EMIN, EMAX>(x))) {}
  // The value of x rounded to nearest even.  Tier approx; correctly rounded.
  emulated_float(float x) noexcept  // NOLINT(google-explicit-constructor)
      : emulated_float(static_cast<double>(x)) {}
  // Integers are converted to binary64 first, then rounded: correctly rounded
  // for |n| <= 2^53; beyond 2^53 the value is rounded twice (to binary64,
  // then to the format) and may differ from the correctly rounded one.
  // Tier approx.
  emulated_float(int n) noexcept  // NOLINT(google-explicit-constructor)
      : emulated_float(static_cast<double>(n)) {}
  // As for int (correctly rounded for |n| <= 2^53).  Tier approx.
  emulated_float(long n) noexcept  // NOLINT(google-explicit-constructor)
      : emulated_float(static_cast<double>(n)) {}
  // As for int (correctly rounded for |n| <= 2^53).  Tier approx.
  emulated_float(long long n) noexcept  // NOLINT(google-explicit-constructor)
      : emulated_float(static_cast<double>(n)) {}
  // As for int (correctly rounded).  Tier approx.
  emulated_float(unsigned n) noexcept  // NOLINT(google-explicit-constructor)
      : emulated_float(static_cast<double>(n)) {}
  // As for int (correctly rounded for n <= 2^53).  Tier approx.
  emulated_float(unsigned long n) noexcept  // NOLINT(google-explicit-constructor)
      : emulated_float(static_cast<double>(n)) {}
  // As for int (correctly rounded for n <= 2^53).  Tier approx.
  emulated_float(unsigned long long n) noexcept  // NOLINT(google-explicit-constructor)
      : emulated_float(static_cast<double>(n)) {}

  // The stored value as binary64.  Tier approx; exact.
  constexpr explicit operator double() const noexcept { return v_; }
  // The stored value as binary32.  Tier approx; exact.
  constexpr explicit operator float() const noexcept { return v_; }
  // The stored value as binary64.  Tier approx; exact.
  constexpr double to_double() const noexcept { return v_; }

  // The value with the standard 16-bit encoding `b` (IEEE binary16; for
  // bfloat16 the top 16 bits of a binary32).  Tier approx; exact, NaN
  // payloads and signalling NaNs included (kept in the binary32 storage as
  // hardware conversions do, fraction left-aligned).
  static constexpr emulated_float from_bits(std::uint16_t b) noexcept
    requires detail::has_16bit_encoding<P, EMIN, EMAX>
  {
    const std::uint32_t sign = (b >> 15) & 1u;
    const std::uint32_t e = (b >> (P - 1)) & exp_mask;
    const std::uint32_t f = b & frac_mask;
    if (e == exp_mask) {  // inf or NaN: same layout as binary32
      const std::uint32_t w = (sign << 31) | 0x7F800000u | (f << (24 - P));
      return emulated_float(raw_tag{}, std::bit_cast<float>(w));
    }
    const double mag = e == 0 ? static_cast<double>(f) * detail::pow2(EMIN - P + 1)
                              : static_cast<double>(f + (1u << (P - 1))) *
                                    detail::pow2(static_cast<int>(e) - EMAX - (P - 1));
    return emulated_float(raw_tag{}, static_cast<float>(sign ? -mag : mag));
  }

  // The standard 16-bit encoding of the value (inverse of from_bits).  A NaN
  // keeps its sign and the top P-1 fraction bits of the binary32 NaN; if those
  // are all zero the quiet bit is set so that the result stays a NaN.
  // Tier approx; exact.
  constexpr std::uint16_t bits() const noexcept
    requires detail::has_16bit_encoding<P, EMIN, EMAX>
  {
    const std::uint32_t w = std::bit_cast<std::uint32_t>(v_);
    const std::uint32_t sign = (w >> 31) << 15;
    const std::uint32_t fe = (w >> 23) & 0xFFu;
    std::uint32_t out = 0;
    if (fe == 0xFFu) {  // inf or NaN
      std::uint32_t f = (w & 0x7FFFFFu) >> (24 - P);
      if ((w & 0x7FFFFFu) != 0 && f == 0) f = 1u << (P - 2);
      out = (exp_mask << (P - 1)) | f;
    } else {
      const double a = v_ < 0 ? -static_cast<double>(v_) : static_cast<double>(v_);
      if (a < detail::pow2(EMIN)) {  // zero or subnormal: integer multiple of 2^(EMIN-P+1)
        out = static_cast<std::uint32_t>(a * detail::pow2(-(EMIN - P + 1)));
      } else {  // normal in the format, hence normal in binary32
        const std::uint32_t e = fe - 127u + static_cast<std::uint32_t>(EMAX);
        out = (e << (P - 1)) | ((w & 0x7FFFFFu) >> (24 - P));
      }
    }
    return static_cast<std::uint16_t>(sign | out);
  }

  // a + b correctly rounded.  Tier approx; correctly rounded (see the
  // double-rounding comment above).
  friend emulated_float operator+(emulated_float a, emulated_float b) noexcept {
    return emulated_float(static_cast<double>(a.v_) + static_cast<double>(b.v_));
  }
  // a - b correctly rounded.  Tier approx; correctly rounded.
  friend emulated_float operator-(emulated_float a, emulated_float b) noexcept {
    return emulated_float(static_cast<double>(a.v_) - static_cast<double>(b.v_));
  }
  // a * b correctly rounded.  Tier approx; correctly rounded.
  friend emulated_float operator*(emulated_float a, emulated_float b) noexcept {
    return emulated_float(static_cast<double>(a.v_) * static_cast<double>(b.v_));
  }
  // a / b correctly rounded (x/0 = +-inf, 0/0 = NaN).  Tier approx;
  // correctly rounded.
  friend emulated_float operator/(emulated_float a, emulated_float b) noexcept {
    return emulated_float(static_cast<double>(a.v_) / static_cast<double>(b.v_));
  }
  // *this = *this + b.  Tier approx; correctly rounded.
  emulated_float& operator+=(emulated_float b) noexcept { return *this = *this + b; }
  // *this = *this - b.  Tier approx; correctly rounded.
  emulated_float& operator-=(emulated_float b) noexcept { return *this = *this - b; }
  // *this = *this * b.  Tier approx; correctly rounded.
  emulated_float& operator*=(emulated_float b) noexcept { return *this = *this * b; }
  // *this = *this / b.  Tier approx; correctly rounded.
  emulated_float& operator/=(emulated_float b) noexcept { return *this = *this / b; }
  // -a (sign flipped, also for zeros and NaN).  Tier approx; exact.
  friend constexpr emulated_float operator-(emulated_float a) noexcept {
    return emulated_float(raw_tag{}, -a.v_);
  }
  // a unchanged.  Tier approx; exact.
  friend constexpr emulated_float operator+(emulated_float a) noexcept { return a; }

  // IEEE comparisons: +0 == -0; every comparison involving NaN is false
  // except !=, which is true.  Tier approx; exact.
  friend constexpr bool operator==(emulated_float a, emulated_float b) noexcept { return a.v_ == b.v_; }
  // IEEE a != b (true if either is NaN).  Tier approx; exact.
  friend constexpr bool operator!=(emulated_float a, emulated_float b) noexcept { return a.v_ != b.v_; }
  // IEEE a < b (false if either is NaN).  Tier approx; exact.
  friend constexpr bool operator<(emulated_float a, emulated_float b) noexcept { return a.v_ < b.v_; }
  // IEEE a <= b (false if either is NaN).  Tier approx; exact.
  friend constexpr bool operator<=(emulated_float a, emulated_float b) noexcept { return a.v_ <= b.v_; }
  // IEEE a > b (false if either is NaN).  Tier approx; exact.
  friend constexpr bool operator>(emulated_float a, emulated_float b) noexcept { return a.v_ > b.v_; }
  // IEEE a >= b (false if either is NaN).  Tier approx; exact.
  friend constexpr bool operator>=(emulated_float a, emulated_float b) noexcept { return a.v_ >= b.v_; }

  // Writes the value with max_digits10 significant digits (via binary64), so
  // that reading it back as a double and converting gives the same value;
  // "inf"/"nan" for the special values.  Tier approx; round-trips.
  friend std::ostream& operator<<(std::ostream& os, emulated_float x) {
    std::ostringstream s;
    s.imbue(os.getloc());
    s.precision(detail::max_digits10_of(P));
    s << static_cast<double>(x.v_);
    return os << s.str();
  }

 private:
  struct raw_tag {};
  constexpr emulated_float(raw_tag, float v) noexcept : v_(v) {}

  static constexpr std::uint32_t exp_mask = (1u << (16 - P)) - 1u;
  static constexpr std::uint32_t frac_mask = (1u << (P - 1)) - 1u;

  float v_ = 0.0f;

  friend struct std::numeric_limits<emulated_float>;
};

// ---------------------------------------------------------------------------
// Free functions (found by ADL).
// ---------------------------------------------------------------------------

// True if x is NaN.  Tier approx; exact.
template <int P, int EMIN, int EMAX>
bool isnan(emulated_float<P, EMIN, EMAX> x) noexcept { return std::isnan(x.to_double()); }
// True if x is +-inf.  Tier approx; exact.
template <int P, int EMIN, int EMAX>
bool isinf(emulated_float<P, EMIN, EMAX> x) noexcept { return std::isinf(x.to_double()); }
// True if x is neither infinite nor NaN.  Tier approx; exact.
template <int P, int EMIN, int EMAX>
bool isfinite(emulated_float<P, EMIN, EMAX> x) noexcept { return std::isfinite(x.to_double()); }
// True if the sign bit of x is set (also for -0 and negative NaN).  Tier approx; exact.
template <int P, int EMIN, int EMAX>
bool signbit(emulated_float<P, EMIN, EMAX> x) noexcept { return std::signbit(x.to_double()); }

// |x| (sign bit cleared, also for NaN).  Tier approx; exact.
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> abs(emulated_float<P, EMIN, EMAX> x) noexcept {
  return signbit(x) ? -x : x;
}
// |x|, same as abs.  Tier approx; exact.
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> fabs(emulated_float<P, EMIN, EMAX> x) noexcept { return abs(x); }

// Square root (sqrt(-0) = -0, negative -> NaN).  Tier approx; correctly
// rounded (binary64 sqrt then one rounding, see the double-rounding comment).
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> sqrt(emulated_float<P, EMIN, EMAX> x) noexcept {
  return emulated_float<P, EMIN, EMAX>(std::sqrt(x.to_double()));
}

// e^x.  Tier approx; correctly rounded (see "how exp is rounded"); throws
// std::runtime_error only if 256 bits cannot decide the rounding.
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> exp(emulated_float<P, EMIN, EMAX> x) {
  return detail::elementary_cr<P, EMIN, EMAX>(detail::elementary::exp, x.to_double());
}
// Natural logarithm (log(+-0) = -inf, negative -> NaN).  Tier approx;
// correctly rounded; throws std::runtime_error only if undecidable at 256 bits.
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> log(emulated_float<P, EMIN, EMAX> x) {
  return detail::elementary_cr<P, EMIN, EMAX>(detail::elementary::log, x.to_double());
}
// Hyperbolic tangent.  Tier approx; correctly rounded; throws
// std::runtime_error only if undecidable at 256 bits.
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> tanh(emulated_float<P, EMIN, EMAX> x) {
  return detail::elementary_cr<P, EMIN, EMAX>(detail::elementary::tanh, x.to_double());
}
// e^x - 1.  Tier approx; correctly rounded; throws std::runtime_error only
// if undecidable at 256 bits.
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> expm1(emulated_float<P, EMIN, EMAX> x) {
  return detail::elementary_cr<P, EMIN, EMAX>(detail::elementary::expm1, x.to_double());
}
// log(1 + x).  Tier approx; correctly rounded; throws std::runtime_error
// only if undecidable at 256 bits.
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> log1p(emulated_float<P, EMIN, EMAX> x) {
  return detail::elementary_cr<P, EMIN, EMAX>(detail::elementary::log1p, x.to_double());
}

// x * 2^n.  Tier approx; exact when the result is a normal format value,
// otherwise correctly rounded (subnormal, zero or infinite result).
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> ldexp(emulated_float<P, EMIN, EMAX> x, int n) noexcept {
  // Nonzero x is in [2^-149, 2^128]; x * 2^n is exact in binary64 unless it
  // is below 2^-1022 or above 2^1023, both far outside the format, where
  // the binary64 result (tiny or infinite) rounds to the same format value.
  return emulated_float<P, EMIN, EMAX>(std::ldexp(x.to_double(), n));
}
// Mantissa m in [1/2, 1) with x = m * 2^*e (m = x, *e = 0 for zero, inf,
// NaN).  Tier approx; exact (m has at most P bits and 1/2 is normal).
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> frexp(emulated_float<P, EMIN, EMAX> x, int* e) noexcept {
  int ex = 0;
  const double m = std::frexp(x.to_double(), &ex);
  *e = std::isfinite(x.to_double()) ? ex : 0;
  return emulated_float<P, EMIN, EMAX>(m);
}
// Largest integer <= x.  Tier approx; exact.
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> floor(emulated_float<P, EMIN, EMAX> x) noexcept {
  return emulated_float<P, EMIN, EMAX>(std::floor(x.to_double()));
}
// Smallest integer >= x (ceil(-0.5) = -0).  Tier approx; exact.
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> ceil(emulated_float<P, EMIN, EMAX> x) noexcept {
  return emulated_float<P, EMIN, EMAX>(std::ceil(x.to_double()));
}

// IEEE 754-2019 maximumNumber: the larger of a and b; if one is NaN the other
// is returned; fmax(-0, +0) = +0.  Tier approx; exact.
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> fmax(emulated_float<P, EMIN, EMAX> a,
                                   emulated_float<P, EMIN, EMAX> b) noexcept {
  if (isnan(a)) return b;
  if (isnan(b)) return a;
  if (a == b) return signbit(a) ? b : a;
  return a < b ? b : a;
}
// IEEE 754-2019 minimumNumber: the smaller of a and b; if one is NaN the
// other is returned; fmin(-0, +0) = -0.  Tier approx; exact.
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> fmin(emulated_float<P, EMIN, EMAX> a,
                                   emulated_float<P, EMIN, EMAX> b) noexcept {
  if (isnan(a)) return b;
  if (isnan(b)) return a;
  if (a == b) return signbit(a) ? a : b;
  return a < b ? a : b;
}
// (a < b) ? b : a, by value, like std::max (returns a if either is NaN or
// a == b).  Tier approx; exact.
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> max(emulated_float<P, EMIN, EMAX> a,
                                  emulated_float<P, EMIN, EMAX> b) noexcept {
  return (a < b) ? b : a;
}
// (b < a) ? b : a, by value, like std::min (returns a if either is NaN or
// a == b).  Tier approx; exact.
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> min(emulated_float<P, EMIN, EMAX> a,
                                  emulated_float<P, EMIN, EMAX> b) noexcept {
  return (b < a) ? b : a;
}

// x^y computed by std::pow in binary64 and rounded once.  Tier approx;
// FAITHFUL only (one of the two format values around the exact result): the
// binary64 pow may move a value that is extremely close to a midpoint (or
// exactly on it, e.g. 63^2 in binary16) across it.  Special cases as std::pow.
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> pow(emulated_float<P, EMIN, EMAX> x,
                                  emulated_float<P, EMIN, EMAX> y) noexcept {
  return emulated_float<P, EMIN, EMAX>(std::pow(x.to_double(), y.to_double()));
}

// sqrt(a^2 + b^2) without spurious overflow.  Tier approx; correctly
// rounded: std::hypot in binary64 is not exact, so, as for exp, a result
// within 4 binary64 ulps of a rounding boundary is recomputed with MPFR at
// 256 bits and compared exactly with the midpoint; unlike exp, the exact
// value CAN be a midpoint (Pythagorean triples, e.g. hypot(1233, 1644) =
// 2055 in binary16), which is recognised exactly (m^2 == a^2 + b^2) and
// rounded to even.  hypot(+-inf, NaN) = +inf.  Throws std::runtime_error only
// if a non-tie lies within 2^-250 of a midpoint.
template <int P, int EMIN, int EMAX>
emulated_float<P, EMIN, EMAX> hypot(emulated_float<P, EMIN, EMAX> a,
                                    emulated_float<P, EMIN, EMAX> b) {
  const double x = a.to_double();
  const double y = b.to_double();
  const double r = std::hypot(x, y);
  if (!std::isfinite(x) || !std::isfinite(y) || x == 0.0 || y == 0.0 ||
      !detail::near_rounding_boundary<P, EMIN, EMAX>(r)) {
    return emulated_float<P, EMIN, EMAX>(r);  // exact cases need no care
  }
  detail::mpfr_fallback_count.fetch_add(1, std::memory_order_relaxed);
  return emulated_float<P, EMIN, EMAX>(detail::hypot_mpfr<P, EMIN, EMAX>(x, y));
}

}  // namespace attncert

// numeric_limits for the emulated formats (is_iec559 is false: the type is an
// emulation, not a hardware IEEE type, even though it follows its rounding).
template <int P, int EMIN, int EMAX>
struct std::numeric_limits<attncert::emulated_float<P, EMIN, EMAX>> {
 private:
  using T = attncert::emulated_float<P, EMIN, EMAX>;
  static constexpr T make(double v) noexcept { return T(typename T::raw_tag{}, static_cast<float>(v)); }

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr std::float_denorm_style has_denorm = std::denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = P;
  static constexpr int digits10 = attncert::detail::digits10_of(P);
  static constexpr int max_digits10 = attncert::detail::max_digits10_of(P);
  static constexpr int radix = 2;
  static constexpr int min_exponent = EMIN + 1;
  static constexpr int min_exponent10 = attncert::detail::min_exponent10_of(EMIN);
  static constexpr int max_exponent = EMAX + 1;
  static constexpr int max_exponent10 =
      attncert::detail::max_exponent10_of(attncert::detail::max_finite<P, EMIN, EMAX>);
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;

  // 2^EMIN, the smallest positive normal value.
  static constexpr T min() noexcept { return make(attncert::detail::pow2(EMIN)); }
  // (2 - 2^(1-P)) * 2^EMAX, the largest finite value.
  static constexpr T max() noexcept { return make(attncert::detail::max_finite<P, EMIN, EMAX>); }
  // -max().
  static constexpr T lowest() noexcept { return make(-attncert::detail::max_finite<P, EMIN, EMAX>); }
  // 2^(1-P), the gap between 1 and the next value.
  static constexpr T epsilon() noexcept { return make(attncert::detail::pow2(1 - P)); }
  // 0.5 (ulps), the maximum rounding error of round to nearest.
  static constexpr T round_error() noexcept { return make(0.5); }
  // +infinity.
  static constexpr T infinity() noexcept { return make(std::numeric_limits<double>::infinity()); }
  // A quiet NaN.
  static constexpr T quiet_NaN() noexcept {
    return T(typename T::raw_tag{}, std::numeric_limits<float>::quiet_NaN());
  }
  // A signalling NaN (quiet bit clear, next fraction bit set; as stored it
  // survives copies, any arithmetic on it yields a quiet NaN).
  static constexpr T signaling_NaN() noexcept {
    return T(typename T::raw_tag{}, std::numeric_limits<float>::signaling_NaN());
  }
  // 2^(EMIN-P+1), the smallest positive subnormal value.
  static constexpr T denorm_min() noexcept { return make(attncert::detail::pow2(EMIN - P + 1)); }
};
