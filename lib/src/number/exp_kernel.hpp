// lib/src/number/exp_kernel.hpp — exp_with_bound on a vector register's lanes, internal.
//
// One template for the four-lane (AVX2, exp_batch.cpp) and the eight-lane (AVX-512,
// exp_batch_avx512.cpp) kernels of exp_batch.  Every lane performs exactly the IEEE operations
// of the scalar exp_with_bound on the main path of its domain (number/double_double.hpp), so a
// lane's value is bit for bit the scalar function's, and its bound is dd_exp_bound.  A lane
// outside that path (non-finite input, |x| outside [-708, 709], the tiny reduced arguments and
// the subnormal results the scalar function treats apart) gets bound = -1: the caller evaluates
// it with the scalar function.  Internal linkage, and no call to an inline function of another
// header (see attncert/number/vector_dd.hpp).
#pragma once

#include <cstddef>

#include "attncert/number/vector_dd.hpp"

#ifdef ATTNCERT_VECTOR_DD
namespace attncert::vector_dd {
namespace {

template <class T>
inline vdd_t<T> v_flush(vdd_t<T> v) {  // lo := 0 where |lo| < 2^-400
  return {v.hi, zero_unless(cmp_ge(vabs(v.lo), splat<T>(dd_detail::exp_flush)), v.lo)};
}

/// Full groups of lanes from the start of [0, n); returns how many entries it wrote.
template <class T>
std::size_t exp_lanes(const double* z_hi, const double* z_lo, std::size_t n, double* w_hi, double* w_lo,
                      double* bound) {
  using namespace dd_detail;
  using V = vdd_t<T>;
  constexpr std::size_t lanes = sizeof(T) / sizeof(double);
  const T zero = splat<T>(0.0);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const T xh0 = loadu(z_hi + i, zero), xl0 = loadu(z_lo + i, zero);
    const V x = v_two_sum(xh0, xl0);  // exact normalization
    const T nd = vround(vmul(x.hi, splat<T>(inv_ln2)));
    // reduction (as exp_with_bound, whose n == 0 branch keeps r = x: selected below)
    const V a = v_two_sum(x.hi, vneg(vmul(nd, splat<T>(ln2_1))));
    const V b = v_add(a, x.lo);
    const V c = v_two_prod(nd, splat<T>(ln2_2));
    const V d = v_add(b, v_neg(c));
    const T w = vmul(nd, splat<T>(ln2_3));
    const V rr = v_add(d, vneg(w));
    const auto nz = cmp_eq(nd, zero);
    V r{blend(nz, x.hi, rr.hi), blend(nz, x.lo, rr.lo)};
    r.lo = zero_unless(cmp_ge(vabs(r.lo), splat<T>(0x1p-392)), r.lo);
    const T kd = vfloor(vmul(nd, splat<T>(1.0 / exp_table_size)));
    const T jd = vsub(nd, vmul(kd, splat<T>(exp_table_size)));
    // the table index, 0 in a lane off the domain (NaN or out of range): gathers stay inside
    const T jsafe = zero_unless(mask_and(cmp_ge(jd, zero), cmp_lt(jd, splat<T>(exp_table_size))), jd);
    // main path: Taylor polynomial of e^s - 1, s = r
    const V sv = r;
    V q{splat<T>(inv_factorial[exp_taylor_degree].hi), splat<T>(inv_factorial[exp_taylor_degree].lo)};
    for (int j = exp_taylor_degree - 1; j >= 3; --j)
      q = v_flush(v_add(V{splat<T>(inv_factorial[j].hi), splat<T>(inv_factorial[j].lo)}, v_mul(sv, q)));
    q = v_flush(v_add(v_mul(sv, q), splat<T>(0.5)));
    q = v_flush(v_add(v_mul(sv, q), splat<T>(1.0)));
    const V e = v_flush(v_mul(sv, q));
    const V p1 = v_flush(v_add(e, splat<T>(1.0)));
    const V p = v_mul(V{gather(exp2_hi, jsafe), gather(exp2_lo, jsafe)}, p1);
    // scaling by 2^k: k in [-1022, 1022] on the domain
    const T two_k = pow2(kd);
    const T zh = vmul(p.hi, two_k);
    const T zlo = vmul(p.lo, two_k);
    const V z = v_fast_two_sum(zh, zlo);
    // the scalar function's main path: finite input, x.hi in [-708, 709], |r| > 2^-54, and no
    // subnormal low word from a nonzero p.lo
    const T inf_v = splat<T>(inf);
    const auto finite_in = mask_and(cmp_lt(vabs(xh0), inf_v), cmp_lt(vabs(xl0), inf_v));
    const auto in_range = mask_and(cmp_ge(x.hi, splat<T>(-708.0)), cmp_le(x.hi, splat<T>(709.0)));
    const auto not_tiny = cmp_gt(vabs(r.hi), splat<T>(0x1p-54));
    const auto subnormal_lo = mask_and(cmp_ne(p.lo, zero), cmp_lt(vabs(zlo), splat<T>(0x1p-1022)));
    const auto common = mask_andnot(subnormal_lo, mask_and(mask_and(finite_in, in_range), not_tiny));
    storeu(w_hi + i, zero_unless(common, z.hi));
    storeu(w_lo + i, zero_unless(common, z.lo));
    storeu(bound + i, blend(common, splat<T>(dd_exp_bound), splat<T>(-1.0)));
  }
  return i;
}

}  // namespace
}  // namespace attncert::vector_dd
#endif
