// lib/src/oracle/rounding.cpp — rounding exact values (binary64 sums, MPFR numbers) to the
// target formats, correctly: see attncert/oracle/oracle.hpp and proofs/P11-oracle.md.
#include <gmp.h>
#include <mpfi.h>
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attncert/error.hpp"
#include "attncert/number/double_double.hpp"
#include "attncert/number/emulated.hpp"
#include "attncert/number/traits.hpp"
#include "ziv_stage.hpp"

namespace attncert::oracle {

namespace internal {

// RN of a double to a narrower target (one correct rounding).
double rn_from_double(double s, target_format t) noexcept {
  switch (t) {
    case target_format::binary64: return s;
    case target_format::binary32: return static_cast<double>(static_cast<float>(s));
    case target_format::binary16: return static_cast<double>(binary16(s));
    case target_format::bfloat16: return static_cast<double>(bfloat16(s));
  }
  return s;
}

// RN_t(s + eps) where eps has sign `dir` and |eps| is below one binary64 ulp of s and does not
// reach the next binary64 number (e.g. the error term of two_sum, or the remainder after a
// rounding toward zero).  Every rounding boundary (midpoint) of a target narrower than binary64
// is a binary64 number, so s + eps lies on the same side of every boundary as s unless s is a
// boundary itself; then the sign of eps decides.
double round_dir(double s, int dir, target_format t) noexcept {
  const double f = rn_from_double(s, t);
  if (dir == 0 || t == target_format::binary64 || !std::isfinite(s)) return f;
  const double ulp = target_ulp(s, t);
  const double half = ulp * 0.5;
  const double x = s / half;  // exact (power-of-two scaling), |x| < 2^(p+2)
  if (x == std::trunc(x) && std::fmod(std::fabs(x), 2.0) == 1.0)  // s is a midpoint
    return rn_from_double(dir > 0 ? s + half : s - half, t);
  return f;
}

// RN of an MPFR number to the target.
double round_mpfr_to_target(mpfr_srcptr x, target_format t) {
  if (mpfr_nan_p(x)) return std::numeric_limits<double>::quiet_NaN();
  if (mpfr_zero_p(x)) return mpfr_signbit(x) ? -0.0 : 0.0;
  if (t == target_format::binary64) {
    // RN to binary64 with gradual underflow and overflow, by comparison with the midpoint.
    const double z = mpfr_get_d(x, MPFR_RNDZ);
    const int c = mpfr_cmp_d(x, z);
    if (c == 0) return z;
    if (std::fabs(z) == std::numeric_limits<double>::max()) {
      // Overflow threshold 2^1024 (1 - 2^-54): at or beyond it RN gives ±Inf.
      mpfr_var th(64);
      mpfr_set_ui_2exp(th.v, 1, 1024, MPFR_RNDN);
      mpfr_sub_d(th.v, th.v, std::ldexp(1.0, 970), MPFR_RNDN);  // exact at 64 bits
      if (mpfr_cmpabs(x, th.v) >= 0) return std::copysign(inf, z);
      return z;
    }
    const double away = std::nextafter(z, c > 0 ? inf : -inf);
    mpfr_var mid(64);
    mpfr_set_d(mid.v, z, MPFR_RNDN);
    mpfr_add_d(mid.v, mid.v, away, MPFR_RNDN);  // exact: adjacent binary64 numbers
    mpfr_div_2ui(mid.v, mid.v, 1, MPFR_RNDN);
    const int cm = mpfr_cmpabs(x, mid.v);
    if (cm < 0) return z == 0 ? std::copysign(0.0, away) : z;
    if (cm > 0) return away;
    // tie: the one with an even last significand bit
    std::uint64_t bz = 0;
    std::memcpy(&bz, &z, sizeof bz);
    return (bz & 1u) == 0 ? (z == 0 ? std::copysign(0.0, away) : z) : away;
  }
  const double z = mpfr_get_d(x, MPFR_RNDZ);  // |x - z| < one binary64 ulp, same side
  const int c = mpfr_cmp_d(x, z);
  // c > 0 means x > z (x positive, as z = RZ(x)); the remainder x - z has the sign of c.
  double r = round_dir(z, c == 0 ? 0 : (c > 0 ? 1 : -1), t);
  if (r == 0) r = mpfr_signbit(x) ? -0.0 : 0.0;
  return r;
}

// Decides whether two target numbers are adjacent (or equal).
bool adjacent_or_equal(double a, double b, target_format t) {
  if (!std::isfinite(a) || !std::isfinite(b)) return false;
  if (a == b) return true;
  const double lo = std::min(a, b), hi = std::max(a, b);
  const double diff = hi - lo;  // exact for adjacent numbers of any target
  return diff == target_ulp(lo, t) || diff == target_ulp(hi, t);
}

}  // namespace internal

using namespace internal;

target_format parse_target(const std::string& s) {
  if (s == "binary64" || s == "float64" || s == "fp64" || s == "f64") return target_format::binary64;
  if (s == "binary32" || s == "float32" || s == "fp32" || s == "f32") return target_format::binary32;
  if (s == "binary16" || s == "float16" || s == "fp16" || s == "f16" || s == "half") return target_format::binary16;
  if (s == "bfloat16" || s == "bf16") return target_format::bfloat16;
  throw input_error("unknown target format '" + s + "' (expected binary64, binary32, binary16 or bfloat16)");
}

std::string to_string(target_format t) {
  switch (t) {
    case target_format::binary64: return "binary64";
    case target_format::binary32: return "binary32";
    case target_format::binary16: return "binary16";
    case target_format::bfloat16: return "bfloat16";
  }
  return "?";
}

int target_precision(target_format t) {
  switch (t) {
    case target_format::binary64: return 53;
    case target_format::binary32: return 24;
    case target_format::binary16: return 11;
    case target_format::bfloat16: return 8;
  }
  return 53;
}

int target_emin(target_format t) {
  switch (t) {
    case target_format::binary64: return -1022;
    case target_format::binary32: return -126;
    case target_format::binary16: return -14;
    case target_format::bfloat16: return -126;
  }
  return -1022;
}

double target_ulp(double x, target_format t) noexcept {
  const int p = target_precision(t), emin = target_emin(t);
  int e = emin;
  if (x != 0 && std::isfinite(x)) e = std::max(std::ilogb(x), emin);
  return std::ldexp(1.0, e - p + 1);
}

double round_sum_to_target(double a, double b, target_format t) noexcept {
  if (t == target_format::binary64) return a + b;  // one IEEE addition: RN of the exact sum
  const dd s = two_sum(a, b);
  return round_dir(s.hi, s.lo > 0 ? 1 : (s.lo < 0 ? -1 : 0), t);
}

}  // namespace attncert::oracle
