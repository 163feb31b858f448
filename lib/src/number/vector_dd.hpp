// lib/src/number/vector_dd.hpp — four-lane double-double arithmetic (AVX2 + FMA), internal.
//
// Included only by the units compiled with -mavx2 -mfma -ffp-contract=off (CMake's
// ATTNCERT_FAST_SOURCES): exp_batch.cpp and the oracle's fast kernel.  Every function performs,
// lane by lane, exactly the IEEE operations of the scalar function of number/double_double.hpp
// it names (AVX2 arithmetic is IEEE binary64, round to nearest), so a vector loop built from
// them returns bit for bit what the scalar loop returns, and the scalar bounds apply unchanged.
#pragma once

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define ATTNCERT_VECTOR_DD 1

#include "attncert/number/double_double.hpp"

namespace attncert::vector_dd {

// Four-lane double-double operations: per lane exactly the IEEE operations of the scalar
// functions of number/double_double.hpp (AVX2 arithmetic is IEEE binary64, round to nearest).
using v4 = __m256d;
struct vdd {
  v4 hi, lo;
};
inline v4 vset(double x) { return _mm256_set1_pd(x); }
inline vdd v_two_sum(v4 a, v4 b) {
  const v4 s = _mm256_add_pd(a, b);
  const v4 bb = _mm256_sub_pd(s, a);
  const v4 e = _mm256_add_pd(_mm256_sub_pd(a, _mm256_sub_pd(s, bb)), _mm256_sub_pd(b, bb));
  return {s, e};
}
inline vdd v_fast_two_sum(v4 a, v4 b) {
  const v4 s = _mm256_add_pd(a, b);
  return {s, _mm256_sub_pd(b, _mm256_sub_pd(s, a))};
}
inline vdd v_two_prod(v4 a, v4 b) {
  const v4 p = _mm256_mul_pd(a, b);
  return {p, _mm256_fmadd_pd(a, b, _mm256_sub_pd(_mm256_setzero_pd(), p))};
}
inline vdd v_add(vdd x, v4 y) {  // Algorithm 4
  const vdd s = v_two_sum(x.hi, y);
  const v4 v = _mm256_add_pd(x.lo, s.lo);
  return v_fast_two_sum(s.hi, v);
}
inline vdd v_add(vdd x, vdd y) {  // Algorithm 6
  const vdd s = v_two_sum(x.hi, y.hi);
  const vdd t = v_two_sum(x.lo, y.lo);
  const v4 c = _mm256_add_pd(s.lo, t.hi);
  const vdd v = v_fast_two_sum(s.hi, c);
  const v4 w = _mm256_add_pd(t.lo, v.lo);
  return v_fast_two_sum(v.hi, w);
}
inline vdd v_mul(vdd x, vdd y) {  // Algorithm 12
  const vdd c = v_two_prod(x.hi, y.hi);
  const v4 tl0 = _mm256_mul_pd(x.lo, y.lo);
  const v4 tl1 = _mm256_fmadd_pd(x.hi, y.lo, tl0);
  const v4 cl2 = _mm256_fmadd_pd(x.lo, y.hi, tl1);
  const v4 cl3 = _mm256_add_pd(c.lo, cl2);
  return v_fast_two_sum(c.hi, cl3);
}
inline v4 v_abs(v4 x) { return _mm256_andnot_pd(vset(-0.0), x); }
inline vdd v_neg(vdd x) { return {_mm256_xor_pd(x.hi, vset(-0.0)), _mm256_xor_pd(x.lo, vset(-0.0))}; }
inline vdd v_mul(vdd x, v4 y) {  // Algorithm 9 (mul(dd, double))
  const vdd c = v_two_prod(x.hi, y);
  const v4 cl3 = _mm256_fmadd_pd(x.lo, y, c.lo);
  return v_fast_two_sum(c.hi, cl3);
}
inline v4 v_load(const double* p) { return _mm256_loadu_pd(p); }
inline v4 v_and(v4 a, v4 b) { return _mm256_and_pd(a, b); }
inline v4 v_or(v4 a, v4 b) { return _mm256_or_pd(a, b); }
inline v4 v_lt(v4 a, v4 b) { return _mm256_cmp_pd(a, b, _CMP_LT_OQ); }
inline v4 v_le(v4 a, v4 b) { return _mm256_cmp_pd(a, b, _CMP_LE_OQ); }
inline v4 v_ge(v4 a, v4 b) { return _mm256_cmp_pd(a, b, _CMP_GE_OQ); }
inline v4 v_eq(v4 a, v4 b) { return _mm256_cmp_pd(a, b, _CMP_EQ_OQ); }
inline v4 v_select(v4 mask, v4 yes, v4 no) { return _mm256_blendv_pd(no, yes, mask); }
/// Lanes where x is finite (false for NaN).
inline v4 v_finite(v4 x) { return v_lt(v_abs(x), vset(dd_detail::inf)); }
/// dd_detail::product_ok, lane by lane.
inline v4 v_product_ok(v4 a, v4 b) {
  const v4 zero = _mm256_setzero_pd();
  return v_or(v_or(v_eq(a, zero), v_eq(b, zero)),
              v_ge(_mm256_mul_pd(v_abs(a), v_abs(b)), vset(dd_detail::product_floor)));
}
/// dd_detail::operand_ok: finite, normalized, |hi| <= 2^1020.
inline v4 v_operand_ok(vdd x) {
  return v_and(v_and(v_finite(x.hi), v_finite(x.lo)),
               v_and(v_eq(_mm256_add_pd(x.hi, x.lo), x.hi), v_le(v_abs(x.hi), vset(dd_detail::magnitude_cap))));
}
/// dd_detail::mul_ok(x, y).
inline v4 v_mul_ok(vdd x, vdd y) {
  return v_and(v_and(v_le(_mm256_mul_pd(v_abs(x.hi), v_abs(y.hi)), vset(dd_detail::magnitude_cap)),
                     v_product_ok(x.hi, y.hi)),
               v_and(v_and(v_product_ok(x.lo, y.lo), v_product_ok(x.hi, y.lo)), v_product_ok(x.lo, y.hi)));
}
/// dd_detail::mul_fp_ok(x, y).
inline v4 v_mul_fp_ok(vdd x, v4 y) {
  return v_and(v_and(v_finite(y), v_le(_mm256_mul_pd(v_abs(x.hi), v_abs(y)), vset(dd_detail::magnitude_cap))),
               v_and(v_product_ok(x.hi, y), v_product_ok(x.lo, y)));
}
/// The four lanes' truth values as bits 0-3.
inline int v_bits(v4 mask) { return _mm256_movemask_pd(mask); }

}  // namespace attncert::vector_dd
#endif
