// Tests of attncert/number/emulated.hpp.
//
// References used, independent of the implementation under test:
//  * GCC's native _Float16 (x86-64, GCC >= 12).  Conversions double ->
//    _Float16 are compiled to a call of libgcc's __truncdfhf2, a direct
//    soft-float conversion from binary64 (not via binary32), correctly rounded
//    in the current rounding mode; binary16 + - * / are compiled to
//    "extend to binary32, operate, __truncsfhf2", which is correctly rounded
//    because 24 >= 2*11 + 2 (Figueroa).  The first assumption is checked
//    here, not just trusted: the random inputs include binary64 values one
//    ulp either side of every kind of binary16 midpoint, where a conversion
//    through binary32 would round twice and fail; and the same inputs are also
//    checked against MPFR.
//  * MPFR emulating the format the documented way: compute at precision P in
//    the default (wide) exponent range, then mpfr_set_emin(EMIN - P + 2),
//    mpfr_set_emax(EMAX + 1), mpfr_check_range, mpfr_subnormalize (using the
//    ternary value so that there is no double rounding), restore the range.
//
// Random inputs come from std::mt19937_64 seeded with ATTNCERT_SEED if set,
// otherwise a fixed default; the seed is printed.
#define BOOST_TEST_MODULE number_emulated
#include <boost/test/unit_test.hpp>

#include "../support.hpp"

#include "attncert/number/emulated.hpp"

#include <mpfr.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <tuple>

// GCC (>= 12) on x86-64 has _Float16, the independent reference of the cases marked below; clang 14
// (CI's sanitizer build) does not: there those cases are left out and the MPFR comparisons run.
#ifdef __FLT16_MAX__
#define ATTNCERT_NATIVE_F16 1
#endif

namespace {

using attncert::bfloat16;
using attncert::binary16;
using formats = std::tuple<binary16, bfloat16>;

constexpr double inf = std::numeric_limits<double>::infinity();

// ---- helpers ----------------------------------------------------------------

// Same value, same sign of zero; any NaN equals any NaN.
bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

std::string hex(double x) {
  std::ostringstream s;
  s << std::hexfloat << x;
  return s.str();
}

#ifdef ATTNCERT_NATIVE_F16
_Float16 h_from_bits(std::uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, sizeof h);
  return h;
}
std::uint16_t h_bits(_Float16 h) {
  std::uint16_t b;
  std::memcpy(&b, &h, sizeof b);
  return b;
}
bool h_is_nan_bits(std::uint16_t b) { return (b & 0x7C00u) == 0x7C00u && (b & 0x3FFu) != 0; }

// The native conversion, out of line so that the compiler cannot fold it.
__attribute__((noinline)) _Float16 native_f16(double x) { return static_cast<_Float16>(x); }
__attribute__((noinline)) _Float16 native_op(char op, _Float16 a, _Float16 b) {
  switch (op) {
    case '+': return a + b;
    case '-': return a - b;
    case '*': return a * b;
    default: return a / b;
  }
}

// Compares the format value `got` with the native binary16 `ref` bit for bit
// (any NaN matches any NaN).
bool same_bits16(std::uint16_t got, std::uint16_t ref) {
  if (h_is_nan_bits(got) || h_is_nan_bits(ref)) return h_is_nan_bits(got) && h_is_nan_bits(ref);
  return got == ref;
}
#endif  // ATTNCERT_NATIVE_F16

// ---- MPFR emulation of a format --------------------------------------------

// op(r) computes into r (precision P) in the current, default exponent range
// and returns the ternary value; the result is then forced into the format's
// exponent range and subnormalized.  rnd is used throughout.
template <class F, class Op>
double mpfr_emulate(Op op, mpfr_rnd_t rnd = MPFR_RNDN) {
  constexpr int P = F::precision;
  mpfr_t r;
  mpfr_init2(r, P);
  int t = op(r, rnd);
  const mpfr_exp_t emin = mpfr_get_emin();
  const mpfr_exp_t emax = mpfr_get_emax();
  // MPFR writes x = m * 2^e with m in [1/2, 1): the smallest subnormal
  // 2^(EMIN-P+1) has e = EMIN - P + 2, the largest finite value e = EMAX + 1.
  mpfr_set_emin(F::emin - P + 2);
  mpfr_set_emax(F::emax + 1);
  t = mpfr_check_range(r, t, rnd);
  (void)mpfr_subnormalize(r, t, rnd);
  const double d = mpfr_get_d(r, MPFR_RNDN);  // exact: r has <= P bits
  mpfr_set_emin(emin);
  mpfr_set_emax(emax);
  mpfr_clear(r);
  return d;
}

template <class F>
double mpfr_round_double(double x, mpfr_rnd_t rnd = MPFR_RNDN) {
  return mpfr_emulate<F>([x](mpfr_ptr r, mpfr_rnd_t m) { return mpfr_set_d(r, x, m); }, rnd);
}

// a op b emulated in the format by MPFR.
template <class F>
double mpfr_op(char op, double a, double b, mpfr_rnd_t rnd = MPFR_RNDN) {
  mpfr_t ma, mb;
  mpfr_init2(ma, 64);
  mpfr_init2(mb, 64);
  mpfr_set_d(ma, a, MPFR_RNDN);
  mpfr_set_d(mb, b, MPFR_RNDN);
  const double d = mpfr_emulate<F>(
      [&](mpfr_ptr r, mpfr_rnd_t m) {
        switch (op) {
          case '+': return mpfr_add(r, ma, mb, m);
          case '-': return mpfr_sub(r, ma, mb, m);
          case '*': return mpfr_mul(r, ma, mb, m);
          case '/': return mpfr_div(r, ma, mb, m);
          case 'h': return mpfr_hypot(r, ma, mb, m);
          default: return mpfr_pow(r, ma, mb, m);
        }
      },
      rnd);
  mpfr_clear(ma);
  mpfr_clear(mb);
  return d;
}

template <class F>
F apply(char op, F a, F b) {
  switch (op) {
    case '+': return a + b;
    case '-': return a - b;
    case '*': return a * b;
    default: return a / b;
  }
}

template <class F>
std::uint16_t inf_bits() {
  return std::numeric_limits<F>::infinity().bits();
}

// ---- random inputs for rounding tests -------------------------------------

// A binary64 input: random significands over the whole exponent range of the
// format and a little beyond (subnormals, underflow to zero, overflow),
// exact midpoints between adjacent format values (subnormal range, normal
// range, the overflow threshold max + ulp/2) and their binary64 neighbours,
// format values and their neighbours, and raw binary64 bit patterns (NaN,
// inf, huge, tiny, subnormal binary64).
template <class F>
double random_input(std::mt19937_64& rng) {
  constexpr int P = F::precision, EMIN = F::emin, EMAX = F::emax;
  const int c = static_cast<int>(rng() % 10);
  const double sign = (rng() & 1u) ? -1.0 : 1.0;
  if (c <= 3) {
    std::uniform_int_distribution<int> ed(EMIN - P - 3, EMAX + 2);
    const double m = 1.0 + std::ldexp(static_cast<double>(rng() >> 12), -52);
    return sign * std::ldexp(m, ed(rng));
  }
  std::uniform_int_distribution<int> bd(0, inf_bits<F>() - 1);
  const auto b = static_cast<std::uint16_t>(bd(rng));
  const double lo = F::from_bits(b).to_double();
  if (c <= 7) {
    const double hi = b + 1 == inf_bits<F>() ? std::ldexp(1.0, EMAX + 1)
                                             : F::from_bits(static_cast<std::uint16_t>(b + 1)).to_double();
    const double mid = 0.5 * (lo + hi);  // exact
    switch (rng() % 3) {
      case 0: return sign * mid;
      case 1: return sign * std::nextafter(mid, inf);
      default: return sign * std::nextafter(mid, -inf);
    }
  }
  if (c == 8) {
    switch (rng() % 3) {
      case 0: return sign * lo;
      case 1: return sign * std::nextafter(lo, inf);
      default: return sign * std::nextafter(lo, -inf);
    }
  }
  return std::bit_cast<double>(static_cast<std::uint64_t>(rng()));
}

template <int P, int EMIN, int EMAX>
double truncate_to_format(double x) {  // MUTANT: rounds toward zero
  if (!std::isfinite(x) || x == 0.0) return x;
  int ex = 0;
  (void)std::frexp(x, &ex);
  const int q = std::max(ex - 1, EMIN) - (P - 1);
  const double r = std::ldexp(std::trunc(std::ldexp(x, -q)), q);
  if (std::fabs(r) > attncert::detail::max_finite<P, EMIN, EMAX>) return std::copysign(inf, x);
  return r == 0.0 ? std::copysign(0.0, x) : r;
}

template <int P, int EMIN, int EMAX>
double round_half_away_to_format(double x) {  // MUTANT: ties away from zero
  if (!std::isfinite(x) || x == 0.0) return x;
  int ex = 0;
  (void)std::frexp(x, &ex);
  const int q = std::max(ex - 1, EMIN) - (P - 1);
  const double r = std::ldexp(std::round(std::ldexp(x, -q)), q);
  if (std::fabs(r) > attncert::detail::max_finite<P, EMIN, EMAX>) return std::copysign(inf, x);
  return r == 0.0 ? std::copysign(0.0, x) : r;
}

#ifdef ATTNCERT_NATIVE_F16
// Number of inputs among n random ones on which `rounder` disagrees with the
// native _Float16 conversion (the check of test case 2, reused on mutants).
template <class Rounder>
std::size_t binary16_rounding_mismatches(Rounder rounder, std::size_t n, std::uint64_t salt,
                                         bool report) {
  auto rng = make_rng(salt);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = random_input<binary16>(rng);
    const double got = rounder(x);
    const double ref = static_cast<double>(native_f16(x));
    if (!same(got, ref)) {
      ++bad;
      if (report && bad <= 5) BOOST_ERROR("binary16(" << hex(x) << ") = " << hex(got) << ", _Float16 gives " << hex(ref));
    }
  }
  return bad;
}
#endif  // ATTNCERT_NATIVE_F16

}  // namespace

// ===========================================================================
// 1. Encodings.
// ===========================================================================

#ifdef ATTNCERT_NATIVE_F16
BOOST_AUTO_TEST_CASE(binary16_all_encodings_match_native_Float16) {
  std::size_t bad_roundtrip = 0, bad_value = 0;
  for (std::uint32_t u = 0; u < 65536u; ++u) {
    const auto b = static_cast<std::uint16_t>(u);
    const binary16 v = binary16::from_bits(b);
    if (v.bits() != b && ++bad_roundtrip <= 5) BOOST_ERROR("bits(from_bits(" << b << ")) = " << v.bits());
    const double ref = static_cast<double>(static_cast<float>(h_from_bits(b)));
    if (!same(v.to_double(), ref) && ++bad_value <= 5) {
      BOOST_ERROR("from_bits(" << b << ") = " << hex(v.to_double()) << ", _Float16 gives " << hex(ref));
    }
  }
  BOOST_TEST(bad_roundtrip == 0u);
  BOOST_TEST(bad_value == 0u);
  // Spot values of the encoding.
  BOOST_TEST(binary16::from_bits(0x3C00).to_double() == 1.0);
  BOOST_TEST(binary16::from_bits(0x0001).to_double() == std::ldexp(1.0, -24));
  BOOST_TEST(binary16::from_bits(0x03FF).to_double() == std::ldexp(1023.0, -24));
  BOOST_TEST(binary16::from_bits(0x0400).to_double() == std::ldexp(1.0, -14));
  BOOST_TEST(binary16::from_bits(0x7BFF).to_double() == 65504.0);
  BOOST_TEST(binary16::from_bits(0xFC00).to_double() == -inf);
  BOOST_TEST(binary16(1.0).bits() == 0x3C00);
  BOOST_TEST(binary16(-2.0).bits() == 0xC000);
  BOOST_TEST(binary16(-0.0).bits() == 0x8000);
}
#endif  // ATTNCERT_NATIVE_F16

BOOST_AUTO_TEST_CASE(bfloat16_all_encodings_are_top_half_of_binary32) {
  std::size_t bad = 0;
  for (std::uint32_t u = 0; u < 65536u; ++u) {
    const auto b = static_cast<std::uint16_t>(u);
    const bfloat16 v = bfloat16::from_bits(b);
    const float ref = std::bit_cast<float>(u << 16);
    if ((v.bits() != b || !same(v.to_double(), ref)) && ++bad <= 5) {
      BOOST_ERROR("bfloat16 encoding " << b << ": bits " << v.bits() << ", value " << hex(v.to_double()));
    }
  }
  BOOST_TEST(bad == 0u);
  BOOST_TEST(bfloat16(1.0).bits() == 0x3F80);
  BOOST_TEST(bfloat16::from_bits(0x0001).to_double() == std::ldexp(1.0, -133));
}

// ===========================================================================
// 2. binary16 rounding of binary64 values versus the native _Float16.
// ===========================================================================

#ifdef ATTNCERT_NATIVE_F16
BOOST_AUTO_TEST_CASE(binary16_rounding_matches_native_Float16_and_mpfr) {
  constexpr std::size_t n = 200000;
  const std::size_t bad = binary16_rounding_mismatches(
      [](double x) { return binary16(x).to_double(); }, n, 2, true);
  BOOST_TEST(bad == 0u);
  // Bits too (the comparison above is by value and sign), and MPFR as a third
  // opinion on the same inputs.
  auto rng = make_rng(2);
  std::size_t bad_bits = 0, bad_mpfr = 0, native_vs_mpfr = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = random_input<binary16>(rng);
    const binary16 v(x);
    if (!same_bits16(v.bits(), h_bits(native_f16(x)))) ++bad_bits;
    const double m = mpfr_round_double<binary16>(x);
    if (!same(v.to_double(), m) && ++bad_mpfr <= 5) BOOST_ERROR("binary16(" << hex(x) << ") vs MPFR " << hex(m));
    if (!same(static_cast<double>(native_f16(x)), m)) ++native_vs_mpfr;
  }
  BOOST_TEST(bad_bits == 0u);
  BOOST_TEST(bad_mpfr == 0u);
  BOOST_TEST(native_vs_mpfr == 0u);  // the assumption on GCC's conversion
  // Directly: every midpoint of the format and its two binary64 neighbours.
  std::size_t bad_mid = 0;
  for (std::uint32_t b = 0; b < inf_bits<binary16>(); ++b) {
    const double lo = binary16::from_bits(static_cast<std::uint16_t>(b)).to_double();
    const double hi = b + 1 == inf_bits<binary16>() ? 65536.0
                                                   : binary16::from_bits(static_cast<std::uint16_t>(b + 1)).to_double();
    const double mid = 0.5 * (lo + hi);
    for (double x : {mid, std::nextafter(mid, inf), std::nextafter(mid, -inf)}) {
      for (double s : {x, -x}) {
        if (!same_bits16(binary16(s).bits(), h_bits(native_f16(s))) && ++bad_mid <= 5) {
          BOOST_ERROR("binary16(" << hex(s) << ") != _Float16");
        }
      }
    }
  }
  BOOST_TEST(bad_mid == 0u);
}
#endif  // ATTNCERT_NATIVE_F16

// ===========================================================================
// 3. bfloat16 rounding of binary64 values versus MPFR.
// ===========================================================================

BOOST_AUTO_TEST_CASE(bfloat16_rounding_matches_mpfr) {
  auto rng = make_rng(3);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < 200000; ++i) {
    const double x = random_input<bfloat16>(rng);
    const double got = bfloat16(x).to_double();
    const double ref = mpfr_round_double<bfloat16>(x);
    if (!same(got, ref) && ++bad <= 5) BOOST_ERROR("bfloat16(" << hex(x) << ") = " << hex(got) << ", MPFR " << hex(ref));
  }
  BOOST_TEST(bad == 0u);
  // Every midpoint and its neighbours.
  std::size_t bad_mid = 0;
  for (std::uint32_t b = 0; b < inf_bits<bfloat16>(); ++b) {
    const double lo = bfloat16::from_bits(static_cast<std::uint16_t>(b)).to_double();
    const double hi = b + 1 == inf_bits<bfloat16>() ? std::ldexp(1.0, 128)
                                                   : bfloat16::from_bits(static_cast<std::uint16_t>(b + 1)).to_double();
    const double mid = 0.5 * (lo + hi);
    for (double x : {mid, std::nextafter(mid, inf), std::nextafter(mid, -inf)}) {
      for (double s : {x, -x}) {
        if (!same(bfloat16(s).to_double(), mpfr_round_double<bfloat16>(s)) && ++bad_mid <= 5) {
          BOOST_ERROR("bfloat16(" << hex(s) << ") != MPFR");
        }
      }
    }
  }
  BOOST_TEST(bad_mid == 0u);
}

BOOST_AUTO_TEST_CASE(bfloat16_rounding_of_binary32_matches_bit_trick) {
  // Third, independent reference for binary32 inputs: round to nearest even
  // on the bit pattern (valid for binary32 subnormals and overflow too).
  auto rng = make_rng(31);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < 200000; ++i) {
    const auto w = static_cast<std::uint32_t>(rng());
    const float f = std::bit_cast<float>(w);
    if (std::isnan(f)) continue;
    const auto ref = static_cast<std::uint16_t>((w + 0x7FFFu + ((w >> 16) & 1u)) >> 16);
    if (bfloat16(f).bits() != ref && ++bad <= 5) BOOST_ERROR("bfloat16(" << hex(f) << ")");
  }
  BOOST_TEST(bad == 0u);
}

// ===========================================================================
// 4. Arithmetic.
// ===========================================================================

#ifdef ATTNCERT_NATIVE_F16
BOOST_AUTO_TEST_CASE(binary16_arithmetic_random_pairs_match_native) {
  auto rng = make_rng(4);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < 200000; ++i) {
    const auto a = static_cast<std::uint16_t>(rng());
    const auto b = static_cast<std::uint16_t>(rng());
    for (char op : {'+', '-', '*', '/'}) {
      const std::uint16_t got = apply(op, binary16::from_bits(a), binary16::from_bits(b)).bits();
      const std::uint16_t ref = h_bits(native_op(op, h_from_bits(a), h_from_bits(b)));
      if (!same_bits16(got, ref) && ++bad <= 5) BOOST_ERROR(a << ' ' << op << ' ' << b << ": " << got << " vs " << ref);
    }
  }
  BOOST_TEST(bad == 0u);
}
#endif  // ATTNCERT_NATIVE_F16

#ifdef ATTNCERT_NATIVE_F16
BOOST_AUTO_TEST_CASE(binary16_arithmetic_exhaustive_slices_match_native_and_mpfr) {
  // All 65536 a, against a few fixed b, both operand orders.
  const double bs[] = {1.0, 3.0, 0.1, std::ldexp(1.0, -24), 65504.0, -std::ldexp(1.0, -14)};
  std::size_t bad_native = 0, bad_mpfr = 0;
  for (double bd : bs) {
    const binary16 b(bd);
    for (std::uint32_t u = 0; u < 65536u; ++u) {
      const binary16 a = binary16::from_bits(static_cast<std::uint16_t>(u));
      for (char op : {'+', '-', '*', '/'}) {
        for (int order = 0; order < 2; ++order) {
          const binary16 x = order ? b : a;
          const binary16 y = order ? a : b;
          const binary16 got = apply(op, x, y);
          const std::uint16_t ref = h_bits(native_op(op, h_from_bits(x.bits()), h_from_bits(y.bits())));
          if (!same_bits16(got.bits(), ref) && ++bad_native <= 5) BOOST_ERROR(x << op << y << " vs native");
          if (op == '/' || bd == 0.1) {  // MPFR on a subset, to keep the case fast
            const double m = mpfr_op<binary16>(op, x.to_double(), y.to_double());
            if (!same(got.to_double(), m) && ++bad_mpfr <= 5) BOOST_ERROR(x << op << y << " vs MPFR");
          }
        }
      }
    }
  }
  BOOST_TEST(bad_native == 0u);
  BOOST_TEST(bad_mpfr == 0u);
}
#endif  // ATTNCERT_NATIVE_F16

BOOST_AUTO_TEST_CASE(bfloat16_arithmetic_matches_mpfr) {
  auto rng = make_rng(41);
  std::size_t bad = 0;
  // Random encodings (including NaN, inf, subnormals).
  for (std::size_t i = 0; i < 100000; ++i) {
    const bfloat16 a = bfloat16::from_bits(static_cast<std::uint16_t>(rng()));
    const bfloat16 b = bfloat16::from_bits(static_cast<std::uint16_t>(rng()));
    for (char op : {'+', '-', '*', '/'}) {
      const double got = apply(op, a, b).to_double();
      const double ref = mpfr_op<bfloat16>(op, a.to_double(), b.to_double());
      if (!same(got, ref) && ++bad <= 5) BOOST_ERROR(a << op << b << " = " << hex(got) << ", MPFR " << hex(ref));
    }
  }
  // Exhaustive slice: all a against b = 3 (quotients are never exact).
  const bfloat16 b3(3.0);
  for (std::uint32_t u = 0; u < 65536u; ++u) {
    const bfloat16 a = bfloat16::from_bits(static_cast<std::uint16_t>(u));
    for (char op : {'+', '*', '/'}) {
      const double got = apply(op, a, b3).to_double();
      const double ref = mpfr_op<bfloat16>(op, a.to_double(), 3.0);
      if (!same(got, ref) && ++bad <= 5) BOOST_ERROR(a << op << b3 << " = " << hex(got) << ", MPFR " << hex(ref));
    }
  }
  BOOST_TEST(bad == 0u);
}

#ifdef ATTNCERT_NATIVE_F16
BOOST_AUTO_TEST_CASE(compound_assignment_and_mixed_literals) {
  binary16 x = 1.0;
  x += 2;
  BOOST_TEST(x.to_double() == 3.0);
  x *= 0.5;
  BOOST_TEST(x.to_double() == 1.5);
  x -= 1.5f;
  BOOST_TEST(x.to_double() == 0.0);
  BOOST_TEST(!signbit(x));
  x = 1.0;
  x /= 3u;
  BOOST_TEST(x.bits() == h_bits(native_op('/', h_from_bits(0x3C00), native_f16(3.0))));
  BOOST_TEST((+x).bits() == x.bits());
  BOOST_TEST((-x).bits() == (x.bits() ^ 0x8000u));
  // Integers beyond the format round once (2049 -> 2048, ties to even).
  BOOST_TEST(binary16(2049).to_double() == 2048.0);
  BOOST_TEST(binary16(2051L).to_double() == 2052.0);
  BOOST_TEST(binary16(70000LL).to_double() == inf);
  BOOST_TEST(binary16(65519UL).to_double() == 65504.0);
}
#endif  // ATTNCERT_NATIVE_F16

// ===========================================================================
// 5. Elementary functions, exhaustively, against MPFR-emulated correct rounding.
// ===========================================================================

namespace {

using attncert::detail::elementary;
using mpfr_fn1 = int (*)(mpfr_ptr, mpfr_srcptr, mpfr_rnd_t);

// Smallest distance, in binary64 ulps of the libm result, between the libm
// result and a rounding boundary of the format, over all non-special inputs
// (an independent re-derivation of the quantity the implementation tests).
template <class F>
double closest_approach_ulps(attncert::detail::elementary f) {
  double best = inf;
  for (std::uint32_t u = 0; u < 65536u; ++u) {
    const double x = F::from_bits(static_cast<std::uint16_t>(u)).to_double();
    double special = 0.0;
    if (attncert::detail::elementary_special(f, x, special)) continue;
    const double y = std::fabs(attncert::detail::elementary_libm(f, x));
    if (!std::isfinite(y) || y == 0.0) continue;
    // Quantum of the format at y; the nearest midpoint is (floor(y/quantum) + 1/2) quantum.
    const int e = std::ilogb(y);
    const double quantum = std::ldexp(1.0, std::max(e, F::emin) - (F::precision - 1));
    const double mid = (std::floor(y / quantum) + 0.5) * quantum;
    const double ulp = std::nextafter(y, inf) - y;
    best = std::min(best, std::fabs(y - mid) / ulp);
  }
  return best;
}

// Compares ours(x) with MPFR's correctly rounded result for every encoding x.
template <class F, class Ours>
void exhaustive_check(const char* name, Ours ours, mpfr_fn1 fn, const elementary* f = nullptr) {
  const std::uint64_t before = attncert::detail::mpfr_fallback_count.load();
  mpfr_t xin;
  mpfr_init2(xin, 64);
  std::size_t bad = 0;
  for (std::uint32_t u = 0; u < 65536u; ++u) {
    const F x = F::from_bits(static_cast<std::uint16_t>(u));
    mpfr_set_d(xin, x.to_double(), MPFR_RNDN);
    const double ref = mpfr_emulate<F>([&](mpfr_ptr r, mpfr_rnd_t m) { return fn(r, xin, m); });
    const double got = ours(x).to_double();
    if (!same(got, ref) && ++bad <= 5) {
      BOOST_ERROR(name << "(" << hex(x.to_double()) << ") = " << hex(got) << ", MPFR " << hex(ref));
    }
  }
  mpfr_clear(xin);
  const std::uint64_t fallbacks = attncert::detail::mpfr_fallback_count.load() - before;
  BOOST_TEST_MESSAGE(name << " P=" << F::precision << ": 65536 inputs, " << bad
                          << " mismatches, " << fallbacks << " took the MPFR fallback");
  BOOST_TEST(bad == 0u);
  if (f != nullptr) {
    const double closest = closest_approach_ulps<F>(*f);
    BOOST_TEST_MESSAGE(name << " P=" << F::precision << ": libm result never closer than " << closest
                            << " binary64 ulps to a rounding boundary");
    // Consistency of the counter with that margin.
    if (closest > attncert::detail::fallback_window_ulps) BOOST_TEST(fallbacks == 0u);
  }
}

// The MPFR path alone (forced), on every non-special encoding.
template <class F>
void exhaustive_mpfr_path(attncert::detail::elementary f, mpfr_fn1 fn) {
  constexpr int P = F::precision, EMIN = F::emin, EMAX = F::emax;
  mpfr_t xin;
  mpfr_init2(xin, 64);
  std::size_t bad = 0, checked = 0;
  for (std::uint32_t u = 0; u < 65536u; ++u) {
    const double x = F::from_bits(static_cast<std::uint16_t>(u)).to_double();
    double special = 0.0;
    if (attncert::detail::elementary_special(f, x, special)) continue;
    mpfr_set_d(xin, x, MPFR_RNDN);
    const double ref = mpfr_emulate<F>([&](mpfr_ptr r, mpfr_rnd_t m) { return fn(r, xin, m); });
    const double got = attncert::detail::elementary_mpfr<P, EMIN, EMAX>(f, x);
    ++checked;
    if (!same(got, ref) && ++bad <= 5) {
      BOOST_ERROR(attncert::detail::elementary_name(f) << " MPFR path (" << hex(x) << ") = " << hex(got)
                                                       << ", reference " << hex(ref));
    }
  }
  mpfr_clear(xin);
  BOOST_TEST_MESSAGE(attncert::detail::elementary_name(f) << " P=" << P << ": forced MPFR path on "
                                                          << checked << " inputs, " << bad << " mismatches");
  BOOST_TEST(bad == 0u);
  BOOST_TEST(checked > 30000u);
}

}  // namespace

BOOST_AUTO_TEST_CASE_TEMPLATE(exhaustive_exp, F, formats) {
  static constexpr elementary f = elementary::exp;
  exhaustive_check<F>("exp", [](F x) { return exp(x); }, mpfr_exp, &f);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(exhaustive_log, F, formats) {
  static constexpr elementary f = elementary::log;
  exhaustive_check<F>("log", [](F x) { return log(x); }, mpfr_log, &f);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(exhaustive_tanh, F, formats) {
  static constexpr elementary f = elementary::tanh;
  exhaustive_check<F>("tanh", [](F x) { return tanh(x); }, mpfr_tanh, &f);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(exhaustive_expm1, F, formats) {
  static constexpr elementary f = elementary::expm1;
  exhaustive_check<F>("expm1", [](F x) { return expm1(x); }, mpfr_expm1, &f);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(exhaustive_log1p, F, formats) {
  static constexpr elementary f = elementary::log1p;
  exhaustive_check<F>("log1p", [](F x) { return log1p(x); }, mpfr_log1p, &f);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(exhaustive_sqrt, F, formats) {
  exhaustive_check<F>("sqrt", [](F x) { return sqrt(x); }, mpfr_sqrt);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(forced_mpfr_path_exp_log, F, formats) {
  exhaustive_mpfr_path<F>(elementary::exp, mpfr_exp);
  exhaustive_mpfr_path<F>(elementary::log, mpfr_log);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(forced_mpfr_path_tanh, F, formats) {
  exhaustive_mpfr_path<F>(elementary::tanh, mpfr_tanh);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(forced_mpfr_path_expm1_log1p, F, formats) {
  exhaustive_mpfr_path<F>(elementary::expm1, mpfr_expm1);
  exhaustive_mpfr_path<F>(elementary::log1p, mpfr_log1p);
}

BOOST_AUTO_TEST_CASE(fallback_window_detection) {
  using attncert::detail::near_rounding_boundary;
  // binary16 midpoints: normal range, subnormal range, 0 | denorm_min, overflow threshold.
  for (double m : {1.0 + std::ldexp(1.0, -11), 1.0 - std::ldexp(1.0, -12), 3.0 * std::ldexp(1.0, -25),
                   std::ldexp(1.0, -25), 65520.0, 2047.5 * 8.0}) {
    for (double s : {m, -m}) {
      double up = s, down = s;
      for (int k = 0; k <= 4; ++k) {
        BOOST_TEST((near_rounding_boundary<11, -14, 15>(up)));
        BOOST_TEST((near_rounding_boundary<11, -14, 15>(down)));
        up = std::nextafter(up, inf);
        down = std::nextafter(down, -inf);
      }
      BOOST_TEST(!(near_rounding_boundary<11, -14, 15>(up)));  // 5 ulps away
      BOOST_TEST(!(near_rounding_boundary<11, -14, 15>(down)));
    }
  }
  // Format values and values far from midpoints are not flagged.
  for (double v : {1.0, 65504.0, std::ldexp(1.0, -24), 0.1, 1e6, 0.0, inf}) {
    BOOST_TEST(!(near_rounding_boundary<11, -14, 15>(v)));
  }
  BOOST_TEST((near_rounding_boundary<8, -126, 127>(0x1.FFp127)));  // bfloat16 overflow threshold
  BOOST_TEST((near_rounding_boundary<8, -126, 127>(0x1p-134)));    // bfloat16 0 | denorm_min
  // The public path takes the fallback on an exact hypot tie.
  const std::uint64_t before = attncert::detail::mpfr_fallback_count.load();
  BOOST_TEST(hypot(binary16(1233), binary16(1644)).to_double() == 2056.0);
  BOOST_TEST(attncert::detail::mpfr_fallback_count.load() == before + 1);
}

BOOST_AUTO_TEST_CASE(mpfr_midpoint_decision_and_undecidable_case) {
  // Rounding a 256-bit value near the midpoint 1 + 2^-11 of binary16.
  using attncert::detail::mpfr_round_to_format;
  const auto no_tie = [](double) { return false; };
  const auto tie = [](double) { return true; };
  mpfr_t z;
  mpfr_init2(z, 256);
  mpfr_set_d(z, 1.0 + std::ldexp(1.0, -11), MPFR_RNDN);
  mpfr_t eps;
  mpfr_init2(eps, 256);
  // 2^-200 above: decided, rounds up.
  mpfr_set_ui_2exp(eps, 1, -200, MPFR_RNDN);
  mpfr_add(z, z, eps, MPFR_RNDN);
  BOOST_TEST((mpfr_round_to_format<11, -14, 15>(z, no_tie, "t")) == 1.0 + std::ldexp(1.0, -10));
  // 2^-200 below: decided, rounds down.
  mpfr_set_d(z, 1.0 + std::ldexp(1.0, -11), MPFR_RNDN);
  mpfr_sub(z, z, eps, MPFR_RNDN);
  BOOST_TEST((mpfr_round_to_format<11, -14, 15>(z, no_tie, "t")) == 1.0);
  // 2^-253 above: within 2^-250 relative, reported by an exception.
  mpfr_set_d(z, 1.0 + std::ldexp(1.0, -11), MPFR_RNDN);
  mpfr_set_ui_2exp(eps, 1, -253, MPFR_RNDN);
  mpfr_add(z, z, eps, MPFR_RNDN);
  BOOST_CHECK_THROW((mpfr_round_to_format<11, -14, 15>(z, no_tie, "t")), std::runtime_error);
  // Exactly the midpoint: undecidable for a transcendental function...
  mpfr_set_d(z, 1.0 + std::ldexp(1.0, -11), MPFR_RNDN);
  BOOST_CHECK_THROW((mpfr_round_to_format<11, -14, 15>(z, no_tie, "t")), std::runtime_error);
  // ...a tie to even when the caller proves it exact.
  BOOST_TEST((mpfr_round_to_format<11, -14, 15>(z, tie, "t")) == 1.0);
  mpfr_set_d(z, 1.0 + 3 * std::ldexp(1.0, -11), MPFR_RNDN);
  BOOST_TEST((mpfr_round_to_format<11, -14, 15>(z, tie, "t")) == 1.0 + std::ldexp(1.0, -9));
  // Subnormal range, underflow and overflow.
  mpfr_set_d(z, -std::ldexp(3.0, -26), MPFR_RNDN);  // -0.75 * 2^-24 -> -2^-24
  BOOST_TEST((mpfr_round_to_format<11, -14, 15>(z, no_tie, "t")) == -std::ldexp(1.0, -24));
  mpfr_set_d(z, -std::ldexp(1.0, -27), MPFR_RNDN);  // -> -0
  const double r0 = mpfr_round_to_format<11, -14, 15>(z, no_tie, "t");
  BOOST_TEST((r0 == 0.0 && std::signbit(r0)));
  mpfr_set_d(z, 65520.0, MPFR_RNDN);  // the overflow threshold, a tie -> inf
  BOOST_TEST((mpfr_round_to_format<11, -14, 15>(z, tie, "t")) == inf);
  mpfr_set_d(z, 65519.0, MPFR_RNDN);
  BOOST_TEST((mpfr_round_to_format<11, -14, 15>(z, no_tie, "t")) == 65504.0);
  mpfr_clear(eps);
  mpfr_clear(z);
}

BOOST_AUTO_TEST_CASE(mpfr_fallback_restores_caller_exponent_range) {
  const mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
  mpfr_set_emin(-20);
  mpfr_set_emax(20);
  mpfr_clear_flags();
  const double r = attncert::detail::elementary_mpfr<11, -14, 15>(elementary::exp, 30.0);
  BOOST_TEST(r == inf);  // e^30 > 65520, computed despite the narrow caller range
  BOOST_TEST(mpfr_get_emin() == -20);
  BOOST_TEST(mpfr_get_emax() == 20);
  BOOST_TEST(mpfr_inexflag_p() == 0);  // caller's flags untouched
  mpfr_set_emin(emin);
  mpfr_set_emax(emax);
}

BOOST_AUTO_TEST_CASE(hypot_is_correctly_rounded_including_exact_ties) {
  // Pythagorean triples whose hypotenuse is a midpoint: ties to even.
  BOOST_TEST(hypot(binary16(1233), binary16(1644)).to_double() == 2056.0);  // 2055 -> 2056
  BOOST_TEST(hypot(binary16(1239), binary16(1652)).to_double() == 2064.0);  // 2065 -> 2064
  BOOST_TEST(hypot(bfloat16(159), bfloat16(212)).to_double() == 264.0);     // 265 -> 264
  BOOST_TEST(hypot(bfloat16(165), bfloat16(220)).to_double() == 276.0);     // 275 -> 276
  BOOST_TEST((attncert::detail::hypot_mpfr<11, -14, 15>(1233.0, 1644.0)) == 2056.0);
  BOOST_TEST((attncert::detail::hypot_mpfr<8, -126, 127>(165.0, 220.0)) == 276.0);
  BOOST_TEST(hypot(binary16(-inf), binary16(std::nan(""))).to_double() == inf);
  BOOST_TEST(hypot(binary16(-3), binary16(0)).to_double() == 3.0);
  auto rng = make_rng(51);
  std::size_t bad = 0, bad_forced = 0;
  for (std::size_t i = 0; i < 50000; ++i) {
    const binary16 a = binary16::from_bits(static_cast<std::uint16_t>(rng()));
    const binary16 b = binary16::from_bits(static_cast<std::uint16_t>(rng()));
    const double ref = mpfr_op<binary16>('h', a.to_double(), b.to_double());
    if (!same(hypot(a, b).to_double(), ref) && ++bad <= 5) BOOST_ERROR("hypot(" << a << ", " << b << ")");
    if (isfinite(a) && isfinite(b) &&
        !same(attncert::detail::hypot_mpfr<11, -14, 15>(a.to_double(), b.to_double()), ref) && ++bad_forced <= 5) {
      BOOST_ERROR("hypot MPFR path (" << a << ", " << b << ")");
    }
    const bfloat16 c = bfloat16::from_bits(static_cast<std::uint16_t>(rng()));
    const bfloat16 d = bfloat16::from_bits(static_cast<std::uint16_t>(rng()));
    const double ref2 = mpfr_op<bfloat16>('h', c.to_double(), d.to_double());
    if (!same(hypot(c, d).to_double(), ref2) && ++bad <= 5) BOOST_ERROR("hypot(" << c << ", " << d << ")");
  }
  BOOST_TEST(bad == 0u);
  BOOST_TEST(bad_forced == 0u);
}

BOOST_AUTO_TEST_CASE(pow_is_faithful) {
  auto rng = make_rng(52);
  std::size_t unfaithful = 0, not_nearest = 0;
  for (std::size_t i = 0; i < 50000; ++i) {
    const binary16 a = binary16::from_bits(static_cast<std::uint16_t>(rng() & 0x7FFFu));  // a >= 0
    // Exponents of moderate size so that results are not all 0 or inf.
    const binary16 b(std::ldexp(static_cast<double>(static_cast<std::int64_t>(rng() % 4001) - 2000), -7));
    const double got = pow(a, b).to_double();
    const double down = mpfr_op<binary16>('p', a.to_double(), b.to_double(), MPFR_RNDD);
    const double up = mpfr_op<binary16>('p', a.to_double(), b.to_double(), MPFR_RNDU);
    const double nearest = mpfr_op<binary16>('p', a.to_double(), b.to_double(), MPFR_RNDN);
    if (!same(got, down) && !same(got, up) && !(std::isnan(got) && std::isnan(nearest)) && ++unfaithful <= 5) {
      BOOST_ERROR("pow(" << a << ", " << b << ") = " << got << " not in [" << down << ", " << up << "]");
    }
    if (!same(got, nearest)) ++not_nearest;
  }
  BOOST_TEST_MESSAGE("pow: 50000 random binary16 pairs, " << not_nearest << " not correctly rounded (allowed)");
  BOOST_TEST(unfaithful == 0u);
}

// ===========================================================================
// 6. Limits and special values.
// ===========================================================================

BOOST_AUTO_TEST_CASE(numeric_limits_binary16) {
  using L = std::numeric_limits<binary16>;
  static_assert(L::is_specialized && L::is_signed && !L::is_integer && !L::is_exact);
  static_assert(!L::is_iec559 && L::has_infinity && L::has_quiet_NaN && L::has_signaling_NaN);
  static_assert(L::has_denorm == std::denorm_present && L::round_style == std::round_to_nearest);
  static_assert(L::digits == 11 && L::digits10 == 3 && L::max_digits10 == 5 && L::radix == 2);
  static_assert(L::min_exponent == -13 && L::max_exponent == 16);
  static_assert(L::min_exponent10 == -4 && L::max_exponent10 == 4);
  static_assert(L::max().bits() == 0x7BFF && L::min().bits() == 0x0400 && L::denorm_min().bits() == 0x0001);
  static_assert(L::lowest().bits() == 0xFBFF && L::infinity().bits() == 0x7C00 && L::epsilon().bits() == 0x1400);
  BOOST_TEST(L::max().to_double() == 65504.0);
  BOOST_TEST(L::lowest().to_double() == -65504.0);
  BOOST_TEST(L::min().to_double() == std::ldexp(1.0, -14));
  BOOST_TEST(L::denorm_min().to_double() == std::ldexp(1.0, -24));
  BOOST_TEST(L::epsilon().to_double() == std::ldexp(1.0, -10));
  BOOST_TEST(L::round_error().to_double() == 0.5);
  BOOST_TEST(L::infinity().to_double() == inf);
  BOOST_TEST(isnan(L::quiet_NaN()));
  BOOST_TEST(isnan(L::signaling_NaN()));
  const std::uint16_t s = L::signaling_NaN().bits();
  BOOST_TEST(((s & 0x7C00u) == 0x7C00u && (s & 0x0200u) == 0 && (s & 0x03FFu) != 0));  // quiet bit clear
  BOOST_TEST((L::quiet_NaN().bits() & 0x0200u) != 0);
  // epsilon is the gap after 1
  BOOST_TEST((binary16(1.0) + L::epsilon()).bits() == 0x3C01);
}

BOOST_AUTO_TEST_CASE(numeric_limits_bfloat16) {
  using L = std::numeric_limits<bfloat16>;
  static_assert(L::digits == 8 && L::digits10 == 2 && L::max_digits10 == 4);
  static_assert(L::min_exponent == std::numeric_limits<float>::min_exponent);
  static_assert(L::max_exponent == std::numeric_limits<float>::max_exponent);
  static_assert(L::min_exponent10 == std::numeric_limits<float>::min_exponent10);
  static_assert(L::max_exponent10 == std::numeric_limits<float>::max_exponent10);
  static_assert(L::max().bits() == 0x7F7F && L::min().bits() == 0x0080 && L::denorm_min().bits() == 0x0001);
  static_assert(L::epsilon().bits() == 0x3C00 && L::infinity().bits() == 0x7F80);
  BOOST_TEST(L::max().to_double() == 0x1.FEp127);
  BOOST_TEST(L::min().to_double() == std::ldexp(1.0, -126));
  BOOST_TEST(L::denorm_min().to_double() == std::ldexp(1.0, -133));
  BOOST_TEST(L::epsilon().to_double() == std::ldexp(1.0, -7));
  BOOST_TEST((L::signaling_NaN().bits() & 0x0040u) == 0);
  BOOST_TEST(isnan(L::signaling_NaN()));
}

BOOST_AUTO_TEST_CASE(overflow_to_infinity) {
  // binary16: max = 65504, next binade would start at 65536, the threshold
  // 65520 is a tie whose even neighbour is 2^16: infinity.
  BOOST_TEST((binary16(65504) + binary16(16)).to_double() == inf);   // exactly 65520: tie -> inf
  BOOST_TEST((binary16(65504) + binary16(8)).to_double() == 65504.0);  // 65512 -> 65504
  BOOST_TEST(binary16(65519.999).to_double() == 65504.0);
  BOOST_TEST(binary16(65520.0).to_double() == inf);
  BOOST_TEST(binary16(std::nextafter(65520.0, 0.0)).to_double() == 65504.0);
  BOOST_TEST(binary16(-65520.0).to_double() == -inf);
  BOOST_TEST((binary16(65504) * binary16(2)).to_double() == inf);
  BOOST_TEST((binary16(-65504) - binary16(65504)).to_double() == -inf);
  BOOST_TEST((binary16(1) / binary16(0)).to_double() == inf);
  BOOST_TEST(binary16(1e300).to_double() == inf);
  BOOST_TEST(exp(binary16(12)).to_double() == inf);       // e^12 = 162754.8
  BOOST_TEST(exp(binary16(11)).to_double() == 59872.0);   // e^11 = 59874.1
  // bfloat16: threshold (2 - 2^-8) * 2^127.
  BOOST_TEST(bfloat16(0x1.FFp127).to_double() == inf);
  BOOST_TEST(bfloat16(std::nextafter(0x1.FFp127, 0.0)).to_double() == 0x1.FEp127);
  BOOST_TEST((bfloat16(0x1.FEp127) + bfloat16(0x1p119)).to_double() == inf);
}

BOOST_AUTO_TEST_CASE(subnormals) {
  const double u = std::ldexp(1.0, -24);  // smallest binary16 subnormal
  BOOST_TEST(binary16(u).bits() == 0x0001);
  BOOST_TEST(binary16(u / 2).bits() == 0x0000);                       // 2^-25: tie -> 0 (even)
  BOOST_TEST(binary16(-u / 2).bits() == 0x8000);                      // -> -0
  BOOST_TEST(binary16(std::nextafter(u / 2, 1.0)).bits() == 0x0001);  // just above the tie
  BOOST_TEST(binary16(0.75 * u).bits() == 0x0001);                    // 3 * 2^-26 -> 2^-24
  BOOST_TEST(binary16(1.5 * u).bits() == 0x0002);                     // tie -> 2 (even)
  BOOST_TEST(binary16(2.5 * u).bits() == 0x0002);                     // tie -> 2 (even)
  BOOST_TEST(binary16(std::ldexp(1023.5, -24)).bits() == 0x0400);     // rounds up into the normals
  BOOST_TEST((binary16(std::ldexp(1.0, -14)) / binary16(1024)).bits() == 0x0001);  // gradual underflow
  BOOST_TEST((binary16(std::ldexp(1.0, -14)) / binary16(4096)).bits() == 0x0000);
  BOOST_TEST((binary16(std::ldexp(3.0, -24)) * binary16(0.5)).bits() == 0x0002);   // 1.5 units -> 2
  BOOST_TEST(bfloat16(std::ldexp(1.0, -133)).bits() == 0x0001);
  BOOST_TEST(bfloat16(std::ldexp(1.0, -134)).bits() == 0x0000);
  BOOST_TEST(bfloat16(std::ldexp(3.0, -135)).bits() == 0x0001);
}

BOOST_AUTO_TEST_CASE(signed_zero_and_nan) {
  const binary16 pz(0.0), nz(-0.0), one(1), nan = std::numeric_limits<binary16>::quiet_NaN();
  BOOST_TEST(binary16().bits() == 0x0000);
  BOOST_TEST(nz.bits() == 0x8000);
  BOOST_TEST((-pz).bits() == 0x8000);
  BOOST_TEST((one - one).bits() == 0x0000);
  BOOST_TEST((nz + nz).bits() == 0x8000);
  BOOST_TEST((nz + pz).bits() == 0x0000);
  BOOST_TEST((binary16(-1) * pz).bits() == 0x8000);
  BOOST_TEST((one / nz).to_double() == -inf);
  BOOST_TEST(sqrt(nz).bits() == 0x8000);
  BOOST_TEST(tanh(nz).bits() == 0x8000);
  BOOST_TEST(expm1(nz).bits() == 0x8000);
  BOOST_TEST(log1p(nz).bits() == 0x8000);
  BOOST_TEST(pz == nz);
  BOOST_TEST(!(pz < nz));
  BOOST_TEST(binary16(-1e-30).bits() == 0x8000);  // underflow keeps the sign
  BOOST_TEST(ceil(binary16(-0.5)).bits() == 0x8000);
  // NaN propagation
  BOOST_TEST(isnan(nan + one));
  BOOST_TEST(isnan(one * nan));
  BOOST_TEST(isnan(binary16(inf) - binary16(inf)));
  BOOST_TEST(isnan(pz * binary16(inf)));
  BOOST_TEST(isnan(pz / pz));
  BOOST_TEST(isnan(sqrt(binary16(-1))));
  BOOST_TEST(isnan(log(binary16(-1))));
  BOOST_TEST(isnan(log1p(binary16(-2))));
  BOOST_TEST(isnan(exp(nan)));
  BOOST_TEST(isnan(bfloat16(std::nan("")) + bfloat16(1)));
  // Comparisons with NaN: all false except !=.
  BOOST_TEST(!(nan == nan));
  BOOST_TEST((nan != nan));
  BOOST_TEST(!(nan < one));
  BOOST_TEST(!(nan <= one));
  BOOST_TEST(!(nan > one));
  BOOST_TEST(!(nan >= one));
  BOOST_TEST(!(one == nan));
  BOOST_TEST(!(one < nan));
  BOOST_TEST(!(one >= nan));
  BOOST_TEST((one != nan));
  BOOST_TEST((one < binary16(2)));
  BOOST_TEST((binary16(2) >= binary16(2)));
  // Exact special values of the elementary functions.
  BOOST_TEST(exp(pz).bits() == 0x3C00);
  BOOST_TEST(exp(binary16(-inf)).bits() == 0x0000);
  BOOST_TEST(log(one).bits() == 0x0000);
  BOOST_TEST(log(nz).to_double() == -inf);
  BOOST_TEST(log1p(binary16(-1)).to_double() == -inf);
  BOOST_TEST(tanh(binary16(-inf)).to_double() == -1.0);
  BOOST_TEST(expm1(binary16(-inf)).to_double() == -1.0);
  // Signalling NaN encodings survive from_bits/bits.
  BOOST_TEST(binary16::from_bits(0x7C01).bits() == 0x7C01);
  BOOST_TEST(bfloat16::from_bits(0xFF81).bits() == 0xFF81);
}

BOOST_AUTO_TEST_CASE(other_free_functions) {
  using std::max;  // ADL must still pick attncert::max
  using std::min;
  const binary16 a(1.5), b(-2.25), nan = std::numeric_limits<binary16>::quiet_NaN();
  BOOST_TEST(abs(b).to_double() == 2.25);
  BOOST_TEST(fabs(binary16(-0.0)).bits() == 0x0000);
  BOOST_TEST(max(a, b).to_double() == 1.5);
  BOOST_TEST(min(a, b).to_double() == -2.25);
  BOOST_TEST(fmax(nan, b).to_double() == -2.25);
  BOOST_TEST(fmin(a, nan).to_double() == 1.5);
  BOOST_TEST(fmax(binary16(-0.0), binary16(0.0)).bits() == 0x0000);
  BOOST_TEST(fmin(binary16(0.0), binary16(-0.0)).bits() == 0x8000);
  BOOST_TEST(floor(b).to_double() == -3.0);
  BOOST_TEST(ceil(b).to_double() == -2.0);
  BOOST_TEST(floor(binary16(1000.5)).to_double() == 1000.0);
  BOOST_TEST(floor(binary16(1000.75)).to_double() == 1001.0);  // 1000.75 is a tie -> 1001
  int e = 0;
  BOOST_TEST(frexp(binary16(48), &e).to_double() == 0.75);
  BOOST_TEST(e == 6);
  BOOST_TEST(frexp(binary16::from_bits(0x0003), &e).to_double() == 0.75);
  BOOST_TEST(e == -22);
  BOOST_TEST(ldexp(binary16(0.75), 6).to_double() == 48.0);
  BOOST_TEST(ldexp(binary16(1.0), 16).to_double() == inf);
  BOOST_TEST(ldexp(binary16(3.0), -26).bits() == 0x0001);  // 0.75 * 2^-24 rounds up
  BOOST_TEST(ldexp(binary16(1.0), -100000).bits() == 0x0000);
  BOOST_TEST(pow(binary16(2), binary16(10)).to_double() == 1024.0);
  BOOST_TEST(pow(binary16(63), binary16(2)).to_double() == 3968.0);  // 3969: exact tie -> even
  BOOST_TEST(isinf(binary16(inf)));
  BOOST_TEST(!isfinite(binary16(inf)));
  BOOST_TEST(isfinite(a));
  BOOST_TEST(signbit(b));
}

BOOST_AUTO_TEST_CASE(printing_round_trips) {
  std::size_t bad = 0;
  for (std::uint32_t u = 0; u < 65536u; ++u) {
    const binary16 h = binary16::from_bits(static_cast<std::uint16_t>(u));
    const bfloat16 g = bfloat16::from_bits(static_cast<std::uint16_t>(u));
    if (isfinite(h)) {
      std::ostringstream s;
      s << h;
      if (binary16(std::strtod(s.str().c_str(), nullptr)).bits() != h.bits() && ++bad <= 5) BOOST_ERROR(s.str());
    }
    if (isfinite(g)) {
      std::ostringstream s;
      s << g;
      if (bfloat16(std::strtod(s.str().c_str(), nullptr)).bits() != g.bits() && ++bad <= 5) BOOST_ERROR(s.str());
    }
  }
  BOOST_TEST(bad == 0u);
  std::ostringstream s;
  s << binary16(0.1) << ' ' << binary16(-inf) << ' ' << bfloat16(3.14159);
  BOOST_TEST(s.str() == "0.099976 -inf 3.141");
}

// ===========================================================================
// 7. Mutation sanity: the checks above detect a wrong rounding.
// ===========================================================================

#ifdef ATTNCERT_NATIVE_F16
BOOST_AUTO_TEST_CASE(mutation_truncation_and_ties_away_are_detected) {
  // A specific input: 1 + 3 * 2^-12 (3/4 of an ulp above 1).
  const double x = 1.0 + 3.0 * std::ldexp(1.0, -12);
  const double ours = binary16(x).to_double();
  const double native = static_cast<double>(native_f16(x));
  const double truncated = truncate_to_format<11, -14, 15>(x);
  BOOST_TEST(ours == 1.0 + std::ldexp(1.0, -10));
  BOOST_TEST(ours == native);
  BOOST_TEST(truncated == 1.0);
  BOOST_TEST(truncated != native);
  // A tie: 1 + 2^-11 goes to 1 (even), not away from zero.
  const double t = 1.0 + std::ldexp(1.0, -11);
  BOOST_TEST(binary16(t).to_double() == 1.0);
  BOOST_TEST((round_half_away_to_format<11, -14, 15>(t) != static_cast<double>(native_f16(t))));
  // The random check of case 2, run on the mutants, fails massively.
  const std::size_t n = 20000;
  const std::size_t trunc_bad = binary16_rounding_mismatches(truncate_to_format<11, -14, 15>, n, 7, false);
  const std::size_t away_bad = binary16_rounding_mismatches(round_half_away_to_format<11, -14, 15>, n, 7, false);
  const std::size_t good_bad = binary16_rounding_mismatches(attncert::round_to_format<11, -14, 15>, n, 7, false);
  BOOST_TEST_MESSAGE("mutants: truncation " << trunc_bad << "/" << n << ", ties-away " << away_bad << "/" << n
                                            << ", correct " << good_bad << "/" << n << " mismatches");
  BOOST_TEST(trunc_bad > n / 10);
  BOOST_TEST(away_bad > n / 100);
  BOOST_TEST(good_bad == 0u);
  // And the exhaustive elementary-function check would catch an exp that
  // truncates its binary64 result instead of rounding it.
  std::size_t exp_bad = 0;
  mpfr_t xin;
  mpfr_init2(xin, 64);
  for (std::uint32_t u = 0; u < 65536u; ++u) {
    const double xv = binary16::from_bits(static_cast<std::uint16_t>(u)).to_double();
    mpfr_set_d(xin, xv, MPFR_RNDN);
    const double ref = mpfr_emulate<binary16>([&](mpfr_ptr r, mpfr_rnd_t m) { return mpfr_exp(r, xin, m); });
    if (!same(truncate_to_format<11, -14, 15>(std::exp(xv)), ref)) ++exp_bad;
  }
  mpfr_clear(xin);
  BOOST_TEST(exp_bad > 1000u);
}
#endif  // ATTNCERT_NATIVE_F16

struct mpfr_cleanup {
  ~mpfr_cleanup() { mpfr_free_cache(); }
};
BOOST_TEST_GLOBAL_FIXTURE(mpfr_cleanup);
