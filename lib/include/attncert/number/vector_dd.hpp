// attncert/number/vector_dd.hpp — double-double arithmetic on vector registers (AVX2 + FMA: four
// lanes; AVX-512F: eight lanes).  Internal to the library's fast kernels, not API.
//
// Included only by the units compiled with -ffp-contract=off and -mavx2 -mfma (CMake's
// ATTNCERT_FAST_SOURCES; exp_batch_avx512.cpp also with -mavx512f).  Every function performs,
// lane by lane, exactly the IEEE operations of the scalar function of number/double_double.hpp
// it names (vector arithmetic is IEEE binary64, round to nearest under MXCSR's default), so a
// vector loop built from them returns bit for bit what the scalar loop returns, and the scalar
// bounds apply unchanged.
//
// Everything here has internal linkage (an unnamed namespace): the AVX-512 unit compiles these
// inline functions with -mavx512f, and a weak copy of one of them shared with the AVX2 units
// could otherwise be the one the linker keeps, and run on a processor without AVX-512.  For the
// same reason the AVX-512 unit calls no inline function of another header.
#pragma once

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include <cstdint>
#define ATTNCERT_VECTOR_DD 1

#include "attncert/number/double_double.hpp"

// vdd_t<__m256d> drops the vector type's attributes from the template argument (GCC warns with
// -Wignored-attributes); the member types keep them, which is all the code relies on.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"

namespace attncert::vector_dd {
namespace {

// ---- primitives, overloaded by register type -------------------------------------------------
template <class T>
T splat(double x);
template <>
inline __m256d splat<__m256d>(double x) { return _mm256_set1_pd(x); }
inline __m256d vadd(__m256d a, __m256d b) { return _mm256_add_pd(a, b); }
inline __m256d vsub(__m256d a, __m256d b) { return _mm256_sub_pd(a, b); }
inline __m256d vmul(__m256d a, __m256d b) { return _mm256_mul_pd(a, b); }
inline __m256d vdiv(__m256d a, __m256d b) { return _mm256_div_pd(a, b); }
inline __m256d vfma(__m256d a, __m256d b, __m256d c) { return _mm256_fmadd_pd(a, b, c); }
inline __m256d vneg(__m256d a) { return _mm256_xor_pd(a, _mm256_set1_pd(-0.0)); }
inline __m256d vabs(__m256d a) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), a); }
inline __m256d vround(__m256d a) { return _mm256_round_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline __m256d loadu(const double* p, __m256d) { return _mm256_loadu_pd(p); }
inline void storeu(double* p, __m256d a) { _mm256_storeu_pd(p, a); }
// Masks: a register of all-ones / all-zeros lanes.  Comparisons are ordered (false with a NaN)
// except cmp_ne, which is true with a NaN, as C++'s operators.
inline __m256d cmp_lt(__m256d a, __m256d b) { return _mm256_cmp_pd(a, b, _CMP_LT_OQ); }
inline __m256d cmp_le(__m256d a, __m256d b) { return _mm256_cmp_pd(a, b, _CMP_LE_OQ); }
inline __m256d cmp_gt(__m256d a, __m256d b) { return _mm256_cmp_pd(a, b, _CMP_GT_OQ); }
inline __m256d cmp_ge(__m256d a, __m256d b) { return _mm256_cmp_pd(a, b, _CMP_GE_OQ); }
inline __m256d cmp_eq(__m256d a, __m256d b) { return _mm256_cmp_pd(a, b, _CMP_EQ_OQ); }
inline __m256d cmp_ne(__m256d a, __m256d b) { return _mm256_cmp_pd(a, b, _CMP_NEQ_UQ); }
inline __m256d mask_and(__m256d a, __m256d b) { return _mm256_and_pd(a, b); }
inline __m256d mask_or(__m256d a, __m256d b) { return _mm256_or_pd(a, b); }
inline __m256d mask_andnot(__m256d a, __m256d b) { return _mm256_andnot_pd(a, b); }  // !a & b
inline __m256d blend(__m256d mask, __m256d yes, __m256d no) { return _mm256_blendv_pd(no, yes, mask); }
inline __m256d zero_unless(__m256d mask, __m256d a) { return _mm256_and_pd(mask, a); }
inline __m256d mask_not(__m256d a) { return _mm256_xor_pd(a, _mm256_castsi256_pd(_mm256_set1_epi64x(-1))); }
/// The lanes' truth values as bits 0-3.
inline unsigned mask_bits(__m256d mask) { return static_cast<unsigned>(_mm256_movemask_pd(mask)); }
/// Lanes where the bytes allowed[0..3] are nonzero.
inline __m256d allowed_mask(const std::uint8_t* allowed, __m256d) {
  std::int32_t b;
  __builtin_memcpy(&b, allowed, sizeof b);
  return _mm256_castsi256_pd(_mm256_cmpgt_epi64(_mm256_cvtepu8_epi64(_mm_cvtsi32_si128(b)), _mm256_setzero_si256()));
}
/// p[l] = a[l] for the lanes l of mask; the others are not written.
inline void store_masked(double* p, __m256d mask, __m256d a) { _mm256_maskstore_pd(p, _mm256_castpd_si256(mask), a); }
/// 2^k for integer-valued k in [-1022, 1023] (the exponent field (k + 1023) << 52).
inline __m256d pow2(__m256d k) {
  const __m256i k64 = _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(k));
  return _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(k64, _mm256_set1_epi64x(1023)), 52));
}
inline __m256d vfloor(__m256d a) { return _mm256_round_pd(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
/// table[j] for integer-valued j in [0, 2^31) (the caller bounds j by the table's size).
inline __m256d gather(const double* table, __m256d j) {
  // the masked form with every lane selected: GCC 12's unmasked form starts from an undefined
  // register and warns (-Wmaybe-uninitialized) when inlined
  return _mm256_mask_i32gather_pd(_mm256_setzero_pd(), table, _mm256_cvtpd_epi32(j), _mm256_set1_pd(-1.0), 8);
}

#ifdef __AVX512F__
template <>
inline __m512d splat<__m512d>(double x) { return _mm512_set1_pd(x); }
inline __m512d vadd(__m512d a, __m512d b) { return _mm512_add_pd(a, b); }
inline __m512d vsub(__m512d a, __m512d b) { return _mm512_sub_pd(a, b); }
inline __m512d vmul(__m512d a, __m512d b) { return _mm512_mul_pd(a, b); }
inline __m512d vdiv(__m512d a, __m512d b) { return _mm512_div_pd(a, b); }
inline __m512d vfma(__m512d a, __m512d b, __m512d c) { return _mm512_fmadd_pd(a, b, c); }
inline __m512d vneg(__m512d a) {
  return _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(a), _mm512_set1_epi64(INT64_MIN)));
}
inline __m512d vabs(__m512d a) {
  return _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(a), _mm512_set1_epi64(INT64_MAX)));
}
// The full-mask maskz_ forms: GCC 12's unmasked forms start from an undefined register and warn
// (-Wmaybe-uninitialized) when inlined; with every lane selected the results are the same.
inline __m512d vround(__m512d a) {
  return _mm512_maskz_roundscale_pd(0xFF, a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
inline __m512d loadu(const double* p, __m512d) { return _mm512_loadu_pd(p); }
inline void storeu(double* p, __m512d a) { _mm512_storeu_pd(p, a); }
inline __mmask8 cmp_lt(__m512d a, __m512d b) { return _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ); }
inline __mmask8 cmp_le(__m512d a, __m512d b) { return _mm512_cmp_pd_mask(a, b, _CMP_LE_OQ); }
inline __mmask8 cmp_gt(__m512d a, __m512d b) { return _mm512_cmp_pd_mask(a, b, _CMP_GT_OQ); }
inline __mmask8 cmp_ge(__m512d a, __m512d b) { return _mm512_cmp_pd_mask(a, b, _CMP_GE_OQ); }
inline __mmask8 cmp_eq(__m512d a, __m512d b) { return _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ); }
inline __mmask8 cmp_ne(__m512d a, __m512d b) { return _mm512_cmp_pd_mask(a, b, _CMP_NEQ_UQ); }
inline __mmask8 mask_and(__mmask8 a, __mmask8 b) { return static_cast<__mmask8>(a & b); }
inline __mmask8 mask_or(__mmask8 a, __mmask8 b) { return static_cast<__mmask8>(a | b); }
inline __mmask8 mask_andnot(__mmask8 a, __mmask8 b) { return static_cast<__mmask8>(~a & b); }
inline __m512d blend(__mmask8 mask, __m512d yes, __m512d no) { return _mm512_mask_blend_pd(mask, no, yes); }
inline __m512d zero_unless(__mmask8 mask, __m512d a) { return _mm512_maskz_mov_pd(mask, a); }
inline __mmask8 mask_not(__mmask8 a) { return static_cast<__mmask8>(~a); }
inline unsigned mask_bits(__mmask8 mask) { return mask; }
inline __mmask8 allowed_mask(const std::uint8_t* allowed, __m512d) {
  std::int64_t b;
  __builtin_memcpy(&b, allowed, sizeof b);
  return _mm512_cmpneq_epi64_mask(_mm512_maskz_cvtepu8_epi64(0xFF, _mm_cvtsi64_si128(b)), _mm512_setzero_si512());
}
inline void store_masked(double* p, __mmask8 mask, __m512d a) { _mm512_mask_storeu_pd(p, mask, a); }
inline __m512d pow2(__m512d k) {
  const __m512i k64 = _mm512_maskz_cvtepi32_epi64(0xFF, _mm512_maskz_cvtpd_epi32(0xFF, k));
  return _mm512_castsi512_pd(_mm512_maskz_slli_epi64(0xFF, _mm512_add_epi64(k64, _mm512_set1_epi64(1023)), 52));
}
inline __m512d vfloor(__m512d a) {
  return _mm512_maskz_roundscale_pd(0xFF, a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
}
inline __m512d gather(const double* table, __m512d j) {
  return _mm512_mask_i32gather_pd(_mm512_setzero_pd(), 0xFF, _mm512_maskz_cvtpd_epi32(0xFF, j), table, 8);
}
#endif

// ---- double-double operations ([JMP]; names as in number/double_double.hpp) ---------------------
template <class T>
struct vdd_t {
  T hi, lo;
};
template <class T>
inline vdd_t<T> v_two_sum(T a, T b) {
  const T s = vadd(a, b);
  const T bb = vsub(s, a);
  const T e = vadd(vsub(a, vsub(s, bb)), vsub(b, bb));
  return {s, e};
}
template <class T>
inline vdd_t<T> v_fast_two_sum(T a, T b) {
  const T s = vadd(a, b);
  return {s, vsub(b, vsub(s, a))};
}
template <class T>
inline vdd_t<T> v_two_prod(T a, T b) {
  const T p = vmul(a, b);
  return {p, vfma(a, b, vneg(p))};
}
template <class T>
inline vdd_t<T> v_add(vdd_t<T> x, T y) {  // Algorithm 4
  const vdd_t<T> s = v_two_sum(x.hi, y);
  const T v = vadd(x.lo, s.lo);
  return v_fast_two_sum(s.hi, v);
}
template <class T>
inline vdd_t<T> v_add(vdd_t<T> x, vdd_t<T> y) {  // Algorithm 6
  const vdd_t<T> s = v_two_sum(x.hi, y.hi);
  const vdd_t<T> t = v_two_sum(x.lo, y.lo);
  const T c = vadd(s.lo, t.hi);
  const vdd_t<T> v = v_fast_two_sum(s.hi, c);
  const T w = vadd(t.lo, v.lo);
  return v_fast_two_sum(v.hi, w);
}
template <class T>
inline vdd_t<T> v_mul(vdd_t<T> x, vdd_t<T> y) {  // Algorithm 12
  const vdd_t<T> c = v_two_prod(x.hi, y.hi);
  const T tl0 = vmul(x.lo, y.lo);
  const T tl1 = vfma(x.hi, y.lo, tl0);
  const T cl2 = vfma(x.lo, y.hi, tl1);
  const T cl3 = vadd(c.lo, cl2);
  return v_fast_two_sum(c.hi, cl3);
}
template <class T>
inline vdd_t<T> v_mul(vdd_t<T> x, T y) {  // Algorithm 9 (mul(dd, double))
  const vdd_t<T> c = v_two_prod(x.hi, y);
  const T cl3 = vfma(x.lo, y, c.lo);
  return v_fast_two_sum(c.hi, cl3);
}
template <class T>
inline vdd_t<T> v_neg(vdd_t<T> x) {
  return {vneg(x.hi), vneg(x.lo)};
}

// ---- the operand checks of number/double_double.hpp (dd_detail), lane by lane -----------------
/// Lanes where x is finite (false for NaN).
template <class T>
inline auto v_finite(T x) {
  return cmp_lt(vabs(x), splat<T>(dd_detail::inf));
}
/// dd_detail::product_ok.
template <class T>
inline auto v_product_ok(T a, T b) {
  const T zero = splat<T>(0.0);
  return mask_or(mask_or(cmp_eq(a, zero), cmp_eq(b, zero)),
                 cmp_ge(vmul(vabs(a), vabs(b)), splat<T>(dd_detail::product_floor)));
}
/// dd_detail::operand_ok: finite, normalized, |hi| <= 2^1020.
template <class T>
inline auto v_operand_ok(vdd_t<T> x) {
  return mask_and(mask_and(v_finite(x.hi), v_finite(x.lo)),
                  mask_and(cmp_eq(vadd(x.hi, x.lo), x.hi), cmp_le(vabs(x.hi), splat<T>(dd_detail::magnitude_cap))));
}
/// dd_detail::mul_ok(x, y).
template <class T>
inline auto v_mul_ok(vdd_t<T> x, vdd_t<T> y) {
  return mask_and(mask_and(cmp_le(vmul(vabs(x.hi), vabs(y.hi)), splat<T>(dd_detail::magnitude_cap)),
                           v_product_ok(x.hi, y.hi)),
                  mask_and(mask_and(v_product_ok(x.lo, y.lo), v_product_ok(x.hi, y.lo)), v_product_ok(x.lo, y.hi)));
}
/// dd_detail::mul_fp_ok(x, y).
template <class T>
inline auto v_mul_fp_ok(vdd_t<T> x, T y) {
  return mask_and(mask_and(v_finite(y), cmp_le(vmul(vabs(x.hi), vabs(y)), splat<T>(dd_detail::magnitude_cap))),
                  mask_and(v_product_ok(x.hi, y), v_product_ok(x.lo, y)));
}

}  // namespace
}  // namespace attncert::vector_dd

#pragma GCC diagnostic pop
#endif
