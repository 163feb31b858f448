// attncert/number/double_double.hpp — double-word ("double-double") arithmetic with
// rigorous relative error bounds, and an exponential with a derived error bound.
//
// A `dd` is the unevaluated sum hi + lo of two binary64 numbers.  Every operation returns
// a `dd`; its `*_with_bound` form also returns a relative error bound B, checked to be
// applicable at run time (B = +inf otherwise, never a false claim).  B bounds the error
// relative to the exact result t AND relative to the computed value z:
//     |z - t| <= B |t|   and   |z - t| <= B |z|,
// so t lies in [z - B|z|, z + B|z|], an enclosure a caller can evaluate with directed
// rounding.  (The second form follows from the first because every returned B carries a
// margin larger than B^2/(1-B) over the published bound it rests on.)
//
// Tier: the plain functions are approx-tier arithmetic with a documented bound; the
// `*_with_bound` functions are rigorous (the enclosure above holds whenever B is finite).
//
// Sources.
//  [JMP]  M. Joldes, J.-M. Muller, V. Popescu, "Tight and rigorous error bounds for basic
//         building blocks of double-word arithmetic", ACM TOMS 44(2), 2017, article 15res
//         (hal-01351529v3).  Algorithm numbers below are theirs; bounds from their theorems /
//         Table 1.
//  [MR]   J.-M. Muller, L. Rideau, "Formalization of double-word arithmetic, and comments on
//         [JMP]", ACM TOMS 48(1), 2022 (hal-02972245): Coq proofs of all theorems of [JMP];
//         corrects some paper proofs without invalidating the bounds, and improves the bound
//         of Algorithm 12 from 5u^2 to 4u^2 (we keep 5u^2).
//  [Hauser] J. R. Hauser, "Handling floating-point exceptions in numeric programs", ACM
//         TOPLAS 18(2), 1996: a sum of two binary64 numbers that falls in the subnormal range
//         is exact.
//
// Model and preconditions.  [JMP] prove their bounds for precision p = 53 with round to
// nearest and an UNBOUNDED exponent range.  binary64 differs from that model only by
// overflow and underflow, so every bound here needs:
//  (R) round to nearest, ties to even (the default mode), gradual underflow (no
//      flush-to-zero / denormals-are-zero; the `*_with_bound` forms and exp check both at
//      run time), no value-changing compiler optimisations (-ffast-math is rejected below).
//      Products that feed an addition are written so that the compiler cannot contract them
//      into an fma (`dd_detail::rounded`).
//  (N) operands are normalized: hi == RN(hi + lo) ([JMP]'s definition of a double-word
//      number; it implies |lo| <= ulp(hi)/2).  All results are normalized.
//  (U) Lemma U: if the exact result of every operation of an algorithm is below 2^1023 in
//      magnitude and is a multiple of 2^-1074 (or, for a division, lies in the normal
//      range), binary64 round-to-nearest returns exactly what the unbounded model returns.
//      Proof: in the normal range the two roundings coincide; a multiple of 2^-1074 of
//      magnitude below 2^-1022 is itself a binary64 number (and has at most 53 significant
//      bits), so both roundings return it unchanged.  Sums and differences of binary64
//      numbers are always such multiples [Hauser].  A product a*b or fma(a, b, c) is one when
//      a or b is 0 or |a|*|b| >= 2^-968 (then the exponents satisfy e_a + e_b >= -970, so the
//      last bits of a and b have weights whose product is >= 2^-1074).
//  Hence: additions (two_sum, fast_two_sum, add, sub) need only "no overflow"; products
//  and quotients need the product condition above, which the `*_with_bound` forms verify
//  on the operands actually multiplied (a few comparisons).
//
// Sufficient input ranges (all nonzero components of the operands within these, checked
// exactly by the `*_with_bound` forms, together with (R) and (N)):
//    add/sub:         |x.hi|, |y.hi| <= 2^1020
//    mul(dd, double): |x.hi * y| <= 2^1020 and |x.hi * y|, |x.lo * y| >= 2^-967
//    mul(dd, dd):     |x.hi * y.hi| <= 2^1020 and each nonzero cross product of components
//                     (hi*hi, hi*lo, lo*hi, lo*lo) >= 2^-967 in magnitude
//    div(dd, dd):     2^-1020 <= |y.hi| <= 2^1020, plus the same product conditions on the
//                     internal products (checked as computed)
//    exp:             -708 <= x.hi <= 709 (see exp_with_bound)
#pragma once

#include <cfenv>
#include <cfloat>
#include <cmath>
#include <limits>

#if defined(__FAST_MATH__)
#error "attncert/number/double_double.hpp: error-free transformations are invalid under -ffast-math"
#endif

namespace attncert {

static_assert(std::numeric_limits<double>::is_iec559, "double must be IEEE 754 binary64");
static_assert(FLT_EVAL_METHOD == 0, "double expressions must be evaluated in binary64 (no x87 excess precision)");

/// A double-word number: the exact value hi + lo.  Normalized when hi == RN(hi + lo).
struct dd {
  double hi = 0.0;
  double lo = 0.0;
};

/// A double-word value with a relative error bound (see the header comment for its meaning;
/// +inf means "no claim").
struct dd_with_error {
  dd value;
  double rel_error_bound;
};

/// Unit roundoff of binary64, u = 2^-53 (named in full: a namespace-scope `u` would be
/// silently picked up by any attncert function that forgets to declare its own `u`).
inline constexpr double unit_roundoff = 0x1p-53;

namespace dd_detail {
inline constexpr double u = unit_roundoff;
inline constexpr double u2 = u * u;      // exact
inline constexpr double u3 = u * u * u;  // exact
inline constexpr double inf = std::numeric_limits<double>::infinity();

/// Returns v after forcing it to be rounded to binary64 and materialised, so that a product
/// computed into v cannot be contracted with a later addition into an fma (GCC contracts by
/// default in C++ on targets with fma instructions, e.g. AArch64 or -march=haswell); an
/// error-free transformation whose parts were rounded differently is no longer exact.
inline double rounded(double v) noexcept {
  volatile double t = v;
  return t;
}
}  // namespace dd_detail

// ---- relative error bounds ---------------------------------------------------------------
// Each constant is the bound of [JMP] for the algorithm implemented, rounded UP to a binary64
// number with a margin (the margin also makes the bound valid relative to the computed value).

/// add(dd, dd), Algorithm 6 (AccurateDWPlusDW): [JMP] prove 3u^2/(1-4u) < 3u^2 + 13u^3
/// (they report 2.25u^2 as the largest error found; our tests have met 2.5u^2).
/// Returned: 3u^2 + 16u^3.
inline constexpr double dd_add_bound = 3 * dd_detail::u2 + 16 * dd_detail::u3;
/// add(dd, double), Algorithm 4 (DWPlusFP): [JMP] Table 1: 2u^2 (asymptotically optimal).
/// Returned: 2u^2 + 8u^3 (also above 2u^2/(1-2u)).  The tests meet errors of 2u^2 - 4.7u^3.
inline constexpr double dd_add_fp_bound = 2 * dd_detail::u2 + 8 * dd_detail::u3;
/// mul(dd, double), Algorithm 9 (DWTimesFP3, with fma): [JMP]: 2u^2.  Returned: 2u^2 + 8u^3.
inline constexpr double dd_mul_fp_bound = 2 * dd_detail::u2 + 8 * dd_detail::u3;
/// mul(dd, dd), Algorithm 12 (DWTimesDW3, with fma): [JMP]: 5u^2 ([MR]: 4u^2).
/// Returned: 5u^2 + 8u^3.
inline constexpr double dd_mul_bound = 5 * dd_detail::u2 + 8 * dd_detail::u3;
/// div(dd, dd), Algorithm 18 (DWDivDW3, with fma): [JMP]: 9.8u^2 (our tests meet up to about
/// 5.2u^2).  Returned: 10u^2.
inline constexpr double dd_div_bound = 10 * dd_detail::u2;
/// exp_with_bound, before the final scaling by 2^k: 21u^2 < 2^-101.6 (derived below).
inline constexpr double dd_exp_bound = 21 * dd_detail::u2;

// The constants above are exact sums (no rounding happened in their constant expressions).
static_assert(dd_add_bound - 3 * dd_detail::u2 == 16 * dd_detail::u3);
static_assert(dd_add_fp_bound - 2 * dd_detail::u2 == 8 * dd_detail::u3);
static_assert(dd_mul_bound - 5 * dd_detail::u2 == 8 * dd_detail::u3);

// ---- error-free transformations ------------------------------------------------------------

/// Knuth's 2Sum: s + e == a + b exactly, s = RN(a + b); (s, e) is normalized.
/// Preconditions: (R); no overflow (|a|, |b| <= 2^1022 suffices).  Exact also with
/// subnormal operands [Hauser].
inline dd two_sum(double a, double b) noexcept {
  const double s = a + b;
  const double bb = s - a;
  const double e = (a - (s - bb)) + (b - bb);
  return {s, e};
}

/// Dekker's Fast2Sum: s + e == a + b exactly, s = RN(a + b).
/// Preconditions: (R); no overflow; a == 0 or |a| >= |b| (exponent of a >= exponent of b
/// suffices).
inline dd fast_two_sum(double a, double b) noexcept {
  const double s = a + b;
  const double e = b - (s - a);
  return {s, e};
}

/// 2Prod via fma: p + e == a * b exactly, p = RN(a * b).
/// Preconditions: (R); a == 0, b == 0 or |a|*|b| >= 2^-968 (below, the error term may not be
/// representable — see Lemma U); |a * b| < 2^1023.
inline dd two_prod(double a, double b) noexcept {
  const double p = dd_detail::rounded(a * b);
  const double e = std::fma(a, b, -p);
  return {p, e};
}

// ---- basic helpers -------------------------------------------------------------------------

/// True when x is finite and normalized: x.hi == RN(x.hi + x.lo).
inline bool is_normalized(dd x) noexcept {
  return std::isfinite(x.hi) && std::isfinite(x.lo) && x.hi + x.lo == x.hi;
}

/// RN(x.hi + x.lo): the binary64 number nearest to the exact value x.hi + x.lo (correctly
/// rounded, one IEEE addition).  For a normalized x this is x.hi by definition.
inline double to_double(dd x) noexcept { return x.hi + x.lo; }

/// -x, exact.
inline dd neg(dd x) noexcept { return {-x.hi, -x.lo}; }

// ---- double-word arithmetic ([JMP]) ----------------------------------------------------------

/// x + y, Algorithm 6 (AccurateDWPlusDW).  Relative error <= dd_add_bound under (R), (N), no
/// overflow.  If x + y == 0 the result is exactly 0.
inline dd add(dd x, dd y) noexcept {
  const dd s = two_sum(x.hi, y.hi);
  const dd t = two_sum(x.lo, y.lo);
  const double c = s.lo + t.hi;
  const dd v = fast_two_sum(s.hi, c);
  const double w = t.lo + v.lo;
  return fast_two_sum(v.hi, w);
}

/// x + y, Algorithm 4 (DWPlusFP).  Relative error <= dd_add_fp_bound under (R), (N), no
/// overflow.
inline dd add(dd x, double y) noexcept {
  const dd s = two_sum(x.hi, y);
  const double v = x.lo + s.lo;
  return fast_two_sum(s.hi, v);
}

/// x - y = add(x, -y): same algorithm and bound as add(dd, dd).
inline dd sub(dd x, dd y) noexcept { return add(x, neg(y)); }

/// x * y, Algorithm 9 (DWTimesFP3).  Relative error <= dd_mul_fp_bound under (R), (N) and
/// the product conditions (see the header comment).
inline dd mul(dd x, double y) noexcept {
  const dd c = two_prod(x.hi, y);
  const double cl3 = std::fma(x.lo, y, c.lo);
  return fast_two_sum(c.hi, cl3);
}

/// x * y, Algorithm 12 (DWTimesDW3).  Relative error <= dd_mul_bound under (R), (N) and the
/// product conditions.
inline dd mul(dd x, dd y) noexcept {
  const dd c = two_prod(x.hi, y.hi);
  const double tl0 = x.lo * y.lo;  // only an fma addend: cannot be contracted further
  const double tl1 = std::fma(x.hi, y.lo, tl0);
  const double cl2 = std::fma(x.lo, y.hi, tl1);
  const double cl3 = c.lo + cl2;
  return fast_two_sum(c.hi, cl3);
}

namespace dd_detail {
inline constexpr double product_floor = 0x1p-967;  // RN(|a||b|) >= this  =>  |a||b| >= 2^-968
inline constexpr double magnitude_cap = 0x1p1020;

/// The product condition of Lemma U for a * b (or fma(a, b, c)).
inline bool product_ok(double a, double b) noexcept {
  return a == 0.0 || b == 0.0 || std::fabs(a) * std::fabs(b) >= product_floor;
}
/// (R) at run time: round to nearest, and subnormals are neither flushed to zero on output
/// (FTZ) nor read as zero on input (DAZ), e.g. by code built with -ffast-math elsewhere.
inline bool environment_ok() noexcept {
  // 2^-1023 is subnormal: FTZ flushes this product to 0, DAZ reads it as 0 in the next one.
  // (No subnormal constant is compared: under DAZ it would itself read as 0.)
  volatile double smallest_normal = 0x1p-1022;
  volatile double subnormal = smallest_normal * 0.5;
  return std::fegetround() == FE_TONEAREST && subnormal * 0x1p100 == 0x1p-923;
}
/// Finite, normalized, |hi| <= 2^1020.
inline bool operand_ok(dd x) noexcept { return is_normalized(x) && std::fabs(x.hi) <= magnitude_cap; }
/// Finite and the product conditions of Algorithm 12 for x * y, without overflow.
inline bool mul_ok(dd x, dd y) noexcept {
  return std::fabs(x.hi) * std::fabs(y.hi) <= magnitude_cap && product_ok(x.hi, y.hi) && product_ok(x.lo, y.lo) &&
         product_ok(x.hi, y.lo) && product_ok(x.lo, y.hi);
}
inline bool mul_fp_ok(dd x, double y) noexcept {
  return std::isfinite(y) && std::fabs(x.hi) * std::fabs(y) <= magnitude_cap && product_ok(x.hi, y) &&
         product_ok(x.lo, y);
}

/// The reciprocal m of y that Algorithm 18 (DWDivDW3) multiplies x by: x / y = mul(x, m).  With
/// Check, `ok` is cleared when a condition of Lemma U fails for an operation actually performed
/// (or y.hi is outside [2^-1020, 2^1020]).  A loop dividing many x by one y computes m once.
template <bool Check>
inline dd reciprocal_impl(dd y, bool& ok) noexcept {
  if constexpr (Check) {
    const double ay = std::fabs(y.hi);
    if (!(ay >= 0x1p-1020 && ay <= 0x1p1020)) ok = false;  // 1/y.hi normal; also rejects 0
  }
  const double th = 1.0 / y.hi;
  const double rh = std::fma(-y.hi, th, 1.0);
  const double rl = rounded(-y.lo * th);
  const dd e = fast_two_sum(rh, rl);
  const dd delta = mul(e, th);  // Algorithm 9
  const dd m = add(delta, th);  // Algorithm 4
  if constexpr (Check) {
    if (!(product_ok(y.hi, th) && product_ok(y.lo, th) && mul_fp_ok(e, th) && std::isfinite(m.hi) &&
          std::isfinite(m.lo)))
      ok = false;
  }
  return m;
}

/// Algorithm 18 (DWDivDW3): mul(x, reciprocal_impl(y)); with Check, `ok` is cleared as there
/// and when the product conditions of mul(x, m) fail.
template <bool Check>
inline dd div_impl(dd x, dd y, bool& ok) noexcept {
  const dd m = reciprocal_impl<Check>(y, ok);
  if constexpr (Check) {
    if (!mul_ok(x, m)) ok = false;
  }
  return mul(x, m);  // Algorithm 12
}
}  // namespace dd_detail

/// x / y, Algorithm 18 (DWDivDW3).  Relative error <= dd_div_bound under (R), (N), y != 0 and
/// the product conditions on its internal products (checked by div_with_bound).
inline dd div(dd x, dd y) noexcept {
  bool ok = true;
  return dd_detail::div_impl<false>(x, y, ok);
}

// ---- with-bound forms ----------------------------------------------------------------------
// Same value as the plain function (bit for bit); the bound is the constant above when (R),
// (N) and the range conditions hold for these operands, +inf otherwise.

inline dd_with_error add_with_bound(dd x, dd y) noexcept {
  const dd z = add(x, y);
  const bool ok = dd_detail::environment_ok() && dd_detail::operand_ok(x) && dd_detail::operand_ok(y);
  return {z, ok ? dd_add_bound : dd_detail::inf};
}

inline dd_with_error add_with_bound(dd x, double y) noexcept {
  const dd z = add(x, y);
  const bool ok = dd_detail::environment_ok() && dd_detail::operand_ok(x) && std::isfinite(y) &&
                  std::fabs(y) <= dd_detail::magnitude_cap;
  return {z, ok ? dd_add_fp_bound : dd_detail::inf};
}

inline dd_with_error sub_with_bound(dd x, dd y) noexcept { return add_with_bound(x, neg(y)); }

inline dd_with_error mul_with_bound(dd x, double y) noexcept {
  const dd z = mul(x, y);
  const bool ok = dd_detail::environment_ok() && dd_detail::operand_ok(x) && dd_detail::mul_fp_ok(x, y);
  return {z, ok ? dd_mul_fp_bound : dd_detail::inf};
}

inline dd_with_error mul_with_bound(dd x, dd y) noexcept {
  const dd z = mul(x, y);
  const bool ok = dd_detail::environment_ok() && dd_detail::operand_ok(x) && dd_detail::operand_ok(y) &&
                  dd_detail::mul_ok(x, y);
  return {z, ok ? dd_mul_bound : dd_detail::inf};
}

inline dd_with_error div_with_bound(dd x, dd y) noexcept {
  bool ok = dd_detail::environment_ok() && dd_detail::operand_ok(x) && dd_detail::operand_ok(y);
  const dd z = dd_detail::div_impl<true>(x, y, ok);
  return {z, ok ? dd_div_bound : dd_detail::inf};
}

// ---- exponential -----------------------------------------------------------------------------

namespace dd_detail {
inline constexpr int exp_halvings = 4;        // m: the reduced argument is scaled by 2^-m
inline constexpr int exp_taylor_degree = 14;  // N
/// ln 2 = ln2_1 + ln2_2 + ln2_3 + delta, |delta| < 2^-157; ln2_1 has 42 significant bits,
/// so k * ln2_1 is exact for |k| < 2^11.  ln2_2 = RN(ln2 - ln2_1), ln2_3 = RN(ln2 - ln2_1 - ln2_2).
inline constexpr double ln2_1 = 0x1.62e42fefa38p-1;
inline constexpr double ln2_2 = 0x1.ef35793c76730p-45;
inline constexpr double ln2_3 = 0x1.f97b57a079a19p-103;
inline constexpr double inv_ln2 = 0x1.71547652b82fep+0;  // RN(1/ln 2)
/// c_j = 1/j! as double-words: hi = RN(1/j!), lo = RN(1/j! - hi); |c_j - 1/j!| <= 0.27 u^2 / j!
/// (c_0, c_1, c_2 exact).  Values and the bound are re-derived with MPFR by the tests.
inline constexpr dd inv_factorial[exp_taylor_degree + 1] = {
    {0x1p+0, 0.0},
    {0x1p+0, 0.0},
    {0x1p-1, 0.0},
    {0x1.5555555555555p-3, 0x1.5555555555555p-57},
    {0x1.5555555555555p-5, 0x1.5555555555555p-59},
    {0x1.1111111111111p-7, 0x1.1111111111111p-63},
    {0x1.6c16c16c16c17p-10, -0x1.f49f49f49f49fp-65},
    {0x1.a01a01a01a01ap-13, 0x1.a01a01a01a01ap-73},
    {0x1.a01a01a01a01ap-16, 0x1.a01a01a01a01ap-76},
    {0x1.71de3a556c734p-19, -0x1.c154f8ddc6c00p-73},
    {0x1.27e4fb7789f5cp-22, 0x1.cbbc05b4fa99ap-76},
    {0x1.ae64567f544e4p-26, -0x1.c062e06d1f209p-80},
    {0x1.1eed8eff8d898p-29, -0x1.2aec959e14c06p-83},
    {0x1.6124613a86d09p-33, 0x1.f28e0cc748ebep-87},
    {0x1.93974a8c07c9dp-37, 0x1.05d6f8a2efd1fp-92},
};
/// Low words below this are set to 0 inside exp (see step 7 of the derivation).
inline constexpr double exp_flush = 0x1p-400;
inline dd flush(dd v) noexcept { return std::fabs(v.lo) < exp_flush ? dd{v.hi, 0.0} : v; }
}  // namespace dd_detail

/// exp(x) for a double-word x, with a rigorous relative error bound.
///
/// Returns: value z (normalized) and B with |z - e^x| <= B e^x and |z - e^x| <= B |z|.
/// Proven domain: (R) and -708 <= x.hi <= 709 (x is first normalized exactly with two_sum;
/// non-finite x, another rounding mode, flushed subnormals and x outside the domain give
/// B = +inf and z = RN(exp(x.hi)) as a rough value).  On the domain B is finite, and
/// B = 21u^2 < 2^-101.6 unless the low word of z falls in the subnormal range; then B grows
/// by at most 2^-1075/|z.hi|(1+2^-50) (rounded up).  Consequently B < 2^-100 whenever
/// |z.hi| > 2^-974, i.e. for x >= -675 (tested on [-670, 709]); on [-708, -675) B degrades
/// smoothly to about 2^-53.5 — a double-double whose low word is subnormal cannot carry
/// more accuracy.  No argument of the domain overflows or underflows an intermediate.
///
/// Algorithm and derivation of B (u = 2^-53; B4, B6, B12 = dd_add_fp_bound, dd_add_bound,
/// dd_mul_bound; X' = X + 2^-329 where step 7 applies; m = 4, N = 14):
///
///  1. Reduction.  k = nearbyint(RN(x.hi * RN(1/ln2))), so |k| <= 1023 on the domain and
///       |x - k ln2| <= ln2 (1/2 + 1023 (2u + u^2)) + 2^-44 =: rho0 < 0.34657360
///     (|x.lo| <= ulp(x.hi)/2 <= 2^-44).  With ln2 = L1 + L2 + L3 + dL (constants above):
///       a = two_sum(x.hi, -k L1)              exact (k L1 exact)
///       b = add(a, x.lo)       Alg 4          |e1| <= B4 |a + x.lo|
///       c = two_prod(k, L2)                   exact
///       d = add(b, -c)         Alg 6          |e2| <= B6 |b - c|
///       w = RN(k L3)                          |ew| <= u |k L3| < 2^-144
///       rh = add(d, -w)        Alg 4          |e3| <= B4 |d - w|
///       rh.lo := 0 if |rh.lo| < 2^-392        |ef| < 2^-392
///     (k = 0: rh = x up to ef.)  Then rh = r + k dL + e1 + e2 - ew + e3 + ef with
///     r = x - k ln2 exactly, and |a + x.lo|, |b - c|, |d - w| <= rho0 + 1023 (L2 + L3) + 2^-140
///     =: rho_a < 0.3466, so
///       eta := |rh - r| <= rho_a (2 B4 + B6) + 2^-144 + 1023 * 2^-157 + 2^-392 < 2.43 u^2,
///     |rh| <= rho := rho0 + eta, and e^rh = e^r (1 + g) with |g| <= gamma := e^eta - 1.
///  2. Tiny path, |rh.hi| <= 2^-54: p = add(rh, 1.0) (Alg 4).  e^rh = 1 + rh + R with
///     |R| <= rh^2 e^|rh| / 2 <= 2^-109 (1 + 2^-50) e^rh and 1 + rh <= e^rh, so
///     p = e^rh (1 + e'), |e'| <= (1 + B4)(1 + 2^-109 (1 + 2^-50)) - 1.
///  3. Main path.  s = rh 2^-m (exact), |s| <= rho 2^-m.  Horner for e^s - 1 with the
///     coefficients c_j above (|c_j - 1/j!| <= kappa/j!, kappa = 0.27 u^2; c_1, c_2 exact):
///       q_N = c_N,  q_j = flush(add(c_j, mul(s, q_{j+1})))   j = N-1 .. 3   (Algs 12, 6)
///       q_2 = flush(add(mul(s, q_3), 0.5)),  q_1 = flush(add(mul(s, q_2), 1.0))  (Alg 4)
///       E_0 = flush(mul(s, q_1))                                                  (Alg 12)
///     Exact counterparts: Q_N = 1/N!, Q_j = 1/j! + s Q_{j+1}, and s Q_1 = (e^s - 1) - T with
///     |T| <= |s|^(N+1) e^|s| / (N+1)!.  Put q_j = Q_j (1 + th_j) and
///     g_j = |s| e^|s| / (j+1) >= |s| Q_{j+1} j!, so Q_j >= (1 - g_j)/j!:
///       |th_N| <= kappa,
///       |th_j| <= A_j + (1 + A_j) (kappa_j + g_j ((1 + |th_{j+1}|)(1 + B12') - 1)) / (1 - g_j)
///     with A_j = B6' (j >= 3) or B4' (j <= 2), kappa_j = kappa (j >= 3) or 0.  Since
///     |e^s - 1| >= |s| e^-|s|:  E_0 = (e^s - 1)(1 + eps_0) with
///       |eps_0| <= (1 + |s|^N e^(2|s|) / (N+1)!)(1 + |th_1|)(1 + B12') - 1.
///  4. m doublings in "expm1 form", E_{i+1} = E_i (2 + E_i) = (1 + E_i)^2 - 1:
///       t = flush(add(E_i, 2.0)) (Alg 4),  E_{i+1} = flush(mul(E_i, t)) (Alg 12).
///     If E_i = (e^{s_i} - 1)(1 + eps_i), s_i = 2^i s, then
///       E_{i+1} = (e^{s_{i+1}} - 1)(1 + eps_i)(1 + eps_i tanh(s_i/2))(1 + alpha)(1 + mu),
///     because (e^s - 1)/(2 + e^s - 1) = tanh(s/2).  With tau_i = tanh(rho 2^(i-m-1)):
///       |eps_{i+1}| <= (1 + |eps_i|)(1 + tau_i |eps_i|)(1 + B4')(1 + B12') - 1.
///     Squaring e^s itself instead would multiply the relative error by (1 + e)^(2^m) - 1,
///     i.e. roughly 2^m: for m = 8 that alone exceeds 1000 u^2 (about 2^-96).  In expm1 form
///     each step adds about B4 + B12 = 7u^2 and amplifies the previous error only by
///     (1 + tau_i), and prod_i (1 + tau_i) < 1.2.
///  5. p = add(E_m, 1.0) (Alg 4).  1 + E_m = e^rh (1 + eps_m (1 - e^-rh)) and
///     |1 - e^-rh| <= e^rho - 1 =: sigma < 0.4143, so p = e^rh (1 + e'),
///       |e'| <= (1 + sigma |eps_m|)(1 + B4) - 1.
///  6. Both paths: p = e^r (1 + E) with |E| <= (1 + gamma)(1 + |e'|) - 1.  Numerically
///     (recomputed by tests/number/double_double.cpp with MPFR): eta < 2.43u^2,
///     |eps_0| < 7.08u^2, |eps_4| < 38.94u^2, |E| < 20.56u^2 (main path), < 4.56u^2 (tiny
///     path); dd_exp_bound = 21u^2.
///  7. Flush: the low words of q_j, E_i and t are set to 0 when below 2^-400; this changes each
///     by a relative amount < 2^-337 (|q_j| > 2^-37, |E_i| > 2^-59, |t| > 1), covered by
///     X' = X + 2^-329.  Purpose: every product in steps 3-4 then has operands that are 0 or
///     whose product exceeds 2^-968 in magnitude (|s.hi| > 2^-58, nonzero low words
///     >= 2^-400), so Lemma U holds and the bounds of Algs 4, 6, 12 apply in binary64.
///     No other operation overflows or underflows: |k L2| > 2^-45, all values are below 4.
///  8. Scaling: k is in [-1021, 1023] on the domain and p.hi in [0.70, 1.42], so z.hi =
///     p.hi 2^k is exact and normal; z.lo = RN(p.lo 2^k) is exact unless below 2^-1022,
///     where its error is <= 2^-1075 (gradual underflow, one correctly rounded product).  As
///     e^x >= |z.hi| (1 - u)/(1 + E), that adds at most 2^-1075 / |z.hi| (1 + 2^-51) to the
///     relative error.  The bound is then summed in round-to-nearest and moved up one ulp
///     (next_up(RN(a + b)) > a + b).  Finally (z.hi, z.lo) is renormalized by fast_two_sum
///     (exact).  B also bounds the error relative to z: that needs B^2/(1 - B) more, which
///     the slack 21u^2 - 20.56u^2 and the factor (1 + 2^-50) instead of (1 + 2^-51) cover
///     (B <= 2^-53 on the domain).
inline dd_with_error exp_with_bound(dd x) noexcept {
  using namespace dd_detail;
  if (!std::isfinite(x.hi) || !std::isfinite(x.lo) || !environment_ok())
    return {dd{std::exp(x.hi + x.lo), 0.0}, inf};
  x = two_sum(x.hi, x.lo);  // exact normalization
  if (!(x.hi >= -708.0 && x.hi <= 709.0)) return {dd{std::exp(x.hi), 0.0}, inf};

  // 1. reduction
  const double kd = std::nearbyint(x.hi * inv_ln2);
  dd r = x;
  if (kd != 0.0) {
    const dd a = two_sum(x.hi, -rounded(kd * ln2_1));
    const dd b = add(a, x.lo);
    const dd c = two_prod(kd, ln2_2);
    const dd d = add(b, neg(c));
    const double w = rounded(kd * ln2_3);
    r = add(d, -w);
  }
  if (std::fabs(r.lo) < 0x1p-392) r.lo = 0.0;

  dd p;
  if (std::fabs(r.hi) <= 0x1p-54) {
    // 2. tiny path
    p = add(r, 1.0);
  } else {
    // 3. Taylor polynomial of e^s - 1
    constexpr double scale = 1.0 / (1 << exp_halvings);
    const dd s{r.hi * scale, r.lo * scale};
    dd q = inv_factorial[exp_taylor_degree];
    for (int j = exp_taylor_degree - 1; j >= 3; --j) q = flush(add(inv_factorial[j], mul(s, q)));
    q = flush(add(mul(s, q), 0.5));
    q = flush(add(mul(s, q), 1.0));
    dd e = flush(mul(s, q));
    // 4. doublings (1 + E)^2 - 1 = E (2 + E)
    for (int i = 0; i < exp_halvings; ++i) {
      const dd t = flush(add(e, 2.0));
      e = flush(mul(e, t));
    }
    // 5.
    p = add(e, 1.0);
  }

  // 8. scaling by 2^k
  const int k = static_cast<int>(kd);
  const double two_k = std::ldexp(1.0, k);  // exact: -1021 <= k <= 1023
  const double zh = p.hi * two_k;           // exact
  const double zl = rounded(p.lo * two_k);  // correctly rounded
  double bound = dd_exp_bound;
  if (p.lo != 0.0 && std::fabs(zl) < 0x1p-1022) {
    // 2^-1075 / |z.hi| * (1 + 2^-50) >= the true term (two roundings of relative size u),
    // without forming 2^-1075 (not a binary64 number); should the last product underflow,
    // its error (< 2^-1074) is far below the ulp of `bound` added by nextafter.
    const double extra = (0x1p-1022 / std::fabs(zh)) * (1.0 + 0x1p-50) * 0x1p-53;
    bound = std::nextafter(bound + extra, inf);
  }
  return {fast_two_sum(zh, zl), bound};
}

}  // namespace attncert
