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
/// exp_with_bound, before the final scaling by 2^k: 8u^2 = 2^-103 (derived below).
inline constexpr double dd_exp_bound = 8 * dd_detail::u2;

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
inline constexpr int exp_table_bits = 7;      // t: the table holds 2^(j/2^t), j < 2^t
inline constexpr int exp_table_size = 1 << exp_table_bits;
inline constexpr int exp_taylor_degree = 9;  // N
/// ln 2 / 128 = ln2_1 + ln2_2 + ln2_3 + delta, |delta| < 2^-157; ln2_1 has 36 significant bits,
/// so k * ln2_1 is exact for |k| < 2^17.  ln2_2 = RN(ln2/128 - ln2_1),
/// ln2_3 = RN(ln2/128 - ln2_1 - ln2_2) (all three are ln 2's parts scaled exactly by 2^-7).
inline constexpr double ln2_1 = 0x1.62e42fefa0000p-8;
inline constexpr double ln2_2 = 0x1.cf79abc9e3b3ap-47;
inline constexpr double ln2_3 = -0x1.ff0342542fc33p-101;
inline constexpr double inv_ln2 = 0x1.71547652b82fep+7;  // RN(128/ln 2) = 128 RN(1/ln 2)
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
};
/// T_j = 2^(j/128) as double-words: exp2_hi[j] = RN(2^(j/128)), exp2_lo[j] = RN(2^(j/128) - hi);
/// |T_j - 2^(j/128)| <= tau 2^(j/128) with tau re-derived with MPFR by the tests.  Two arrays
/// (not pairs) so that the vector kernels gather each word with one instruction.
inline constexpr double exp2_hi[exp_table_size] = {
    0x1.0000000000000p+0, 0x1.0163da9fb3335p+0, 0x1.02c9a3e778061p+0, 0x1.04315e86e7f85p+0,
    0x1.059b0d3158574p+0, 0x1.0706b29ddf6dep+0, 0x1.0874518759bc8p+0, 0x1.09e3ecac6f383p+0,
    0x1.0b5586cf9890fp+0, 0x1.0cc922b7247f7p+0, 0x1.0e3ec32d3d1a2p+0, 0x1.0fb66affed31bp+0,
    0x1.11301d0125b51p+0, 0x1.12abdc06c31ccp+0, 0x1.1429aaea92de0p+0, 0x1.15a98c8a58e51p+0,
    0x1.172b83c7d517bp+0, 0x1.18af9388c8deap+0, 0x1.1a35beb6fcb75p+0, 0x1.1bbe084045cd4p+0,
    0x1.1d4873168b9aap+0, 0x1.1ed5022fcd91dp+0, 0x1.2063b88628cd6p+0, 0x1.21f49917ddc96p+0,
    0x1.2387a6e756238p+0, 0x1.251ce4fb2a63fp+0, 0x1.26b4565e27cddp+0, 0x1.284dfe1f56381p+0,
    0x1.29e9df51fdee1p+0, 0x1.2b87fd0dad990p+0, 0x1.2d285a6e4030bp+0, 0x1.2ecafa93e2f56p+0,
    0x1.306fe0a31b715p+0, 0x1.32170fc4cd831p+0, 0x1.33c08b26416ffp+0, 0x1.356c55f929ff1p+0,
    0x1.371a7373aa9cbp+0, 0x1.38cae6d05d866p+0, 0x1.3a7db34e59ff7p+0, 0x1.3c32dc313a8e5p+0,
    0x1.3dea64c123422p+0, 0x1.3fa4504ac801cp+0, 0x1.4160a21f72e2ap+0, 0x1.431f5d950a897p+0,
    0x1.44e086061892dp+0, 0x1.46a41ed1d0057p+0, 0x1.486a2b5c13cd0p+0, 0x1.4a32af0d7d3dep+0,
    0x1.4bfdad5362a27p+0, 0x1.4dcb299fddd0dp+0, 0x1.4f9b2769d2ca7p+0, 0x1.516daa2cf6642p+0,
    0x1.5342b569d4f82p+0, 0x1.551a4ca5d920fp+0, 0x1.56f4736b527dap+0, 0x1.58d12d497c7fdp+0,
    0x1.5ab07dd485429p+0, 0x1.5c9268a5946b7p+0, 0x1.5e76f15ad2148p+0, 0x1.605e1b976dc09p+0,
    0x1.6247eb03a5585p+0, 0x1.6434634ccc320p+0, 0x1.6623882552225p+0, 0x1.68155d44ca973p+0,
    0x1.6a09e667f3bcdp+0, 0x1.6c012750bdabfp+0, 0x1.6dfb23c651a2fp+0, 0x1.6ff7df9519484p+0,
    0x1.71f75e8ec5f74p+0, 0x1.73f9a48a58174p+0, 0x1.75feb564267c9p+0, 0x1.780694fde5d3fp+0,
    0x1.7a11473eb0187p+0, 0x1.7c1ed0130c132p+0, 0x1.7e2f336cf4e62p+0, 0x1.80427543e1a12p+0,
    0x1.82589994cce13p+0, 0x1.8471a4623c7adp+0, 0x1.868d99b4492edp+0, 0x1.88ac7d98a6699p+0,
    0x1.8ace5422aa0dbp+0, 0x1.8cf3216b5448cp+0, 0x1.8f1ae99157736p+0, 0x1.9145b0b91ffc6p+0,
    0x1.93737b0cdc5e5p+0, 0x1.95a44cbc8520fp+0, 0x1.97d829fde4e50p+0, 0x1.9a0f170ca07bap+0,
    0x1.9c49182a3f090p+0, 0x1.9e86319e32323p+0, 0x1.a0c667b5de565p+0, 0x1.a309bec4a2d33p+0,
    0x1.a5503b23e255dp+0, 0x1.a799e1330b358p+0, 0x1.a9e6b5579fdbfp+0, 0x1.ac36bbfd3f37ap+0,
    0x1.ae89f995ad3adp+0, 0x1.b0e07298db666p+0, 0x1.b33a2b84f15fbp+0, 0x1.b59728de5593ap+0,
    0x1.b7f76f2fb5e47p+0, 0x1.ba5b030a1064ap+0, 0x1.bcc1e904bc1d2p+0, 0x1.bf2c25bd71e09p+0,
    0x1.c199bdd85529cp+0, 0x1.c40ab5fffd07ap+0, 0x1.c67f12e57d14bp+0, 0x1.c8f6d9406e7b5p+0,
    0x1.cb720dcef9069p+0, 0x1.cdf0b555dc3fap+0, 0x1.d072d4a07897cp+0, 0x1.d2f87080d89f2p+0,
    0x1.d5818dcfba487p+0, 0x1.d80e316c98398p+0, 0x1.da9e603db3285p+0, 0x1.dd321f301b460p+0,
    0x1.dfc97337b9b5fp+0, 0x1.e264614f5a129p+0, 0x1.e502ee78b3ff6p+0, 0x1.e7a51fbc74c83p+0,
    0x1.ea4afa2a490dap+0, 0x1.ecf482d8e67f1p+0, 0x1.efa1bee615a27p+0, 0x1.f252b376bba97p+0,
    0x1.f50765b6e4540p+0, 0x1.f7bfdad9cbe14p+0, 0x1.fa7c1819e90d8p+0, 0x1.fd3c22b8f71f1p+0};
inline constexpr double exp2_lo[exp_table_size] = {
    0x0.0p+0, 0x1.b61299ab8cdb7p-54, -0x1.19083535b085dp-56, -0x1.0a31c1977c96ep-54,
    0x1.d73e2a475b465p-55, -0x1.c91dfe2b13c27p-55, 0x1.186be4bb284ffp-57, 0x1.1487818316136p-54,
    0x1.8a62e4adc610bp-54, 0x1.01edc16e24f71p-54, 0x1.03a1727c57b53p-59, -0x1.b9bedc44ebd7bp-57,
    -0x1.6c51039449b3ap-54, -0x1.1b514b36ca5c7p-58, -0x1.32fbf9af1369ep-54, 0x1.2406ab9eeab0ap-55,
    -0x1.19041b9d78a76p-55, -0x1.11023d1970f6cp-54, 0x1.e5b4c7b4968e4p-55, -0x1.95386352ef607p-54,
    0x1.e016e00a2643cp-54, -0x1.1df98027bb78cp-54, 0x1.dc775814a8495p-55, 0x1.2a97e9494a5eep-55,
    0x1.9b07eb6c70573p-54, 0x1.ac155bef4f4a4p-55, 0x1.2bd339940e9d9p-55, -0x1.a4c3a8c3f0d7ep-54,
    0x1.612e8afad1255p-55, -0x1.10adcd6381aa4p-59, 0x1.0024754db41d5p-54, 0x1.1ca0f45d52383p-56,
    0x1.6f46ad23182e4p-55, 0x1.a9ce78e18047cp-55, 0x1.32721843659a6p-54, -0x1.b5cee5c4e4628p-55,
    -0x1.63aeabf42eae2p-54, -0x1.e958d3c9904bdp-54, -0x1.5e436d661f5e3p-56, -0x1.efff8375d29c3p-54,
    0x1.ada0911f09ebcp-55, -0x1.7d023f956f9f3p-54, -0x1.ef3691c309278p-58, -0x1.1c7dde35f7999p-55,
    0x1.89b7a04ef80d0p-59, 0x1.c944bd1648a76p-54, 0x1.3c1a3b69062f0p-56, 0x1.9cb62f3d1be56p-54,
    0x1.d4397afec42e2p-56, 0x1.8ecdbbc6a7833p-54, -0x1.4b309d25957e3p-54, -0x1.f768569bd93efp-55,
    -0x1.07abe1db13cadp-55, -0x1.d689cefede59bp-55, 0x1.9bb2c011d93adp-54, 0x1.295e15b9a1de8p-55,
    0x1.6324c054647adp-54, 0x1.c4b1b816986a2p-60, 0x1.ba6f93080e65ep-54, -0x1.3e2429b56de47p-54,
    -0x1.383c17e40b497p-54, -0x1.c483c759d8933p-55, -0x1.bb60987591c34p-54, 0x1.038ae44f73e65p-57,
    -0x1.bdd3413b26456p-54, -0x1.2895667ff0b0dp-56, -0x1.bbe3a683c88abp-57, -0x1.83c0f25860ef6p-55,
    -0x1.16e4786887a99p-55, -0x1.0a8d96c65d53cp-54, -0x1.0245957316dd3p-54, 0x1.866b80a02162dp-54,
    -0x1.41577ee04992fp-55, 0x1.f124cd1164dd6p-54, 0x1.05d02ba15797ep-56, -0x1.27c86626d972bp-54,
    -0x1.d4c1dd41532d8p-54, -0x1.8d684a341cdfbp-55, -0x1.fc6f89bd4f6bap-54, 0x1.994c2f37cb53ap-54,
    0x1.6e9f156864b27p-54, -0x1.0d55e32e9e3aap-56, 0x1.5cc13a2e3976cp-55, -0x1.dd6792e582524p-54,
    -0x1.75fc781b57ebcp-57, -0x1.64b7c96a5f039p-56, -0x1.d185b7c1b85d1p-54, -0x1.173bd91cee632p-54,
    0x1.c7c46b071f2bep-56, 0x1.824ca78e64c6ep-56, -0x1.359495d1cd533p-54, 0x1.6305c7ddc36abp-54,
    -0x1.d2f6edb8d41e1p-54, 0x1.bcb7ecac563c7p-54, 0x1.0fac90ef7fd31p-54, -0x1.f9234cae76cd0p-55,
    0x1.7a1cd345dcc81p-54, -0x1.bdef54c80e425p-54, -0x1.2805e3084d708p-57, -0x1.c71dfbbba6de3p-54,
    -0x1.5584f7e54ac3bp-56, -0x1.efcd30e54292ep-54, 0x1.23dd07a2d9e84p-55, -0x1.efdca3f6b9c73p-54,
    0x1.11065895048ddp-55, 0x1.b4537e083c60ap-54, 0x1.2884dff483cadp-54, 0x1.1acbc48805c44p-56,
    0x1.503cbd1e949dbp-56, -0x1.dd83b53829d72p-55, -0x1.cbc3743797a9cp-54, -0x1.d487b719d8578p-54,
    0x1.2ed02d75b3707p-55, -0x1.11ec18beddfe8p-54, 0x1.c2300696db532p-54, 0x1.2da5778f018c3p-54,
    -0x1.1a5cd4f184b5cp-54, -0x1.7b627817a1496p-54, 0x1.39e8980a9cc8fp-55, 0x1.2d522ca0c8de2p-54,
    -0x1.e9c23179c2893p-54, -0x1.c93f3b411ad8cp-54, 0x1.dc7f486a4b6b0p-54, 0x1.3a1a5bf0d8e43p-54,
    0x1.9d3e12dd8a18bp-54, -0x1.dbb12d006350ap-54, 0x1.74853f3a5931ep-55, 0x1.2eb74966579e7p-57};
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
/// B = 8u^2 = 2^-103 unless the low word of z falls in the subnormal range; then B grows
/// by at most 2^-1075/|z.hi|(1+2^-50) (rounded up).  Consequently B < 2^-100 whenever
/// |z.hi| > 2^-974, i.e. for x >= -675 (tested on [-670, 709]); on [-708, -675) B degrades
/// smoothly to about 2^-53.5 — a double-double whose low word is subnormal cannot carry
/// more accuracy.  No argument of the domain overflows or underflows an intermediate.
///
/// Algorithm (table-driven): x = (128 k + j) ln2/128 + r with 0 <= j < 128 and |r| <= ln2/256,
/// e^x = 2^k T_j e^r with T_j = 2^(j/128) from a table of double-words and e^r from a degree-9
/// Taylor polynomial.  Derivation of B (u = 2^-53; B4, B6, B12 = dd_add_fp_bound,
/// dd_add_bound, dd_mul_bound; X' = X + 2^-329 where step 6 applies; N = 9; L = ln2/128 and
/// L1, L2, L3 = ln2_1, ln2_2, ln2_3 below, L = L1 + L2 + L3 + dL, |dL| < 2^-157):
///
///  1. Reduction.  n = nearbyint(RN(x.hi * RN(128/ln2))), so |n| <= 130928 < 2^17 on the
///     domain and
///       |x - n L| <= L/2 + 709 (2u + u^2) + 2^-44 =: rho0 < 0.0027077
///     (|x.lo| <= ulp(x.hi)/2 <= 2^-44).  Then
///       a = two_sum(x.hi, -n L1)              exact (n L1 exact: 17 + 36 bits)
///       b = add(a, x.lo)       Alg 4          |e1| <= B4 |a + x.lo|
///       c = two_prod(n, L2)                   exact
///       d = add(b, -c)         Alg 6          |e2| <= B6 |b - c|
///       w = RN(n L3)                          |ew| <= u |n L3| < 2^-136
///       rh = add(d, -w)        Alg 4          |e3| <= B4 |d - w|
///       rh.lo := 0 if |rh.lo| < 2^-392        |ef| < 2^-392
///     (n = 0: rh = x up to ef.)  Then rh = r + n dL + e1 + e2 - ew + e3 + ef with
///     r = x - n L exactly, and |a + x.lo|, |b - c|, |d - w| <= rho0 + 2^17 (L2 + |L3|) + 2^-140
///     =: rho_a, so
///       eta := |rh - r| <= rho_a (2 B4 + B6) + 2^-136 + 2^17 * 2^-157 + 2^-392 < 0.019 u^2,
///     |rh| <= rho := rho0 + eta, and e^rh = e^r (1 + g) with |g| <= gamma := e^eta - 1.
///     k = floor(n / 128) and j = n - 128 k are exact; k is in [-1022, 1022] on the domain.
///  2. Tiny path, |rh.hi| <= 2^-54: p1 = add(rh, 1.0) (Alg 4).  e^rh = 1 + rh + R with
///     |R| <= rh^2 e^|rh| / 2 <= 2^-109 (1 + 2^-50) e^rh and 1 + rh <= e^rh, so
///     p1 = e^rh (1 + e'), |e'| <= (1 + B4)(1 + 2^-109 (1 + 2^-50)) - 1.
///  3. Main path.  s = rh, |s| <= rho.  Horner for e^s - 1 with the coefficients c_j above
///     (|c_j - 1/j!| <= kappa/j!, kappa = 0.27 u^2; c_1, c_2 exact):
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
///       |eps_0| <= (1 + |s|^N e^(2|s|) / (N+1)!)(1 + |th_1|)(1 + B12') - 1 < 183 u^2
///     (almost all of it the truncation: only |E_0| < 0.0028 times it reaches the result).
///     p1 = flush(add(E_0, 1.0)) (Alg 4).  1 + E_0 = e^rh (1 + eps_0 (1 - e^-rh)) and
///     |1 - e^-rh| <= e^rho - 1 =: sigma < 0.00272, so p1 = e^rh (1 + e'),
///       |e'| <= (1 + sigma |eps_0|)(1 + B4') - 1.
///  4. Both paths: p = mul(T_j, p1) (Alg 12) with T_j = 2^(j/128) (1 + tau_j), |tau_j| <= tau
///     < 0.455 u^2, so p = 2^(j/128) e^r (1 + E) with
///       |E| <= (1 + gamma)(1 + tau)(1 + |e'|)(1 + B12') - 1.
///  5. Numerically (recomputed by tests/number/double_double.cpp with MPFR): eta < 0.019u^2,
///     |eps_0| < 183u^2, |E| < 7.97u^2 (main path), < 7.60u^2 (tiny path); dd_exp_bound = 8u^2.
///  6. Flush: the low words of q_j, E_0 and p1 are set to 0 when below 2^-400; this changes
///     each by a relative amount < 2^-337 (|q_j| > 2^-19, |E_0| > 2^-56, p1 > 0.99), covered
///     by X' = X + 2^-329.  Purpose: every product in steps 3-4 then has operands that are 0
///     or whose product exceeds 2^-968 in magnitude (|s.hi| > 2^-54, nonzero low words of s
///     >= 2^-392 and of q_j, p1 >= 2^-400, |T_j.lo| > 2^-60), so Lemma U holds and the bounds
///     of Algs 4, 6, 12 apply in binary64.  No other operation overflows or underflows:
///     |n L2| > 2^-48 for n != 0, all values are below 2^18.
///  7. Scaling: k is in [-1022, 1022] on the domain, and p.hi is in [1.47, 2.01] when
///     k = -1022 (x >= -708 forces j >= 72) and in [0.99, 2.01] otherwise, so z.hi = p.hi 2^k
///     is exact and normal; z.lo = RN(p.lo 2^k) is exact unless below 2^-1022, where its error
///     is <= 2^-1075 (gradual underflow, one correctly rounded product).  As
///     e^x >= |z.hi| (1 - u)/(1 + E), that adds at most 2^-1075 / |z.hi| (1 + 2^-51) to the
///     relative error.  The bound is then summed in round-to-nearest and moved up one ulp
///     (next_up(RN(a + b)) > a + b).  Finally (z.hi, z.lo) is renormalized by fast_two_sum
///     (exact).  B also bounds the error relative to z: that needs B^2/(1 - B) more, which
///     the slack 8u^2 - 7.97u^2 and the factor (1 + 2^-50) instead of (1 + 2^-51) cover
///     (B <= 2^-53 on the domain).
inline dd_with_error exp_with_bound(dd x) noexcept {
  using namespace dd_detail;
  if (!std::isfinite(x.hi) || !std::isfinite(x.lo) || !environment_ok())
    return {dd{std::exp(x.hi + x.lo), 0.0}, inf};
  x = two_sum(x.hi, x.lo);  // exact normalization
  if (!(x.hi >= -708.0 && x.hi <= 709.0)) return {dd{std::exp(x.hi), 0.0}, inf};

  // 1. reduction
  const double nd = std::nearbyint(x.hi * inv_ln2);
  dd r = x;
  if (nd != 0.0) {
    const dd a = two_sum(x.hi, -rounded(nd * ln2_1));
    const dd b = add(a, x.lo);
    const dd c = two_prod(nd, ln2_2);
    const dd d = add(b, neg(c));
    const double w = rounded(nd * ln2_3);
    r = add(d, -w);
  }
  if (std::fabs(r.lo) < 0x1p-392) r.lo = 0.0;
  const double kd = std::floor(nd * (1.0 / exp_table_size));  // exact
  const int j = static_cast<int>(nd - kd * exp_table_size);     // exact, 0 <= j < 128

  dd p1;
  if (std::fabs(r.hi) <= 0x1p-54) {
    // 2. tiny path
    p1 = add(r, 1.0);
  } else {
    // 3. Taylor polynomial of e^s - 1
    const dd s = r;
    dd q = inv_factorial[exp_taylor_degree];
    for (int i = exp_taylor_degree - 1; i >= 3; --i) q = flush(add(inv_factorial[i], mul(s, q)));
    q = flush(add(mul(s, q), 0.5));
    q = flush(add(mul(s, q), 1.0));
    const dd e = flush(mul(s, q));
    p1 = flush(add(e, 1.0));
  }
  // 4. the table's factor
  const dd p = mul(dd{exp2_hi[j], exp2_lo[j]}, p1);

  // 7. scaling by 2^k
  const int k = static_cast<int>(kd);
  const double two_k = std::ldexp(1.0, k);  // exact: -1022 <= k <= 1022
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
