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

/// One group of U vectors of lanes at z_hi + i ...: the kernel's IEEE operations per lane, the U
/// vectors interleaved step by step.  A lane's operations, and so its bits, do not depend on U:
/// interleaving only lets the processor overlap the Horner steps' latency chains of independent
/// vectors (one vector's chain leaves most execution units idle).
template <class T, int U>
inline void exp_group(const double* z_hi, const double* z_lo, std::size_t i, double* w_hi, double* w_lo,
                      double* bound) {
  using namespace dd_detail;
  using V = vdd_t<T>;
  constexpr std::size_t lanes = sizeof(T) / sizeof(double);
  const T zero = splat<T>(0.0);
  T xh0[U], xl0[U], nd[U], kd[U], jsafe[U];
  V x[U], r[U], q[U];
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) {
    xh0[u] = loadu(z_hi + i + u * lanes, zero);
    xl0[u] = loadu(z_lo + i + u * lanes, zero);
    x[u] = v_two_sum(xh0[u], xl0[u]);  // exact normalization
    nd[u] = vround(vmul(x[u].hi, splat<T>(inv_ln2)));
    // reduction (as exp_with_bound, whose n == 0 branch keeps r = x: selected below)
    const V a = v_two_sum(x[u].hi, vneg(vmul(nd[u], splat<T>(ln2_1))));
    const V b = v_add(a, x[u].lo);
    const V c = v_two_prod(nd[u], splat<T>(ln2_2));
    const V d = v_add(b, v_neg(c));
    const T w = vmul(nd[u], splat<T>(ln2_3));
    const V rr = v_add(d, vneg(w));
    const auto nz = cmp_eq(nd[u], zero);
    r[u] = V{blend(nz, x[u].hi, rr.hi), blend(nz, x[u].lo, rr.lo)};
    r[u].lo = zero_unless(cmp_ge(vabs(r[u].lo), splat<T>(0x1p-392)), r[u].lo);
    kd[u] = vfloor(vmul(nd[u], splat<T>(1.0 / exp_table_size)));
    const T jd = vsub(nd[u], vmul(kd[u], splat<T>(exp_table_size)));
    // the table index, 0 in a lane off the domain (NaN or out of range): gathers stay inside
    jsafe[u] = zero_unless(mask_and(cmp_ge(jd, zero), cmp_lt(jd, splat<T>(exp_table_size))), jd);
    // main path: Taylor polynomial of e^s - 1, s = r
    q[u] = V{splat<T>(inv_factorial[exp_taylor_degree].hi), splat<T>(inv_factorial[exp_taylor_degree].lo)};
  }
  for (int j = exp_taylor_degree - 1; j >= 3; --j) {
    const V cj{splat<T>(inv_factorial[j].hi), splat<T>(inv_factorial[j].lo)};
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) q[u] = v_flush(v_add(cj, v_mul(r[u], q[u])));
  }
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) {
    q[u] = v_flush(v_add(v_mul(r[u], q[u]), splat<T>(0.5)));
    q[u] = v_flush(v_add(v_mul(r[u], q[u]), splat<T>(1.0)));
  }
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) {
    const V e = v_flush(v_mul(r[u], q[u]));
    const V p1 = v_flush(v_add(e, splat<T>(1.0)));
    const V p = v_mul(V{gather(exp2_hi, jsafe[u]), gather(exp2_lo, jsafe[u])}, p1);
    // scaling by 2^k: k in [-1022, 1022] on the domain
    const T two_k = pow2(kd[u]);
    const T zh = vmul(p.hi, two_k);
    const T zlo = vmul(p.lo, two_k);
    const V z = v_fast_two_sum(zh, zlo);
    // the scalar function's main path: finite input, x.hi in [-708, 709], |r| > 2^-54, and no
    // subnormal low word from a nonzero p.lo
    const T inf_v = splat<T>(inf);
    const auto finite_in = mask_and(cmp_lt(vabs(xh0[u]), inf_v), cmp_lt(vabs(xl0[u]), inf_v));
    const auto in_range = mask_and(cmp_ge(x[u].hi, splat<T>(-708.0)), cmp_le(x[u].hi, splat<T>(709.0)));
    const auto not_tiny = cmp_gt(vabs(r[u].hi), splat<T>(0x1p-54));
    const auto subnormal_lo = mask_and(cmp_ne(p.lo, zero), cmp_lt(vabs(zlo), splat<T>(0x1p-1022)));
    const auto common = mask_andnot(subnormal_lo, mask_and(mask_and(finite_in, in_range), not_tiny));
    const std::size_t o = i + u * lanes;
    storeu(w_hi + o, zero_unless(common, z.hi));
    storeu(w_lo + o, zero_unless(common, z.lo));
    storeu(bound + o, blend(common, splat<T>(dd_exp_bound), splat<T>(-1.0)));
  }
}

/// Full groups of lanes from the start of [0, n); returns how many entries it wrote.  Four
/// vectors at a time while they fill, then one at a time (the same operations per lane).  On this
/// project's test machine (Zen 5) four vectors took 7.2 ns per exponential at eight lanes and
/// 13.8 ns at four, against 17.9 and 32.3 ns one vector at a time; six and eight were slower
/// than four (presumably register spills; not examined).
template <class T>
std::size_t exp_lanes(const double* z_hi, const double* z_lo, std::size_t n, double* w_hi, double* w_lo,
                      double* bound) {
  constexpr std::size_t lanes = sizeof(T) / sizeof(double);
  constexpr int U = 4;
  std::size_t i = 0;
  for (; i + U * lanes <= n; i += U * lanes) exp_group<T, U>(z_hi, z_lo, i, w_hi, w_lo, bound);
  for (; i + lanes <= n; i += lanes) exp_group<T, 1>(z_hi, z_lo, i, w_hi, w_lo, bound);
  return i;
}

}  // namespace
}  // namespace attncert::vector_dd
#endif
