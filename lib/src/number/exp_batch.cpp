// lib/src/number/exp_batch.cpp — exp_with_bound over an array, four lanes at a time (number/exp_batch.hpp).
//
// Compiled like the oracle's fast kernels: -ffp-contract=off always, and -mavx2 -mfma when the
// build machine has them (CMake option ATTNCERT_FAST_KERNEL).  Every lane performs exactly the
// IEEE operations of the scalar exp_with_bound (AVX2 arithmetic is IEEE binary64, round to
// nearest), so the results are bit for bit those of the scalar loop at the end.
#include <cmath>

#include "attncert/number/double_double.hpp"
#include "attncert/number/exp_batch.hpp"
#include "vector_dd.hpp"
#ifdef ATTNCERT_VECTOR_DD
#define ATTNCERT_VECTOR_EXP 1
#endif

namespace attncert {

bool exp_batch_vectorized() {
#ifdef ATTNCERT_VECTOR_EXP
  return true;
#else
  return false;
#endif
}

#ifdef ATTNCERT_VECTOR_EXP
namespace {
using namespace vector_dd;
inline vdd v_flush(vdd v) {  // lo := 0 where |lo| < 2^-400
  const v4 keep = _mm256_cmp_pd(v_abs(v.lo), vset(dd_detail::exp_flush), _CMP_GE_OQ);
  return {v.hi, _mm256_and_pd(v.lo, keep)};
}
}  // namespace
#endif

void exp_batch(const double* z_hi, const double* z_lo, std::size_t n, double* w_hi, double* w_lo, double* bound) {
  std::size_t i = 0;
#ifdef ATTNCERT_VECTOR_EXP
  if (dd_detail::environment_ok()) {
    using namespace dd_detail;
    alignas(32) double ohi[4], olo[4], rhi[4], plo[4], zl[4], xh[4];
    for (; i + 4 <= n; i += 4) {
      const v4 xh0 = _mm256_loadu_pd(z_hi + i), xl0 = _mm256_loadu_pd(z_lo + i);
      const vdd x = v_two_sum(xh0, xl0);  // exact normalization
      const v4 kd = _mm256_round_pd(_mm256_mul_pd(x.hi, vset(inv_ln2)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      // reduction (as exp_with_bound, whose k == 0 branch keeps r = x: selected below)
      const vdd a = v_two_sum(x.hi, _mm256_xor_pd(_mm256_mul_pd(kd, vset(ln2_1)), vset(-0.0)));
      const vdd b = v_add(a, x.lo);
      const vdd c = v_two_prod(kd, vset(ln2_2));
      const vdd d = v_add(b, v_neg(c));
      const v4 w = _mm256_mul_pd(kd, vset(ln2_3));
      const vdd rr = v_add(d, _mm256_xor_pd(w, vset(-0.0)));
      const v4 kz = _mm256_cmp_pd(kd, _mm256_setzero_pd(), _CMP_EQ_OQ);
      vdd r{_mm256_blendv_pd(rr.hi, x.hi, kz), _mm256_blendv_pd(rr.lo, x.lo, kz)};
      r.lo = _mm256_and_pd(r.lo, _mm256_cmp_pd(v_abs(r.lo), vset(0x1p-392), _CMP_GE_OQ));
      // main path
      const v4 scale = vset(1.0 / (1 << exp_halvings));
      const vdd sv{_mm256_mul_pd(r.hi, scale), _mm256_mul_pd(r.lo, scale)};
      vdd q{vset(inv_factorial[exp_taylor_degree].hi), vset(inv_factorial[exp_taylor_degree].lo)};
      for (int j = exp_taylor_degree - 1; j >= 3; --j)
        q = v_flush(v_add(vdd{vset(inv_factorial[j].hi), vset(inv_factorial[j].lo)}, v_mul(sv, q)));
      q = v_flush(v_add(v_mul(sv, q), vset(0.5)));
      q = v_flush(v_add(v_mul(sv, q), vset(1.0)));
      vdd e = v_flush(v_mul(sv, q));
      for (int h = 0; h < exp_halvings; ++h) {
        const vdd t = v_flush(v_add(e, vset(2.0)));
        e = v_flush(v_mul(e, t));
      }
      const vdd p = v_add(e, vset(1.0));
      // scaling by 2^k: exponent bits (k + 1023) << 52, k in [-1021, 1023] on the domain
      const __m128i k32 = _mm256_cvtpd_epi32(kd);
      const __m256i k64 = _mm256_cvtepi32_epi64(k32);
      const v4 two_k = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(k64, _mm256_set1_epi64x(1023)), 52));
      const v4 zh = _mm256_mul_pd(p.hi, two_k);
      const v4 zlo = _mm256_mul_pd(p.lo, two_k);
      const vdd z = v_fast_two_sum(zh, zlo);
      _mm256_store_pd(ohi, z.hi);
      _mm256_store_pd(olo, z.lo);
      _mm256_store_pd(rhi, r.hi);
      _mm256_store_pd(plo, p.lo);
      _mm256_store_pd(zl, zlo);
      _mm256_store_pd(xh, x.hi);
      for (int l = 0; l < 4; ++l) {
        const bool common = std::isfinite(z_hi[i + l]) && std::isfinite(z_lo[i + l]) && xh[l] >= -708.0 &&
                            xh[l] <= 709.0 && std::fabs(rhi[l]) > 0x1p-54 && !(plo[l] != 0.0 && std::fabs(zl[l]) < 0x1p-1022);
        if (common) {
          w_hi[i + l] = ohi[l];
          w_lo[i + l] = olo[l];
          bound[i + l] = dd_exp_bound;
        } else {
          const dd_with_error s = exp_with_bound(dd{z_hi[i + l], z_lo[i + l]});
          w_hi[i + l] = s.value.hi;
          w_lo[i + l] = s.value.lo;
          bound[i + l] = s.rel_error_bound;
        }
      }
    }
  }
#endif
  for (; i < n; ++i) {
    const dd_with_error s = exp_with_bound(dd{z_hi[i], z_lo[i]});
    w_hi[i] = s.value.hi;
    w_lo[i] = s.value.lo;
    bound[i] = s.rel_error_bound;
  }
}

}  // namespace attncert
