// lib/src/oracle/fast_kernel.cpp — the oracle's fast path: one attention row in double-double with
// a rigorous error radius per output element.  The error analysis, step by step, is in
// proofs/P11-oracle.md; the step numbers below refer to it.
//
// This file is compiled with -mavx2 -mfma -ffp-contract=off when the build machine supports
// them (CMake option ATTNCERT_FAST_KERNEL): the loops over keys and over value columns are
// written so that GCC vectorizes them.  -ffp-contract=off keeps every product that feeds an
// addition rounded on its own, as the error-free transformations require; explicit std::fma
// calls are the only fused operations.
#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>

#include "attncert/oracle/fast_row.hpp"
#include "attncert/number/double_double.hpp"
#include "attncert/number/exp_batch.hpp"
#include "fast_common.hpp"
#include "attncert/number/vector_dd.hpp"
#include "softcap_lanes.hpp"

namespace attncert::oracle::detail {

namespace {

constexpr double u = 0x1p-53;
constexpr double inf = std::numeric_limits<double>::infinity();

inline bool is_pow2(double x) {
  if (!(std::isfinite(x)) || x == 0) return false;
  int e = 0;
  return std::frexp(std::fabs(x), &e) == 0.5 && std::fabs(x) >= 0x1p-1000 && std::fabs(x) <= 0x1p1000;
}

}  // namespace

bool sums_use_avx512() {
  static const bool compiled = sums_avx512_compiled();
  return compiled && std::strcmp(exp_batch_isa(), "avx512") == 0;
}

void dot2_columns(const double* x, const double* MT, std::size_t n, std::size_t d, std::size_t jbegin,
                  std::size_t jend, double* s, double* c, double* P) {
  if (sums_use_avx512())
    dot2_columns_avx512(x, MT, n, d, jbegin, jend, s, c, P);
  else
    dot2_columns_loop(x, MT, n, d, jbegin, jend, s, c, P);
}

void dot2_weighted_rows(const std::size_t* keys, std::size_t count, const double* w_hi, const double* w_lo,
                        const double* V, std::size_t dv, double* as, double* ac, double* ap) {
  if (sums_use_avx512())
    dot2_weighted_rows_avx512(keys, count, w_hi, w_lo, V, dv, as, ac, ap);
  else
    dot2_weighted_rows_loop(keys, count, w_hi, w_lo, V, dv, as, ac, ap);
}

bool kernel_vectorized() {
#if defined(__AVX2__) && defined(__FMA__)
  return true;
#else
  return false;
#endif
}

namespace {

// What the steps of fast_row pass on (proofs/P11-oracle.md, steps 1-5).
struct fast_row_state {
  std::size_t jbegin = 0, jend = 0;  // keys actually used: [jbegin, jend), the first and 1 + the last allowed key
  double dot_factor = 0, dot_abs = 0;  // step 1's error bound
  double m = -inf;             // step 2: the largest score
  std::size_t under = 0;       // step 3: weights below e^-707 set to 0 (true value in [0, 2^-1019])
  double rho = 0;              // step 3: max relative radius of the weights not below 2^-900
  double rho_all = 0;          // step 3: max relative radius of all weights (ws.rho)
  std::size_t tiny = 0;        // step 3: weights below 2^-900, each with absolute error < 2^-928
  dd W{0, 0};                  // step 4: sum of the weights, with bound eW
  double eW = 0, Wlow = 0, vmax = 0, sum_factor = 0, under_w = 0, abs_allow = 0;
};

// ---- step 1: t_j = q·k_j by Dot2 (TwoProd + TwoSum, errors summed in c) -------------------
// s_hi = s, s_lo = c, s_rad = P = sum |p| per key.
void dot_products(const row_inputs& in, row_workspace& ws, fast_row_state& st) {
  const std::size_t n = in.nk, d = in.d, jbegin = st.jbegin, jend = st.jend;
  ws.s_hi.assign(jend, 0.0);
  ws.s_lo.assign(jend, 0.0);
  ws.s_rad.assign(jend, 0.0);
  dot2_columns(in.q, in.KT, n, d, jbegin, jend, ws.s_hi.data(), ws.s_lo.data(), ws.s_rad.data());
  // Error of Dot2 before the final addition: <= d(d+1)u^2 * sum|q_l k_l| (1 + 2^-27)
  // (P11 step 1), and sum|q_l k_l| <= P (1 + 2^-30) for d <= 2^20.
  st.dot_factor = static_cast<double>(d) * static_cast<double>(d + 1) * u * u * (1.0 + 0x1p-26);
  st.dot_abs = static_cast<double>(d) * subnormal_allowance;
}

// ---- P14: softcap x <- C tanh(x / C), with radius rx updated in place --------------------
// y = x / C (relative bound Bd); tanh|y| = (1 - e)/(1 + e), e = e^{-2|y|} (relative bound Be).
// |d/dx C tanh(x/C)| <= 1 passes rx through; y's error adds Bd |x|; e's error adds 2 Be C (the
// quotient's derivative in e is at most 2 and e <= 1); the two sums and the quotient add at
// most (Ba + Ba + Bq)(1 + 2^-50) relative to a quotient <= 1, i.e. that much times C; the final
// product by C adds Bm |x_new|.  For 2|y| > 708: tanh|y| = 1 - t with 0 < t < 2e^{-708} < 2^-1020.
// The exponentials e = e^{-2|y|} of a row are evaluated in one exp_batch (bit for bit the same
// as exp_with_bound, vectorized): softcap_scores below; finish_softcap does the rest for one key.
struct softcap_y {
  dd y;          // x / C
  double By;     // its relative bound
};

bool softcap_quotient(double C, const dd& x, softcap_y& q) {
  const dd_with_error y = div_with_bound(x, dd{C, 0.0});
  q.y = y.value;
  q.By = y.rel_error_bound;
  return std::isfinite(q.By);
}

// x <- C tanh(y) given y = x / C and, when 2|y| <= 708, e = e^{-2|y|} with relative bound Be.
bool finish_softcap(double C, const softcap_y& q, dd e_value, double Be, dd& x, double& rx, dd& th_out,
                    double& th_rad) {
  const bool negative = q.y.hi < 0;
  const dd a = negative ? neg(q.y) : q.y;
  dd th{1.0, 0.0};
  double terr = 0x1p-1020;
  if (2 * a.hi <= 708.0) {
    if (!(Be <= 0x1p-40)) return false;
    const dd_with_error num = add_with_bound(dd{1.0, 0.0}, neg(e_value));
    const dd_with_error den = add_with_bound(e_value, dd{1.0, 0.0});
    if (!std::isfinite(num.rel_error_bound) || !std::isfinite(den.rel_error_bound)) return false;
    if (num.value.hi == 0.0) {
      th = {0.0, 0.0};  // e rounded to 1: |y| tiny; tanh|y| <= |y| covered below
      terr = a.hi * (1.0 + 0x1p-50) + 2 * Be;
    } else {
      const dd_with_error qq = div_with_bound(num.value, den.value);
      if (!std::isfinite(qq.rel_error_bound)) return false;
      th = qq.value;
      terr = ((num.rel_error_bound + den.rel_error_bound + qq.rel_error_bound) * (1.0 + 0x1p-50) + 2 * Be) *
             round_up_factor;
    }
  }
  if (negative) th = neg(th);
  th_out = th;  // |tanh(y_true) - th| <= terr + By |y| (the backward's softcap derivative, P15)
  th_rad = (terr + q.By * std::fabs(q.y.hi) * (1.0 + 0x1p-50) + rx / C) * round_up_factor;
  dd z{0.0, 0.0};
  double Bm = 0;
  if (th.hi != 0.0) {
    const dd_with_error p = mul_with_bound(th, C);
    if (!std::isfinite(p.rel_error_bound)) return false;
    z = p.value;
    Bm = p.rel_error_bound;
  }
  const double aC = std::fabs(C);
  rx = (rx + q.By * std::fabs(x.hi) * (1.0 + 0x1p-50) + aC * terr + Bm * std::fabs(z.hi) * (1.0 + 0x1p-50) +
        subnormal_allowance) *
       round_up_factor;
  x = z;
  return std::isfinite(rx) && dd_detail::operand_ok(x);
}

// Softcap, pass 1, one key: y_j = x_j / C by softcap_quotient (div_with_bound(x_j, C)).
bool softcap_key_quotient(double C, row_workspace& ws, std::size_t j) {
  softcap_y q;
  if (!softcap_quotient(C, dd{ws.s_hi[j], ws.s_lo[j]}, q)) return false;
  ws.y_hi[j] = q.y.hi;
  ws.y_lo[j] = q.y.lo;
  ws.y_b[j] = q.By;
  return true;
}

// Softcap, pass 2's argument for one key: z_j = -2|y_j| (exact) for an allowed key with
// 2|y_j| <= 708, else 0.  finish_softcap tests the same condition and does not read e where it
// fails, so e's value there (e^0, or e^z of a stale y for a key that is not allowed) is never used.
void softcap_key_argument(const row_inputs& in, row_workspace& ws, std::size_t j) {
  const double yh = ws.y_hi[j], yl = ws.y_lo[j];
  const bool negative = yh < 0;
  const double ah = negative ? -yh : yh, al = negative ? -yl : yl;  // neg(y) when y.hi < 0
  const bool take = in.allowed[j] && 2 * ah <= 708.0;
  ws.z_hi[j] = take ? -2 * ah : 0.0;
  ws.z_lo[j] = take ? -2 * al : 0.0;
}

// Softcap, pass 3, one key: finish_softcap, writing x, its radius and tanh back.
bool softcap_key_finish(double C, row_workspace& ws, std::size_t j) {
  dd x{ws.s_hi[j], ws.s_lo[j]};
  double rx = ws.s_rad[j];
  dd th;
  double th_rad = 0;
  if (!finish_softcap(C, softcap_y{dd{ws.y_hi[j], ws.y_lo[j]}, ws.y_b[j]}, dd{ws.f_hi[j], ws.f_lo[j]}, ws.f_b[j], x,
                      rx, th, th_rad))
    return false;
  ws.th_hi[j] = th.hi;
  ws.th_lo[j] = th.lo;
  ws.th_rad[j] = th_rad;
  ws.s_hi[j] = x.hi;
  ws.s_lo[j] = x.lo;
  ws.s_rad[j] = rx;
  return true;
}

// Softcap over the allowed keys [jbegin, jend) of s_hi + s_lo ± s_rad, in place, in three passes:
// (1) y_j = x_j / C and pass 2's arguments, (2) e_j = e^{-2|y_j|} in one exp_batch over the
// row (bit for bit exp_with_bound, vectorized), (3) finish_softcap.  Passes 1 and 3 run on
// vector lanes (softcap_lanes.hpp: eight with AVX-512F when exp_batch runs its eight-lane kernel,
// else four), bit for bit the one-key functions above, which take the keys the lanes leave (the
// row's tail, and the allowed lanes whose operand conditions fail).  In pass 1 the lanes compute
// mul(x_j, m) with Algorithm 18's reciprocal m of C, as div_with_bound does; m, the checks that
// depend on C alone and the environment's are computed once here.  When those fail, every key
// goes through the one-key functions (whose checks then fail as before).
bool softcap_scores(const row_inputs& in, row_workspace& ws, const fast_row_state& st) {
  const double C = in.softcap;
  const std::size_t jb = st.jbegin, je = st.jend;
  for (std::vector<double>* v : {&ws.y_hi, &ws.y_lo, &ws.y_b, &ws.z_hi, &ws.z_lo, &ws.f_hi, &ws.f_lo, &ws.f_b,
                                 &ws.th_hi, &ws.th_lo, &ws.th_rad})
    v->resize(je);  // th_*: written for every allowed key below; only those are read (P15)
  ws.softcap_redo.resize(je);
  bool row_ok = dd_detail::environment_ok() && dd_detail::operand_ok(dd{C, 0.0});
  const dd m = dd_detail::reciprocal_impl<true>(dd{C, 0.0}, row_ok);
  const softcap_view sv{ws.s_hi.data(), ws.s_lo.data(), ws.s_rad.data(), ws.y_hi.data(), ws.y_lo.data(),
                        ws.y_b.data(),  ws.z_hi.data(), ws.z_lo.data(),  ws.f_hi.data(), ws.f_lo.data(),
                        ws.f_b.data(),  ws.th_hi.data(), ws.th_lo.data(), ws.th_rad.data(), in.allowed};
  std::size_t* redo = ws.softcap_redo.data();
  const bool wide = sums_use_avx512();
  // pass 1
  std::size_t nredo = 0, j = jb;
#ifdef ATTNCERT_VECTOR_DD
  if (row_ok)
    j = wide ? softcap_quotients_avx512(sv, m.hi, m.lo, jb, je, redo, nredo)
             : softcap_quotient_lanes<__m256d>(sv, m.hi, m.lo, jb, je, redo, nredo);
#else
  (void)m, (void)wide, (void)sv;
#endif
  for (std::size_t t = 0; t < nredo; ++t) {
    if (!softcap_key_quotient(C, ws, redo[t])) return false;
    softcap_key_argument(in, ws, redo[t]);
  }
  for (; j < je; ++j) {
    if (in.allowed[j] && !softcap_key_quotient(C, ws, j)) return false;
    softcap_key_argument(in, ws, j);
  }
  // pass 2
  if (je > jb) exp_batch(ws.z_hi.data() + jb, ws.z_lo.data() + jb, je - jb, ws.f_hi.data() + jb, ws.f_lo.data() + jb,
                         ws.f_b.data() + jb);
  // pass 3
  nredo = 0;
  j = jb;
#ifdef ATTNCERT_VECTOR_DD
  if (row_ok)
    j = wide ? softcap_finish_avx512(sv, C, jb, je, redo, nredo) : softcap_finish_lanes<__m256d>(sv, C, jb, je, redo, nredo);
#endif
  for (std::size_t t = 0; t < nredo; ++t)
    if (!softcap_key_finish(C, ws, redo[t])) return false;
  for (; j < je; ++j)
    if (in.allowed[j] && !softcap_key_finish(C, ws, j)) return false;
  return true;
}

// ---- P14: the additive term (ALiBi + bias) a_j, given as hi + lo with a radius ------------
// add_with_bound(x, a) without its environment check, which the caller makes once per row.
bool apply_additive(const row_inputs& in, std::size_t j, dd& x, double& rx) {
  const dd a{in.add_hi[j], in.add_lo[j]};
  if (!std::isfinite(in.add_rad[j])) return false;
  if (!dd_detail::operand_ok(x) || !dd_detail::operand_ok(a)) return false;
  const dd z = add(x, a);
  rx = (rx + in.add_rad[j] + dd_add_bound * std::fabs(z.hi) * (1.0 + 0x1p-50)) * round_up_factor;
  x = z;
  return std::isfinite(rx);
}

// ---- step 2: scores x_j = s * t_j with radius r_j (in place: s_hi, s_lo, s_rad) -----------
bool scale_scores(const row_inputs& in, row_workspace& ws, fast_row_state& st) {
  double* __restrict s = ws.s_hi.data();
  double* __restrict c = ws.s_lo.data();
  double* __restrict P = ws.s_rad.data();
  const dd sc{in.scale_hi, in.scale_lo};
  const bool exact_scale = in.scale_lo == 0.0 && in.scale_rad == 0.0 && is_pow2(in.scale_hi);
  if (!dd_detail::operand_ok(sc) || !std::isfinite(in.scale_rad)) return false;
  const double asc = std::fabs(in.scale_hi) * (1.0 + 0x1p-52);
  for (std::size_t j = st.jbegin; j < st.jend; ++j) {
    if (!in.allowed[j]) continue;
    if (!std::isfinite(s[j]) || !std::isfinite(c[j]) || !(P[j] <= 0x1p1000)) return false;
    const dd t = two_sum(s[j], c[j]);
    const double rt = (st.dot_factor * P[j] + st.dot_abs) * round_up_factor;
    dd x;
    double rx;
    if (exact_scale) {
      x = {t.hi * in.scale_hi, t.lo * in.scale_hi};  // exact unless t.lo * s is subnormal
      rx = (asc * rt + subnormal_allowance) * round_up_factor;
    } else {
      if (!dd_detail::operand_ok(t) || !dd_detail::mul_ok(t, sc)) return false;
      x = mul(t, sc);
      const double at = std::fabs(t.hi) * (1.0 + 0x1p-52);
      rx = (dd_mul_bound * std::fabs(x.hi) * (1.0 + 0x1p-52) + asc * rt + at * in.scale_rad + rt * in.scale_rad) *
           round_up_factor;
    }
    if (!dd_detail::operand_ok(x) || !std::isfinite(rx)) return false;
    s[j] = x.hi;
    c[j] = x.lo;
    P[j] = rx;
  }
  if (in.softcap != 0 && !softcap_scores(in, ws, st)) return false;
  if (in.add_hi && !dd_detail::environment_ok()) return false;  // apply_additive's add_with_bound
  for (std::size_t j = st.jbegin; j < st.jend; ++j) {
    if (!in.allowed[j]) continue;
    if (in.add_hi) {
      dd x{s[j], c[j]};
      if (!apply_additive(in, j, x, P[j])) return false;
      s[j] = x.hi;
      c[j] = x.lo;
    }
    st.m = std::max(st.m, s[j]);
  }
  if (in.has_sink) {
    if (!std::isfinite(in.sink) || !(std::fabs(in.sink) <= 0x1p1000)) return false;
    st.m = std::max(st.m, in.sink);
  }
  return true;
}

// ---- step 3: weights w_j = exp(x_j - m), relative radius rho ----------------------------
// z_j = x_j - m (Algorithm 4) with radius rz_j; the exponentials are evaluated in a batch.
bool exponential_weights(const row_inputs& in, row_workspace& ws, fast_row_state& st) {
  const double* s = ws.s_hi.data();
  const double* c = ws.s_lo.data();
  const double* P = ws.s_rad.data();
  ws.w_hi.assign(st.jend, 0.0);
  ws.w_lo.assign(st.jend, 0.0);
  ws.z_hi.clear();
  ws.z_lo.clear();
  ws.z_rad.clear();
  ws.z_idx.clear();
  for (std::size_t j = st.jbegin; j < st.jend; ++j) {
    if (!in.allowed[j]) continue;
    const dd z = add(dd{s[j], c[j]}, -st.m);
    const double rz = (P[j] + dd_add_fp_bound * std::fabs(z.hi) * (1.0 + 0x1p-52)) * round_up_factor;
    if (!(rz <= 0x1p-30)) return false;
    if (z.hi < -708.0) {
      ++st.under;  // z_true <= z.hi + |z.lo| + rz < -707
      continue;
    }
    ws.z_hi.push_back(z.hi);
    ws.z_lo.push_back(z.lo);
    ws.z_rad.push_back(rz);
    ws.z_idx.push_back(j);
  }
  const std::size_t nkeys = ws.z_idx.size();
  ws.sink_hi = ws.sink_lo = 0;
  if (in.has_sink) {  // the sink as one more weight, index st.jend (P14)
    const dd z = two_sum(in.sink, -st.m);  // exact
    if (z.hi < -708.0) {
      ++st.under;
    } else {
      ws.z_hi.push_back(z.hi);
      ws.z_lo.push_back(z.lo);
      ws.z_rad.push_back(0.0);
      ws.z_idx.push_back(st.jend);
    }
  }
  const std::size_t ne = ws.z_idx.size();
  ws.e_hi.resize(ne);
  ws.e_lo.resize(ne);
  ws.e_b.resize(ne);
  exp_batch(ws.z_hi.data(), ws.z_lo.data(), ne, ws.e_hi.data(), ws.e_lo.data(), ws.e_b.data());
  for (std::size_t t = 0; t < ne; ++t) {
    const double B = ws.e_b[t], rz = ws.z_rad[t];
    if (!(B <= 0x1p-40)) return false;
    // e^{z_true} = e^z e^delta, |delta| <= rz:  |e^{z_true} - w| <= (B + (1 + B)(e^rz - 1)) |w|,
    // e^rz - 1 <= rz (1 + rz) for rz <= 1.
    const double rj = (B + (1.0 + B) * rz * (1.0 + rz)) * round_up_factor;
    st.rho_all = std::max(st.rho_all, rj);
    // A weight below 2^-900 (z < -623) has a low word near the subnormal range, so its relative
    // bound B can reach 2^-52 and would dominate rho for the whole row (peaked scores): such a
    // weight contributes an absolute error instead.  rj <= 2^-40 + 2^-30 (1 + 2^-40)(1 + 2^-30)
    // times round_up_factor < 2^-29 by the two tests above, and |w| <= |w_hi| (1 + 2^-50) <
    // 2^-900 (1 + 2^-50), so |e^{z_true} - w| < 2^-929 (1 + 2^-50) < 2^-928 per tiny weight.
    if (std::fabs(ws.e_hi[t]) < 0x1p-900) ++st.tiny;
    else st.rho = std::max(st.rho, rj);
    if (t >= nkeys) {
      ws.sink_hi = ws.e_hi[t];
      ws.sink_lo = ws.e_lo[t];
      continue;
    }
    ws.w_hi[ws.z_idx[t]] = ws.e_hi[t];
    ws.w_lo[ws.z_idx[t]] = ws.e_lo[t];
  }
  return true;
}

// ---- step 4: W = sum w_j and N_k = sum w_j v_jk by Dot2 ----------------------------------
bool weighted_sums(const row_inputs& in, row_workspace& ws, fast_row_state& st) {
  const std::size_t dv = in.dv;
  double sW = 0, cW = 0, PW = 0;
  ws.acc_s.assign(dv, 0.0);
  ws.acc_c.assign(dv, 0.0);
  ws.acc_p.assign(dv, 0.0);
  ws.v_idx.clear();
  std::size_t terms = 0;
  for (std::size_t j = st.jbegin; j < st.jend; ++j) {
    if (!in.allowed[j]) continue;
    ++terms;
    const double wh = ws.w_hi[j], wl = ws.w_lo[j];
    {
      const double sn = sW + wh;
      const double bb = sn - sW;
      const double sig = (sW - (sn - bb)) + (wh - bb);
      sW = sn;
      cW = cW + (sig + wl);
      PW = PW + wh;
    }
    if (wh == 0.0 || (in.keep && !in.keep[j]) || in.weights_only) continue;
    ws.v_idx.push_back(j);
  }
  // N_k: the same operations per component k, over the same keys in the same order, as when they
  // were interleaved with W's sum above (a separate pass vectorizes across k)
  dot2_weighted_rows(ws.v_idx.data(), ws.v_idx.size(), ws.w_hi.data(), ws.w_lo.data(), in.V, dv, ws.acc_s.data(),
                     ws.acc_c.data(), ws.acc_p.data());
  if (in.has_sink) {  // the sink adds to W only (P14)
    ++terms;
    const double wh = ws.sink_hi, wl = ws.sink_lo;
    const double sn = sW + wh;
    const double bb = sn - sW;
    const double sig = (sW - (sn - bb)) + (wh - bb);
    sW = sn;
    cW = cW + (sig + wl);
    PW = PW + wh;
  }
  if (st.under > 0 || st.tiny > 0)  // max |v_jk| over allowed j, for the underflowed and tiny weights
    for (std::size_t j = st.jbegin; j < st.jend; ++j)
      if (in.allowed[j])
        for (std::size_t k = 0; k < dv; ++k) st.vmax = std::max(st.vmax, std::fabs(in.V[j * dv + k]));
  const double nt = static_cast<double>(terms);
  st.sum_factor = (nt + 3) * (nt + 3) * u * u * (1.0 + 0x1p-26);
  // Underflowed weights: true value in [0, 2^-1019]; tiny weights: absolute error < 2^-928.
  st.under_w = static_cast<double>(st.under) * 0x1p-1019 + static_cast<double>(st.tiny) * 0x1p-928;
  st.abs_allow = (nt + 3) * 3 * subnormal_allowance;
  if (!std::isfinite(sW) || !std::isfinite(cW) || !(PW <= 0x1p1000)) return false;
  st.W = two_sum(sW, cW);
  st.eW = (st.sum_factor * PW + st.rho * PW * (1.0 + 0x1p-26) + st.under_w + st.abs_allow) * round_up_factor;
  st.Wlow = st.W.hi * (1.0 - 0x1p-50) - st.eW;
  if (!(st.Wlow > 0.0) || !dd_detail::operand_ok(st.W)) return false;
  ws.rho = st.rho_all;  // a relative radius valid for every weight (grade_attention uses it per weight)
  ws.rho_normal = st.rho;  // weights not below 2^-900; the others err by < 2^-928 absolutely
  ws.tiny = st.tiny;
  ws.under = st.under;
  ws.m = st.m;
  ws.W_hi = st.W.hi;
  ws.W_lo = st.W.lo;
  ws.W_err = st.eW;
  ws.W_lo_bound = st.Wlow;
  ws.W_hi_bound = (st.W.hi * (1.0 + 0x1p-50) + st.eW) * (1.0 + 0x1p-50);
  return true;
}

void scale_by_keep_factor(const row_inputs& in, double* out_hi, double* out_lo, double* out_rad);

// ---- step 5: o_k = N_k / W ---------------------------------------------------------------
void divide_outputs(const row_inputs& in, const row_workspace& ws, const fast_row_state& st, double* out_hi,
                    double* out_lo, double* out_rad) {
  const double* as = ws.acc_s.data();
  const double* ac = ws.acc_c.data();
  const double* ap = ws.acc_p.data();
  for (std::size_t k = 0; k < in.dv; ++k) {
    out_hi[k] = out_lo[k] = 0.0;
    out_rad[k] = inf;
    if (!std::isfinite(as[k]) || !std::isfinite(ac[k]) || !(ap[k] <= 0x1p1000)) continue;
    const dd N = two_sum(as[k], ac[k]);
    const double eN = (st.sum_factor * ap[k] + st.rho * ap[k] * (1.0 + 0x1p-26) + st.under_w * st.vmax + st.abs_allow) *
                      round_up_factor;
    if (N.hi == 0.0) {  // o = N_true / W_true with |N_true| <= eN
      out_rad[k] = eN / st.Wlow * round_up_factor;
      continue;
    }
    dd_with_error o = div_with_bound(N, st.W);
    double eN2 = eN, eW2 = st.eW;
    if (!std::isfinite(o.rel_error_bound)) {
      // Low words near the underflow range (a row of tiny weights: peaked scores) fail the
      // product conditions of Algorithm 18.  Dividing the high words instead moves |N_lo| and
      // |W_lo| into the absolute errors: |N_true - N_hi| <= eN + |N_lo|, |W_true - W_hi| <= eW + |W_lo|.
      o = div_with_bound(dd{N.hi, 0.0}, dd{st.W.hi, 0.0});
      eN2 = eN + std::fabs(N.lo);
      eW2 = st.eW + std::fabs(st.W.lo);
    }
    if (!std::isfinite(o.rel_error_bound)) continue;  // tiny or huge quotient: left to MPFI
    const double ao = std::fabs(o.value.hi) * (1.0 + 0x1p-50);
    out_hi[k] = o.value.hi;
    out_lo[k] = o.value.lo;
    out_rad[k] = (o.rel_error_bound * ao + (eN2 + ao * eW2) / st.Wlow) * round_up_factor;
  }
  if (in.keep) scale_by_keep_factor(in, out_hi, out_lo, out_rad);
}

// ---- P14: dropout, o <- c o with c = 1/(1 - P) in [keep_hi + keep_lo ± keep_rad] ---------
// |c o - c^ o^| <= |o^| r_c + |c^| r_o + r_c r_o, plus the product's own error Bm |c^ o^|.
void scale_by_keep_factor(const row_inputs& in, double* out_hi, double* out_lo, double* out_rad) {
  const dd c{in.keep_hi, in.keep_lo};
  const double ac = std::fabs(in.keep_hi) * (1.0 + 0x1p-50), rc = in.keep_rad;
  for (std::size_t k = 0; k < in.dv; ++k) {
    if (!std::isfinite(out_rad[k])) continue;
    const double ro = out_rad[k];
    if (out_hi[k] == 0.0) {
      out_rad[k] = (ac * ro + rc * ro) * round_up_factor;
      continue;
    }
    const dd_with_error p = mul_with_bound(dd{out_hi[k], out_lo[k]}, c);
    const double ao = std::fabs(out_hi[k]) * (1.0 + 0x1p-50);
    out_hi[k] = p.value.hi;
    out_lo[k] = p.value.lo;
    out_rad[k] = std::isfinite(p.rel_error_bound)
                     ? (ao * rc + ac * ro + rc * ro + p.rel_error_bound * std::fabs(p.value.hi) * (1.0 + 0x1p-50)) *
                           round_up_factor
                     : inf;
  }
}

}  // namespace

bool fast_row(const row_inputs& in, row_workspace& ws, double* out_hi, double* out_lo, double* out_rad) {
  if (!dd_detail::environment_ok()) return false;
  if (in.d > (std::size_t{1} << 20) || in.nk > (std::size_t{1} << 24)) return false;
  fast_row_state st;
  for (std::size_t j = 0; j < in.nk; ++j)
    if (in.allowed[j]) st.jend = j + 1;
  while (st.jbegin < st.jend && !in.allowed[st.jbegin]) ++st.jbegin;  // windows: skip the keys left of it
  if (st.jend == 0 && !in.has_sink) return false;
  dot_products(in, ws, st);
  if (!scale_scores(in, ws, st) || !exponential_weights(in, ws, st) || !weighted_sums(in, ws, st)) return false;
  if (!in.weights_only) divide_outputs(in, ws, st, out_hi, out_lo, out_rad);
  return true;
}

double plain_weights(const row_inputs& in, row_workspace& ws, std::size_t& jbegin, std::size_t& jend) {
  const std::size_t n = in.nk, d = in.d;
  jbegin = 0;
  jend = 0;
  for (std::size_t j = 0; j < n; ++j)
    if (in.allowed[j]) jend = j + 1;
  while (jbegin < jend && !in.allowed[jbegin]) ++jbegin;
  ws.s_hi.assign(jend, 0.0);
  double* __restrict s = ws.s_hi.data();
  for (std::size_t l = 0; l < d; ++l) {
    const double ql = in.q[l];
    const double* __restrict kt = in.KT + l * n;
    for (std::size_t j = jbegin; j < jend; ++j) s[j] = s[j] + ql * kt[j];
  }
  const double sc = in.scale_hi;
  if (in.softcap != 0) ws.th_hi.assign(jend, 0.0);
  double m = in.has_sink ? in.sink : -inf;
  for (std::size_t j = jbegin; j < jend; ++j)
    if (in.allowed[j]) {
      s[j] *= sc;
      if (in.softcap != 0) {
        ws.th_hi[j] = std::tanh(s[j] / in.softcap);
        s[j] = in.softcap * ws.th_hi[j];
      }
      if (in.add_hi) s[j] += in.add_hi[j];
      m = std::max(m, s[j]);
    }
  ws.w_hi.assign(jend, 0.0);
  double W = in.has_sink ? std::exp(in.sink - m) : 0.0;
  for (std::size_t j = jbegin; j < jend; ++j)
    if (in.allowed[j]) {
      ws.w_hi[j] = std::exp(s[j] - m);
      W += ws.w_hi[j];
    }
  ws.m = m;
  return W;
}

void plain_row(const row_inputs& in, row_workspace& ws, double* out, double* lse) {
  const std::size_t dv = in.dv;
  std::size_t jbegin = 0, jend = 0;
  const double W = plain_weights(in, ws, jbegin, jend);
  ws.acc_s.assign(dv, 0.0);
  double* __restrict acc = ws.acc_s.data();
  for (std::size_t j = jbegin; j < jend; ++j) {
    if (!in.allowed[j] || (in.keep && !in.keep[j])) continue;
    const double w = ws.w_hi[j];
    const double* __restrict v = in.V + j * dv;
    for (std::size_t k = 0; k < dv; ++k) acc[k] = acc[k] + w * v[k];
  }
  const double c = in.keep ? in.keep_hi : 1.0;
  for (std::size_t k = 0; k < dv; ++k) out[k] = in.keep ? acc[k] / W * c : acc[k] / W;
  if (lse) *lse = ws.m + std::log(W);
}

}  // namespace attncert::oracle::detail
