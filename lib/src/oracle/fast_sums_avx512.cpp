// lib/src/oracle/fast_sums_avx512.cpp — the oracle's two Dot2 loops (fast_common.hpp) compiled
// for AVX-512F, internal.
//
// Compiled with -mavx512f besides the fast sources' -mavx2 -mfma -ffp-contract=off when the build
// has the AVX2 kernel (CMake option ATTNCERT_FAST_KERNEL); fast_kernel.cpp calls these only after
// exp_batch has checked at run time that the processor and the OS support AVX-512F.  Written with
// intrinsics so that the accumulators stay in registers across a block of 64 columns or
// components (the compiler's own vectorization of the header's loops stores them at every step);
// each lane performs the header loop's IEEE operations in the same order (the comments name
// them), so the results are the same bits as the AVX2 build's.
#include "fast_common.hpp"
#include "softcap_lanes.hpp"

#if defined(__AVX512F__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace attncert::oracle::detail {

#if defined(__AVX512F__) && defined(__FMA__)
namespace {

// dot2_weighted_rows_loop for the components [k0, k0 + 8 NV) (the last vector's lanes beyond dv
// masked off by `last`): the 3 NV accumulators stay in registers across the keys (NV <= 8 uses
// at most 24 of the 32), each lane the loop's operations on its component k in the same order.
template <int NV>
void weighted_block(const std::size_t* keys, std::size_t count, const double* w_hi, const double* w_lo,
                    const double* V, std::size_t dv, std::size_t k0, __mmask8 last, double* as, double* ac,
                    double* ap) {
  __m512d S[NV], C[NV], A[NV];
  for (int v = 0; v < NV; ++v) {
    const __mmask8 m = v == NV - 1 ? last : static_cast<__mmask8>(0xff);
    S[v] = _mm512_maskz_loadu_pd(m, as + k0 + 8 * v);
    C[v] = _mm512_maskz_loadu_pd(m, ac + k0 + 8 * v);
    A[v] = _mm512_maskz_loadu_pd(m, ap + k0 + 8 * v);
  }
  for (std::size_t t = 0; t < count; ++t) {
    const std::size_t j = keys[t];
    const __m512d wh = _mm512_set1_pd(w_hi[j]), wl = _mm512_set1_pd(w_lo[j]);
    const double* row = V + j * dv + k0;
    for (int v = 0; v < NV; ++v) {
      const __mmask8 m = v == NV - 1 ? last : static_cast<__mmask8>(0xff);
      const __m512d x = _mm512_maskz_loadu_pd(m, row + 8 * v);
      const __m512d p = _mm512_mul_pd(wh, x);                      // p = wh v_k
      const __m512d e = _mm512_fmsub_pd(wh, x, p);                 // e = fma(wh, v_k, -p)
      const __m512d sn = _mm512_add_pd(S[v], p);                   // sn = s + p
      const __m512d bb = _mm512_sub_pd(sn, S[v]);                  // bb = sn - s
      const __m512d sig = _mm512_add_pd(_mm512_sub_pd(S[v], _mm512_sub_pd(sn, bb)), _mm512_sub_pd(p, bb));
      S[v] = sn;
      C[v] = _mm512_add_pd(C[v], _mm512_fmadd_pd(wl, x, _mm512_add_pd(sig, e)));  // c + fma(wl, v_k, sig + e)
      A[v] = _mm512_add_pd(A[v], _mm512_abs_pd(p));                             // P + |p|
    }
  }
  for (int v = 0; v < NV; ++v) {
    const __mmask8 m = v == NV - 1 ? last : static_cast<__mmask8>(0xff);
    _mm512_mask_storeu_pd(as + k0 + 8 * v, m, S[v]);
    _mm512_mask_storeu_pd(ac + k0 + 8 * v, m, C[v]);
    _mm512_mask_storeu_pd(ap + k0 + 8 * v, m, A[v]);
  }
}

// dot2_columns_loop for the columns [j0, j0 + 8 NV) (the last vector's lanes beyond jend masked
// off by `last`): the accumulators stay in registers across l, each lane the loop's operations
// on its column j in the same order.
template <int NV>
void columns_block(const double* x, const double* MT, std::size_t n, std::size_t d, std::size_t j0, __mmask8 last,
                   double* s, double* c, double* P) {
  __m512d S[NV], C[NV], A[NV];
  for (int v = 0; v < NV; ++v) {
    const __mmask8 m = v == NV - 1 ? last : static_cast<__mmask8>(0xff);
    S[v] = _mm512_maskz_loadu_pd(m, s + j0 + 8 * v);
    C[v] = _mm512_maskz_loadu_pd(m, c + j0 + 8 * v);
    A[v] = _mm512_maskz_loadu_pd(m, P + j0 + 8 * v);
  }
  for (std::size_t l = 0; l < d; ++l) {
    const __m512d xl = _mm512_set1_pd(x[l]);
    const double* col = MT + l * n + j0;
    for (int v = 0; v < NV; ++v) {
      const __mmask8 m = v == NV - 1 ? last : static_cast<__mmask8>(0xff);
      const __m512d y = _mm512_maskz_loadu_pd(m, col + 8 * v);
      const __m512d p = _mm512_mul_pd(xl, y);                      // p = x_l col_j
      const __m512d e = _mm512_fmsub_pd(xl, y, p);                 // e = fma(x_l, col_j, -p)
      const __m512d sn = _mm512_add_pd(S[v], p);
      const __m512d bb = _mm512_sub_pd(sn, S[v]);
      const __m512d sig = _mm512_add_pd(_mm512_sub_pd(S[v], _mm512_sub_pd(sn, bb)), _mm512_sub_pd(p, bb));
      S[v] = sn;
      C[v] = _mm512_add_pd(C[v], _mm512_add_pd(sig, e));           // c + (sig + e)
      A[v] = _mm512_add_pd(A[v], _mm512_abs_pd(p));
    }
  }
  for (int v = 0; v < NV; ++v) {
    const __mmask8 m = v == NV - 1 ? last : static_cast<__mmask8>(0xff);
    _mm512_mask_storeu_pd(s + j0 + 8 * v, m, S[v]);
    _mm512_mask_storeu_pd(c + j0 + 8 * v, m, C[v]);
    _mm512_mask_storeu_pd(P + j0 + 8 * v, m, A[v]);
  }
}

}  // namespace
#endif

bool sums_avx512_compiled() {
#if defined(__AVX512F__) && defined(__FMA__)
  return true;
#else
  return false;
#endif
}

void dot2_columns_avx512(const double* x, const double* MT, std::size_t n, std::size_t d, std::size_t jbegin,
                         std::size_t jend, double* s, double* c, double* P) {
#if defined(__AVX512F__) && defined(__FMA__)
  // blocks of 64 columns, then one block of the 1-63 left (its last vector masked)
  std::size_t j0 = jbegin;
  for (; j0 + 64 <= jend; j0 += 64) columns_block<8>(x, MT, n, d, j0, 0xff, s, c, P);
  const std::size_t r = jend - j0;
  if (jend <= j0) return;
  const __mmask8 last = static_cast<__mmask8>(r % 8 == 0 ? 0xff : (1u << (r % 8)) - 1);
  switch ((r + 7) / 8) {
    case 1: columns_block<1>(x, MT, n, d, j0, last, s, c, P); break;
    case 2: columns_block<2>(x, MT, n, d, j0, last, s, c, P); break;
    case 3: columns_block<3>(x, MT, n, d, j0, last, s, c, P); break;
    case 4: columns_block<4>(x, MT, n, d, j0, last, s, c, P); break;
    case 5: columns_block<5>(x, MT, n, d, j0, last, s, c, P); break;
    case 6: columns_block<6>(x, MT, n, d, j0, last, s, c, P); break;
    case 7: columns_block<7>(x, MT, n, d, j0, last, s, c, P); break;
    default: columns_block<8>(x, MT, n, d, j0, last, s, c, P); break;
  }
#else
  (void)x, (void)MT, (void)n, (void)d, (void)jbegin, (void)jend, (void)s, (void)c, (void)P;
#endif
}

void dot2_weighted_rows_avx512(const std::size_t* keys, std::size_t count, const double* w_hi, const double* w_lo,
                               const double* V, std::size_t dv, double* as, double* ac, double* ap) {
#if defined(__AVX512F__) && defined(__FMA__)
  // blocks of 64 components, then one block of the 1-63 left (its last vector masked)
  std::size_t k0 = 0;
  for (; k0 + 64 <= dv; k0 += 64) weighted_block<8>(keys, count, w_hi, w_lo, V, dv, k0, 0xff, as, ac, ap);
  const std::size_t r = dv - k0;
  if (r == 0) return;
  const __mmask8 last = static_cast<__mmask8>(r % 8 == 0 ? 0xff : (1u << (r % 8)) - 1);
  switch ((r + 7) / 8) {
    case 1: weighted_block<1>(keys, count, w_hi, w_lo, V, dv, k0, last, as, ac, ap); break;
    case 2: weighted_block<2>(keys, count, w_hi, w_lo, V, dv, k0, last, as, ac, ap); break;
    case 3: weighted_block<3>(keys, count, w_hi, w_lo, V, dv, k0, last, as, ac, ap); break;
    case 4: weighted_block<4>(keys, count, w_hi, w_lo, V, dv, k0, last, as, ac, ap); break;
    case 5: weighted_block<5>(keys, count, w_hi, w_lo, V, dv, k0, last, as, ac, ap); break;
    case 6: weighted_block<6>(keys, count, w_hi, w_lo, V, dv, k0, last, as, ac, ap); break;
    case 7: weighted_block<7>(keys, count, w_hi, w_lo, V, dv, k0, last, as, ac, ap); break;
    default: weighted_block<8>(keys, count, w_hi, w_lo, V, dv, k0, last, as, ac, ap); break;
  }
#else
  (void)keys, (void)count, (void)w_hi, (void)w_lo, (void)V, (void)dv, (void)as, (void)ac, (void)ap;
#endif
}

std::size_t softcap_quotients_avx512(const softcap_view& sv, double m_hi, double m_lo, std::size_t jb,
                                     std::size_t je, std::size_t* redo, std::size_t& nredo) {
#if defined(__AVX512F__) && defined(ATTNCERT_VECTOR_DD)
  return softcap_quotient_lanes<__m512d>(sv, m_hi, m_lo, jb, je, redo, nredo);
#else
  (void)sv, (void)m_hi, (void)m_lo, (void)je, (void)redo, (void)nredo;
  return jb;
#endif
}

std::size_t softcap_finish_avx512(const softcap_view& sv, double C, std::size_t jb, std::size_t je,
                                  std::size_t* redo, std::size_t& nredo) {
#if defined(__AVX512F__) && defined(ATTNCERT_VECTOR_DD)
  return softcap_finish_lanes<__m512d>(sv, C, jb, je, redo, nredo);
#else
  (void)sv, (void)C, (void)je, (void)redo, (void)nredo;
  return jb;
#endif
}

}  // namespace attncert::oracle::detail
