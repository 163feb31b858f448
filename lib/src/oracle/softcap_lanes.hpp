// lib/src/oracle/softcap_lanes.hpp — the softcap's vector passes (P14) on a register's lanes,
// internal.
//
// One template for the four-lane (AVX2, fast_kernel.cpp) and the eight-lane (AVX-512,
// fast_sums_avx512.cpp) kernels.  Every lane performs exactly the IEEE operations of the scalar
// functions of fast_kernel.cpp it names (softcap_quotient, the argument setup of
// softcap_exponentials, finish_softcap; their branches as selects, their conditions as masks), so
// a lane's results are bit for bit the scalar ones and the scalar bounds apply.  A lane that is
// allowed but fails one of the scalar function's conditions is not written: its key goes to
// `redo`, and the caller runs the scalar function on it.  Internal linkage, and no call to an
// inline function of another header (see attncert/number/vector_dd.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "attncert/number/vector_dd.hpp"
#include "fast_common.hpp"

#ifdef ATTNCERT_VECTOR_DD
namespace attncert::oracle::detail {
namespace {

/// Pass 1 and the exponentials' arguments for the keys [jb, end), end = jb + a multiple of the
/// lane count <= je; returns end.  Per key j: y_j = x_j m (Algorithm 12, m = 1/C as
/// div_with_bound computes it), y_b[j] = dd_div_bound, and z_j = -2|y_j| when j is allowed and
/// 2|y_j.hi| <= 708, else 0.  Allowed keys whose operands fail div_with_bound's conditions are
/// appended to redo (their y and z are the caller's to recompute).
template <class T>
std::size_t softcap_quotient_lanes(const softcap_view& sv, double m_hi, double m_lo, std::size_t jb, std::size_t je,
                                   std::size_t* redo, std::size_t& nredo) {
  using namespace vector_dd;
  using V = vdd_t<T>;
  constexpr std::size_t L = sizeof(T) / sizeof(double);
  const T zero = splat<T>(0.0);
  const V vm{splat<T>(m_hi), splat<T>(m_lo)};
  std::size_t j = jb;
  for (; j + L <= je; j += L) {
    const V x{loadu(sv.s_hi + j, zero), loadu(sv.s_lo + j, zero)};
    const V y = v_mul(x, vm);
    const auto ok = mask_and(v_operand_ok(x), v_mul_ok(x, vm));
    const auto allowed = allowed_mask(sv.allowed + j, zero);
    storeu(sv.y_hi + j, y.hi);
    storeu(sv.y_lo + j, y.lo);
    storeu(sv.y_b + j, splat<T>(dd_div_bound));
    // softcap_exponentials: a = neg(y) when y.hi < 0; z = -2 a where taken, else 0
    const auto negative = cmp_lt(y.hi, zero);
    const T ah = blend(negative, vneg(y.hi), y.hi), al = blend(negative, vneg(y.lo), y.lo);
    const auto take = mask_and(allowed, cmp_le(vmul(splat<T>(2.0), ah), splat<T>(708.0)));
    storeu(sv.z_hi + j, zero_unless(take, vmul(splat<T>(-2.0), ah)));
    storeu(sv.z_lo + j, zero_unless(take, vmul(splat<T>(-2.0), al)));
    for (unsigned bad = mask_bits(mask_andnot(ok, allowed)); bad != 0; bad &= bad - 1)
      redo[nredo++] = j + static_cast<std::size_t>(__builtin_ctz(bad));
  }
  return j;
}

/// Pass 3 for the keys [jb, end) (end as above; returns it): finish_softcap with C, given y (pass
/// 1) and e = e^{-2|y|} with its bound (pass 2).  Writes x (s_hi, s_lo), its radius s_rad and
/// tanh (th_hi, th_lo, th_rad) for the allowed keys whose conditions all hold; the other allowed
/// keys are appended to redo, their entries left as they were.
template <class T>
std::size_t softcap_finish_lanes(const softcap_view& sv, double C, std::size_t jb, std::size_t je, std::size_t* redo,
                                 std::size_t& nredo) {
  using namespace vector_dd;
  using V = vdd_t<T>;
  constexpr std::size_t L = sizeof(T) / sizeof(double);
  const T one = splat<T>(1.0), zero = splat<T>(0.0), vC = splat<T>(C);
  const double k0 = (dd_add_bound + dd_add_bound + dd_div_bound) * (1.0 + 0x1p-50);
  std::size_t j = jb;
  for (; j + L <= je; j += L) {
    const V y{loadu(sv.y_hi + j, zero), loadu(sv.y_lo + j, zero)};
    const V e{loadu(sv.f_hi + j, zero), loadu(sv.f_lo + j, zero)};
    const T Be = loadu(sv.f_b + j, zero), By = loadu(sv.y_b + j, zero);
    const V x{loadu(sv.s_hi + j, zero), loadu(sv.s_lo + j, zero)};
    const T rx = loadu(sv.s_rad + j, zero);
    const auto negative = cmp_lt(y.hi, zero);
    const V ny = v_neg(y);
    const V a{blend(negative, ny.hi, y.hi), blend(negative, ny.lo, y.lo)};
    const auto eligible = cmp_le(vmul(splat<T>(2.0), a.hi), splat<T>(708.0));
    // num = 1 - e, den = e + 1 (Algorithm 6); q = num / den (Algorithm 18)
    const V num = v_add(V{one, zero}, v_neg(e));
    const V den = v_add(e, V{one, zero});
    const auto num_zero = cmp_eq(num.hi, zero);
    const T rt = vdiv(one, den.hi);
    const T rh = vfma(vneg(den.hi), rt, one);
    const T rl = vmul(vneg(den.lo), rt);
    const V re = v_fast_two_sum(rh, rl);
    const V rm = v_add(v_mul(re, rt), rt);
    const V q = v_mul(num, rm);
    const T aden = vabs(den.hi);
    const auto div_ok =
        mask_and(mask_and(mask_and(cmp_ge(aden, splat<T>(0x1p-1020)), cmp_le(aden, splat<T>(0x1p1020))),
                          mask_and(v_product_ok(den.hi, rt), v_product_ok(den.lo, rt))),
                 mask_and(mask_and(v_mul_fp_ok(re, rt), mask_and(v_finite(rm.hi), v_finite(rm.lo))), v_mul_ok(num, rm)));
    const auto e_ok = mask_and(cmp_le(Be, splat<T>(0x1p-40)), v_operand_ok(e));
    const auto eval_ok = mask_and(e_ok, mask_or(num_zero, div_ok));
    const T twoBe = vmul(splat<T>(2.0), Be);
    const T terr_div = vmul(vadd(splat<T>(k0), twoBe), splat<T>(round_up_factor));
    const T terr_zero = vadd(vmul(a.hi, splat<T>(1.0 + 0x1p-50)), twoBe);
    V th{zero_unless(mask_not(num_zero), q.hi), zero_unless(mask_not(num_zero), q.lo)};
    th = {blend(eligible, th.hi, one), zero_unless(eligible, th.lo)};
    const T terr = blend(eligible, blend(num_zero, terr_zero, terr_div), splat<T>(0x1p-1020));
    const V nth = v_neg(th);
    th = {blend(negative, nth.hi, th.hi), blend(negative, nth.lo, th.lo)};
    const T th_rad =
        vmul(vadd(vadd(terr, vmul(vmul(By, vabs(y.hi)), splat<T>(1.0 + 0x1p-50))), vdiv(rx, vC)),
             splat<T>(round_up_factor));
    const auto th_nonzero = cmp_ne(th.hi, zero);
    const V zc = v_mul(th, vC);
    const auto mul_ok = mask_and(v_operand_ok(th), v_mul_fp_ok(th, vC));
    const V z{zero_unless(th_nonzero, zc.hi), zero_unless(th_nonzero, zc.lo)};
    const T Bm = zero_unless(th_nonzero, splat<T>(dd_mul_fp_bound));
    const T scale = splat<T>(1.0 + 0x1p-50);
    T r = vadd(rx, vmul(vmul(By, vabs(x.hi)), scale));
    r = vadd(r, vmul(splat<T>(C < 0 ? -C : C), terr));
    r = vadd(r, vmul(vmul(Bm, vabs(z.hi)), scale));
    r = vmul(vadd(r, splat<T>(subnormal_allowance)), splat<T>(round_up_factor));
    const auto ok = mask_and(mask_and(mask_or(mask_not(eligible), eval_ok), mask_or(mask_not(th_nonzero), mul_ok)),
                             mask_and(v_finite(r), v_operand_ok(z)));
    const auto allowed = allowed_mask(sv.allowed + j, zero);
    const auto write = mask_and(allowed, ok);
    store_masked(sv.s_hi + j, write, z.hi);
    store_masked(sv.s_lo + j, write, z.lo);
    store_masked(sv.s_rad + j, write, r);
    store_masked(sv.th_hi + j, write, th.hi);
    store_masked(sv.th_lo + j, write, th.lo);
    store_masked(sv.th_rad + j, write, th_rad);
    for (unsigned bad = mask_bits(mask_andnot(ok, allowed)); bad != 0; bad &= bad - 1)
      redo[nredo++] = j + static_cast<std::size_t>(__builtin_ctz(bad));
  }
  return j;
}

}  // namespace
}  // namespace attncert::oracle::detail
#endif
