// lib/src/oracle/fast_backward.cpp — the backward's fast path (fast_backward.hpp): one row's
// gradients in double-double with a rigorous radius; the step letters refer to
// proofs/P15-oracle-backward.md ("Fast path").  Compiled like fast_kernel.cpp (-ffp-contract=off,
// and -mavx2 -mfma when the build machine has them): the sums over features are written so that
// GCC vectorizes them, and explicit std::fma calls are the only fused operations.
#include "fast_backward.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attncert/number/double_double.hpp"
#include "fast_common.hpp"

namespace attncert::oracle::detail {

namespace {

constexpr double u = 0x1p-53;
/// A round-to-nearest running sum of at most 2^24 nonnegative terms, each computed with at most
/// 8 roundings, times this is an upper bound of the exact sum ((1 - u)^-(2^24 + 8) < 1 + 2^-28).
constexpr double long_sum_factor = 1.0 + 0x1p-26;
constexpr std::uint32_t max_terms = 1u << 24;

/// An upper bound of |hi + lo| for a normalized double-double (|lo| <= u|hi|).
inline double mag(double hi) { return std::fabs(hi) * (1.0 + 0x1p-50); }

/// Ball arithmetic on double-doubles (step A of P15): the radius of a result bounds the error of
/// the operation plus the propagated radii.  `ok` is cleared when a range condition fails.
struct ball_ops {
  bool ok = true;

  dd_ball mul(const dd_ball& x, const dd_ball& y) {
    const dd a{x.hi, x.lo}, b{y.hi, y.lo};
    const double prop = mag(x.hi) * y.rad + mag(y.hi) * x.rad + x.rad * y.rad;
    if (!(dd_detail::operand_ok(a) && dd_detail::operand_ok(b))) {
      ok = false;
      return {};
    }
    if (dd_detail::mul_ok(a, b)) {  // Algorithm 12: relative error <= dd_mul_bound
      const dd z = attncert::mul(a, b);
      return {z.hi, z.lo, (dd_mul_bound * mag(z.hi) + prop) * round_up_factor};
    }
    // Tiny operands (a product of low words below 2^-967): the high words' product alone,
    // |xy - z| <= u|z| + 2^-1075 + |x.hi y.lo| + |x.lo y.hi| + |x.lo y.lo|.
    const double z = x.hi * y.hi;
    if (!(std::fabs(x.hi) * std::fabs(y.hi) <= dd_detail::magnitude_cap)) {
      ok = false;
      return {};
    }
    const double err = u * std::fabs(z) + subnormal_allowance + std::fabs(x.hi) * std::fabs(y.lo) +
                       std::fabs(x.lo) * std::fabs(y.hi) + std::fabs(x.lo) * std::fabs(y.lo);
    return {z, 0.0, (err + prop) * round_up_factor};
  }

  dd_ball add(const dd_ball& x, const dd_ball& y) {  // Algorithm 6: relative error <= dd_add_bound
    const dd a{x.hi, x.lo}, b{y.hi, y.lo};
    if (!(dd_detail::operand_ok(a) && dd_detail::operand_ok(b))) {
      ok = false;
      return {};
    }
    const dd z = attncert::add(a, b);
    return {z.hi, z.lo, (x.rad + y.rad + dd_add_bound * mag(z.hi)) * round_up_factor};
  }

  static dd_ball neg(const dd_ball& x) { return {-x.hi, -x.lo, x.rad}; }
};

/// s[l] + c[l] += (mh + ml) x[l] for l < n: TwoProd, TwoSum and the low word through one FMA, as in
/// P11 step 4 (step F of P15 bounds the error of a whole sum).
inline void axpy2(double mh, double ml, const double* __restrict x, std::size_t n, double* __restrict s,
                  double* __restrict c) {
  for (std::size_t l = 0; l < n; ++l) {
    const double p = mh * x[l];
    const double e = std::fma(mh, x[l], -p);
    const double sn = s[l] + p;
    const double bb = sn - s[l];
    const double sig = (s[l] - (sn - bb)) + (p - bb);
    s[l] = sn;
    c[l] = c[l] + std::fma(ml, x[l], sig + e);
  }
}

/// The error bound of step F for a sum of terms m_t x_t of which n were accumulated by axpy2 (the
/// others have m_t.hi = 0: no rounding, only their radius), given P >= Σ|m_t.hi|·|x_t| and
/// R >= Σ rad(m_t)·|x_t| (both as computed: round-to-nearest sums).  n = 0: the sum is exactly 0
/// and only R remains (0 when every multiplier is an exact 0).
inline double sum_error(std::uint32_t n, double P, double R) {
  if (n == 0) return R * long_sum_factor * round_up_factor;
  const double nt = static_cast<double>(n) + 3;
  const double f = nt * nt * u * u * (1.0 + 0x1p-26);  // (n + 3)^2 u^2 (1 + 2^-26), exact for n < 2^24
  return ((f * P + R) * long_sum_factor + nt * 3 * subnormal_allowance) * round_up_factor;
}

/// hi + lo ± E from a compensated sum (s, c): TwoSum is exact.  False when not finite.
inline bool sum_ball(double s, double c, double E, dd_ball& out) {
  if (!std::isfinite(s) || !std::isfinite(c) || !std::isfinite(E)) return false;
  const dd t = two_sum(s, c);
  out = {t.hi, t.lo, E};
  return true;
}

/// The weight w_j as a ball (P11 step 3): an underflowed weight (w_hi == 0) lies in [0, 2^-1019],
/// a tiny one (|w_hi| < 2^-900) errs by < 2^-928, the others by rho_normal |w|.
inline dd_ball weight_ball(double hi, double lo, const row_workspace& ws) {
  if (hi == 0.0) return {0.0, 0.0, 0x1p-1019};
  if (std::fabs(hi) < 0x1p-900) return {hi, lo, 0x1p-928};
  return {hi, lo, ws.rho_normal * mag(hi) * round_up_factor};
}

inline double max_abs(const double* x, std::size_t n) {
  double m = 0;
  for (std::size_t l = 0; l < n; ++l) m = std::max(m, std::fabs(x[l]));
  return m;
}

// ---- step B: t_j = dO·v_j by Dot2 over dv, eight or four keys at a time through VT --------
void value_dots(const double* dO, const double* VT, std::size_t nk, std::size_t dv, std::size_t jbegin,
                std::size_t jend, row_backward& out) {
  out.t_s.assign(jend, 0.0);
  out.t_c.assign(jend, 0.0);
  out.t_P.assign(jend, 0.0);
  dot2_columns(dO, VT, nk, dv, jbegin, jend, out.t_s.data(), out.t_c.data(), out.t_P.data());
}

/// Step C: the reference key r (the allowed, kept key of largest weight; none: all dropped),
/// δ_j = dP_j - c with c = dP_r, and D'' = Σ_j P_j δ_j.  Without dropout δ_r is exactly 0.
bool reference_differences(const row_inputs& in, std::size_t jbegin, std::size_t jend, row_backward& out, ball_ops& op,
                           dd_ball& c, dd_ball& Dpp) {
  const dd_ball kappa{in.keep_hi, in.keep_lo, in.keep_rad};
  std::size_t r = jend;
  for (std::size_t j = jbegin; j < jend; ++j)
    if (in.allowed[j] && (!in.keep || in.keep[j]) && (r == jend || out.p[j].hi > out.p[r].hi)) r = j;
  out.ref = r == jend ? in.nk : r;
  c = r == jend ? dd_ball{} : in.keep ? op.mul(out.dp[r], kappa) : out.dp[r];
  const dd_ball tr = r == jend ? dd_ball{} : out.dp[r];
  Dpp = {};
  for (std::size_t j = jbegin; j < jend; ++j) {
    if (!in.allowed[j]) continue;
    dd_ball& delta = out.dp[j];  // t_j, replaced by δ_j
    if (in.keep && !in.keep[j]) delta = ball_ops::neg(c);
    else if (j == r) delta = {};
    else delta = in.keep ? op.mul(op.add(delta, ball_ops::neg(tr)), kappa) : op.add(delta, ball_ops::neg(tr));
    Dpp = op.add(Dpp, op.mul(out.p[j], delta));
  }
  return op.ok;
}

/// Steps A-E for the allowed keys: P_j, δ_j, dS_j = P_j (δ_j + base) with
/// base = c P_sink - D'' + g, dU_j, a_j, and the sink's dS = P_sink (base - c).
bool row_scalars(const row_inputs& in, const row_workspace& ws, const row_cotangent& g, std::size_t jbegin,
                 std::size_t jend, row_backward& out) {
  ball_ops op;
  const dd W{ws.W_hi, ws.W_lo};
  const dd_with_error y = div_with_bound(dd{1.0, 0.0}, W);
  if (!std::isfinite(y.rel_error_bound) || !(ws.W_lo_bound > 0)) return false;
  // |1/W_true - 1/W| <= e_W / (|W| W_true) <= e_W / W_low^2
  const dd_ball invW{y.value.hi, y.value.lo,
                     (y.rel_error_bound * mag(y.value.hi) + ws.W_err / ws.W_lo_bound / ws.W_lo_bound) * round_up_factor};
  const std::size_t dv = in.dv;
  const double dot_factor = static_cast<double>(dv) * static_cast<double>(dv + 1) * u * u * (1.0 + 0x1p-26);
  for (std::size_t j = jbegin; j < jend; ++j) {  // steps A and B: P_j and t_j = dO·v_j
    if (!in.allowed[j]) continue;
    out.p[j] = op.mul(weight_ball(ws.w_hi[j], ws.w_lo[j], ws), invW);
    out.dp[j] = {};
    if (in.keep && !in.keep[j]) continue;
    if (!(out.t_P[j] <= 0x1p1000)) return false;
    if (!sum_ball(out.t_s[j], out.t_c[j], (dot_factor * out.t_P[j] + dv * subnormal_allowance) * round_up_factor,
                  out.dp[j]))
      return false;
  }
  dd_ball c, Dpp;
  if (!reference_differences(in, jbegin, jend, out, op, c, Dpp)) return false;
  dd_ball gb{};
  if (g.dlse) gb = g.lse_base2 ? op.mul(g.inv_ln2, dd_ball{*g.dlse, 0.0, 0.0}) : dd_ball{*g.dlse, 0.0, 0.0};
  const dd_ball psink = in.has_sink ? op.mul(weight_ball(ws.sink_hi, ws.sink_lo, ws), invW) : dd_ball{};
  const dd_ball base = op.add(op.add(op.mul(c, psink), ball_ops::neg(Dpp)), gb);  // dP_j - D + g = δ_j + base
  if (in.has_sink) out.dsink = op.mul(psink, op.add(base, ball_ops::neg(c)));   // P_sink (g - D)
  out.c = c;
  out.base = base;
  const dd_ball kappa{in.keep_hi, in.keep_lo, in.keep_rad};
  const bool softcap = in.softcap != 0;
  for (std::size_t j = jbegin; j < jend; ++j) {  // steps D and E
    if (!in.allowed[j]) continue;
    const dd_ball ds = op.mul(out.p[j], op.add(out.dp[j], base));
    if (g.want_ds) out.ds[j] = ds;
    if (softcap) {  // dU = dS (1 - t^2), t = tanh(s q·k / C)
      const dd_ball th{ws.th_hi[j], ws.th_lo[j], ws.th_rad[j]};
      out.du[j] = op.mul(ds, op.add(dd_ball{1.0, 0.0, 0.0}, ball_ops::neg(op.mul(th, th))));
    } else {
      out.du[j] = ds;
    }
    out.a[j] = !in.keep ? out.p[j] : in.keep[j] ? op.mul(out.p[j], kappa) : dd_ball{};
  }
  return op.ok;
}

/// Step F: dq = s Σ_j dU_j k_j.
bool row_dq(const row_inputs& in, const row_cotangent& g, std::size_t jbegin, std::size_t jend, row_backward& out) {
  const std::size_t d = in.d;
  out.acc_s.assign(d, 0.0);
  out.acc_c.assign(d, 0.0);
  out.acc_p.assign(d, 0.0);
  out.keys.clear();
  out.mh.resize(jend);
  out.ml.resize(jend);
  double P = 0, R = 0;
  std::uint32_t n = 0;
  for (std::size_t j = jbegin; j < jend; ++j) {
    if (!in.allowed[j]) continue;
    const dd_ball& m = out.du[j];
    P += std::fabs(m.hi) * g.kmax[j];
    R += m.rad * g.kmax[j];
    if (m.hi == 0.0) continue;
    ++n;
    out.keys.push_back(j);
    out.mh[j] = m.hi;
    out.ml[j] = m.lo;
  }
  // Σ_j dU_j k_j: axpy2's operations per component, over the same keys in the same order, as
  // the forward's value sums run them (eight components at a time with AVX-512F; acc_p, their
  // Σ|p|, is not used here: P above bounds with max|k_j|)
  dot2_weighted_rows(out.keys.data(), out.keys.size(), out.mh.data(), out.ml.data(), in.K, d, out.acc_s.data(),
                     out.acc_c.data(), out.acc_p.data());
  if (!(P <= 0x1p1000) || !(R <= 0x1p1000)) return false;
  ball_ops op;
  const dd_ball sc{in.scale_hi, in.scale_lo, in.scale_rad};
  const double E = sum_error(n, P, R);
  out.dq.resize(d);
  for (std::size_t l = 0; l < d; ++l) {
    dd_ball S;
    if (!sum_ball(out.acc_s[l], out.acc_c[l], E, S)) return false;
    out.dq[l] = op.mul(S, sc);
  }
  return op.ok;
}

/// Step G: the row's terms of dK (dU_j q) and dV (a_j dO) into the unit's sums.
void row_unit_terms(const row_inputs& in, const row_cotangent& g, std::size_t jbegin, std::size_t jend,
                    const row_backward& out, unit_sums& sums) {
  const std::size_t d = in.d, dv = in.dv;
  ++sums.rows;
  const double qmax = max_abs(in.q, d), omax = max_abs(g.dO, dv);
  for (std::size_t j = jbegin; j < jend; ++j) {
    if (!in.allowed[j]) continue;
    const std::size_t x = g.key_offset + j;  // the key in the unit's sums
    const dd_ball& m = out.du[j];
    sums.dk_P[x] += std::fabs(m.hi) * qmax;
    sums.dk_R[x] += m.rad * qmax;
    if (m.hi != 0.0) {
      ++sums.dk_n[x];
      axpy2(m.hi, m.lo, in.q, d, sums.dk_s.data() + x * d, sums.dk_c.data() + x * d);
    }
    const dd_ball& a = out.a[j];  // a key dropped for this row: an exact 0, no term
    sums.dv_P[x] += std::fabs(a.hi) * omax;
    sums.dv_R[x] += a.rad * omax;
    if (a.hi != 0.0) {
      ++sums.dv_n[x];
      axpy2(a.hi, a.lo, g.dO, dv, sums.dv_s.data() + x * dv, sums.dv_c.data() + x * dv);
    }
  }
}

}  // namespace

dd_ball ball_add(const dd_ball& x, const dd_ball& y, bool& ok) {
  ball_ops op;
  const dd_ball z = op.add(x, y);
  ok = ok && op.ok;
  return z;
}

void unit_sums::reset(std::size_t nk_, std::size_t d_, std::size_t dv_) {
  nk = nk_;
  d = d_;
  dv = dv_;
  dk_s.assign(nk * d, 0.0);
  dk_c.assign(nk * d, 0.0);
  dv_s.assign(nk * dv, 0.0);
  dv_c.assign(nk * dv, 0.0);
  dk_P.assign(nk, 0.0);
  dk_R.assign(nk, 0.0);
  dv_P.assign(nk, 0.0);
  dv_R.assign(nk, 0.0);
  dk_n.assign(nk, 0);
  dv_n.assign(nk, 0);
  rows = 0;
}

bool fast_row_backward(const row_inputs& in, row_workspace& ws, const row_cotangent& g, unit_sums& sums,
                       row_backward& out) {
  if (!in.weights_only || !fast_row(in, ws, nullptr, nullptr, nullptr)) return false;
  std::size_t jbegin = 0, jend = 0;
  for (std::size_t j = 0; j < in.nk; ++j)
    if (in.allowed[j]) jend = j + 1;
  while (jbegin < jend && !in.allowed[jbegin]) ++jbegin;
  out.p.assign(jend, {});
  out.dp.assign(jend, {});
  out.du.assign(jend, {});
  out.a.assign(jend, {});
  if (g.want_ds) out.ds.assign(in.nk, {});
  out.dsink = {};
  value_dots(g.dO, g.VT, in.nk, in.dv, jbegin, jend, out);
  if (!row_scalars(in, ws, g, jbegin, jend, out) || !row_dq(in, g, jbegin, jend, out)) return false;
  row_unit_terms(in, g, jbegin, jend, out, sums);
  return true;
}

dd_ball ball_mul(const dd_ball& x, const dd_ball& y, bool& ok) {
  ball_ops op;
  const dd_ball z = op.mul(x, y);
  ok = ok && op.ok;
  return z;
}

bool sum_balls(const unit_sums& sums, std::vector<dd_ball>& dk, std::vector<dd_ball>& dv) {
  dk.resize(sums.nk * sums.d);
  dv.resize(sums.nk * sums.dv);
  if (sums.rows > max_terms) return false;  // the factor of the P and R sums (step F)
  for (std::size_t j = 0; j < sums.nk; ++j) {
    if (!(sums.dk_P[j] <= 0x1p1000 && sums.dk_R[j] <= 0x1p1000 && sums.dv_P[j] <= 0x1p1000 && sums.dv_R[j] <= 0x1p1000))
      return false;
    const double Ek = sum_error(sums.dk_n[j], sums.dk_P[j], sums.dk_R[j]);
    for (std::size_t l = 0; l < sums.d; ++l)
      if (!sum_ball(sums.dk_s[j * sums.d + l], sums.dk_c[j * sums.d + l], Ek, dk[j * sums.d + l])) return false;
    const double Ev = sum_error(sums.dv_n[j], sums.dv_P[j], sums.dv_R[j]);
    for (std::size_t k = 0; k < sums.dv; ++k)
      if (!sum_ball(sums.dv_s[j * sums.dv + k], sums.dv_c[j * sums.dv + k], Ev, dv[j * sums.dv + k])) return false;
  }
  return true;
}

bool finish_unit(const unit_sums& sums, const dd_ball& scale, std::vector<dd_ball>& dk, std::vector<dd_ball>& dv) {
  if (!sum_balls(sums, dk, dv)) return false;
  ball_ops op;
  for (dd_ball& x : dk) x = op.mul(x, scale);
  return op.ok;
}

bool round_ball(double hi, double lo, double rad, target_format t, double& out) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (!std::isfinite(rad) || !std::isfinite(hi) || !(std::fabs(hi) <= 0x1p1000)) return false;
  const double fl = round_sum_to_target(hi, rad == 0 ? lo : std::nextafter(lo - rad, -inf), t);
  const double fu = round_sum_to_target(hi, rad == 0 ? lo : std::nextafter(lo + rad, inf), t);
  if (fl != fu) return false;
  out = fl == 0 ? 0.0 : fl;
  return true;
}

void transpose_values(const double* V, const std::vector<std::size_t>& cuts, std::size_t dv, std::vector<double>& VT) {
  VT.resize(cuts.back() * dv);
  for (std::size_t s = 0; s + 1 < cuts.size(); ++s) {
    const std::size_t k0 = cuts[s], n = cuts[s + 1] - k0;
    double* T = VT.data() + dv * k0;
    for (std::size_t j = 0; j < n; ++j)
      for (std::size_t k = 0; k < dv; ++k) T[k * n + j] = V[(k0 + j) * dv + k];
  }
}

void key_magnitudes(const double* K, std::size_t nk, std::size_t d, std::vector<double>& kmax) {
  kmax.resize(nk);
  for (std::size_t j = 0; j < nk; ++j) kmax[j] = max_abs(K + j * d, d);
}

void plain_row_backward(const row_inputs& in, row_workspace& ws, const double* dO, const double* dlse,
                        const double* VT, double* dq, double* dk, double* dv) {
  const std::size_t nk = in.nk, d = in.d, ndv = in.dv;
  std::size_t jbegin = 0, jend = 0;
  const double W = plain_weights(in, ws, jbegin, jend);
  const double* w = ws.w_hi.data();
  ws.acc_s.assign(jend, 0.0);  // dP_j
  double* __restrict t = ws.acc_s.data();
  for (std::size_t k = 0; k < ndv; ++k) {
    const double x = dO[k];
    const double* __restrict col = VT + k * nk;
    for (std::size_t j = jbegin; j < jend; ++j) t[j] = t[j] + x * col[j];
  }
  const double kappa = in.keep ? in.keep_hi : 1.0;
  double D = 0;
  for (std::size_t j = jbegin; j < jend; ++j) {
    if (!in.allowed[j]) continue;
    t[j] = in.keep ? (in.keep[j] ? kappa * t[j] : 0.0) : t[j];
    D += w[j] / W * t[j];
  }
  const double Dp = D - (dlse ? *dlse : 0.0);
  for (std::size_t l = 0; l < d; ++l) dq[l] = 0;
  for (std::size_t j = jbegin; j < jend; ++j) {
    if (!in.allowed[j]) continue;
    const double p = w[j] / W;
    double du = p * (t[j] - Dp);
    if (in.softcap != 0) du *= 1 - ws.th_hi[j] * ws.th_hi[j];
    const double sdu = in.scale_hi * du;
    const double* __restrict kj = in.K + j * d;
    double* __restrict dkj = dk + j * d;
    for (std::size_t l = 0; l < d; ++l) {
      dq[l] = dq[l] + du * kj[l];
      dkj[l] = dkj[l] + sdu * in.q[l];
    }
    const double a = in.keep ? (in.keep[j] ? p * kappa : 0.0) : p;
    double* __restrict dvj = dv + j * ndv;
    for (std::size_t k = 0; k < ndv; ++k) dvj[k] = dvj[k] + a * dO[k];
  }
  for (std::size_t l = 0; l < d; ++l) dq[l] *= in.scale_hi;
}

}  // namespace attncert::oracle::detail
