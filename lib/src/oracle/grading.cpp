// lib/src/oracle/grading.cpp — grading other implementations against the oracle: a
// candidate's output in ulps of the target, and a candidate attention matrix against the
// output bound of the article (§11).  See attncert/oracle/oracle.hpp.
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
#include "attncert/oracle/grading.hpp"
#include "internal.hpp"

namespace attncert::oracle {

using namespace internal;

candidate_grade grade_candidate(const oracle_result& r, const std::vector<double>& c, target_format t,
                                const std::string& name) {
  if (c.size() != r.reference.size())
    throw input_error("candidate '" + name + "' has " + std::to_string(c.size()) + " elements, the output has " +
                      std::to_string(r.reference.size()));
  candidate_grade g;
  g.name = name;
  g.elements = c.size();
  double sum_ulp = 0;
  for (std::size_t e = 0; e < c.size(); ++e) {
    if (!std::isfinite(r.t_rad[e]) || !std::isfinite(r.t_hi[e])) continue;  // truth not enclosed / not finite
    if (!std::isfinite(c[e])) {
      ++g.nonfinite_where_finite;
      continue;
    }
    ++g.compared;
    const double hi = r.t_hi[e], lo = r.t_lo[e];
    const double diff = std::fabs((c[e] - hi) - lo);
    const double ulp = target_ulp(hi, t);
    const double eu = diff / ulp;
    sum_ulp += eu;
    g.max_abs = std::max(g.max_abs, diff);
    if (hi != 0) g.max_rel = std::max(g.max_rel, diff / std::fabs(hi));
    for (std::size_t q = 0; q < ulp_thresholds.size(); ++q)
      if (eu > ulp_thresholds[q]) ++g.beyond[q];
    if (!g.has_worst || eu > g.max_ulp) {
      g.has_worst = true;
      g.max_ulp = eu;
      const std::size_t k = e % r.dv, i = (e / r.dv) % r.nq, h = (e / (r.dv * r.nq)) % r.H, b = e / (r.dv * r.nq * r.H);
      g.worst = {b, h, i, k};
    }
  }
  g.mean_ulp = g.compared ? sum_ulp / static_cast<double>(g.compared) : 0.0;
  return g;
}

namespace {
// Outward-rounded interval arithmetic in binary64: a rounded sum or product is moved one ulp
// outward only when it is inexact (the exact error comes from TwoSum / an fma), so exact
// operations (e.g. 1 - 1) keep point intervals.
struct outward_interval {
  double lo, hi;
};
inline double dn(double x) { return std::nextafter(x, -inf); }
inline double up(double x) { return std::nextafter(x, inf); }
inline double sum_dn(double a, double b) {
  const dd s = two_sum(a, b);
  return s.lo < 0 ? dn(s.hi) : s.hi;
}
inline double sum_up(double a, double b) {
  const dd s = two_sum(a, b);
  return s.lo > 0 ? up(s.hi) : s.hi;
}
inline double prod_dn(double a, double b) {
  const double p = a * b;
  if (std::fabs(p) < 0x1p-960) return p == 0 && (a == 0 || b == 0) ? 0.0 : dn(p);
  const double e = std::fma(a, b, -p);
  return e < 0 ? dn(p) : p;
}
inline double prod_up(double a, double b) {
  const double p = a * b;
  if (std::fabs(p) < 0x1p-960) return p == 0 && (a == 0 || b == 0) ? 0.0 : up(p);
  const double e = std::fma(a, b, -p);
  return e > 0 ? up(p) : p;
}
inline outward_interval isub(outward_interval a, outward_interval b) { return {sum_dn(a.lo, -b.hi), sum_up(a.hi, -b.lo)}; }
inline outward_interval iadd(outward_interval a, outward_interval b) { return {sum_dn(a.lo, b.lo), sum_up(a.hi, b.hi)}; }
inline outward_interval imul_d(outward_interval a, double v) {
  const double x1 = prod_dn(a.lo, v), x2 = prod_dn(a.hi, v), y1 = prod_up(a.lo, v), y2 = prod_up(a.hi, v);
  return {std::min(x1, x2), std::max(y1, y2)};
}
inline outward_interval iabs(outward_interval a) {
  if (a.lo >= 0) return a;
  if (a.hi <= 0) return {-a.hi, -a.lo};
  return {0.0, std::max(-a.lo, a.hi)};
}
}  // namespace

attention_grade grade_attention(const oracle_request& req, const std::vector<double>& A_hat) {
  const auto& Q = req.Q;
  const auto& K = req.K;
  const auto& V = req.V;
  const std::size_t B = Q.B, H = Q.H, nq = Q.n, nk = K.n, d = Q.d, dv = V.d;
  if (A_hat.size() != B * H * nq * nk)
    throw input_error("attention candidate has " + std::to_string(A_hat.size()) + " elements, expected B*H*n_q*n_k = " +
                      std::to_string(B * H * nq * nk));
  for (double a : A_hat)
    if (!std::isfinite(a)) throw input_error("attention candidate contains NaN or Inf");
  scale_value sv;
  init_scale(sv, req.scale, d);
  attention_grade g;
  const std::size_t rows = B * H * nq;
  g.rows = rows;
  g.row_l1.assign(rows, std::numeric_limits<double>::quiet_NaN());
  g.lhs_upper.assign(rows, std::numeric_limits<double>::quiet_NaN());
  g.rhs_lower.assign(rows, std::numeric_limits<double>::quiet_NaN());
  std::vector<double> KT(d * nk);
  detail::row_workspace ws;
  std::vector<std::uint8_t> allowed(nk);
  std::vector<double> ohi(dv), olo(dv), orad(dv);
  std::vector<outward_interval> acc(dv);
  for (std::size_t bh = 0; bh < B * H; ++bh) {
    const double* Kh = K.values.data() + bh * nk * d;
    const double* Vh = V.values.data() + bh * nk * dv;
    for (std::size_t j = 0; j < nk; ++j)
      for (std::size_t l = 0; l < d; ++l) KT[l * nk + j] = Kh[j * d + l];
    const std::size_t b = bh / H, h = bh % H;
    // max_j ||v_j||_2^2 over all keys of the head, bounded below and above
    double vmax_sq_hi = 0, vmax_sq_lo = 0;
    for (std::size_t j = 0; j < nk; ++j) {
      double n2lo = 0, n2hi = 0;
      for (std::size_t k = 0; k < dv; ++k) {
        const double v = Vh[j * dv + k];
        n2lo = sum_dn(n2lo, prod_dn(v, v));
        n2hi = sum_up(n2hi, prod_up(v, v));
      }
      vmax_sq_lo = std::max(vmax_sq_lo, n2lo);
      vmax_sq_hi = std::max(vmax_sq_hi, n2hi);
    }
    for (std::size_t i = 0; i < nq; ++i) {
      const std::size_t r = bh * nq + i;
      for (std::size_t j = 0; j < nk; ++j)
        allowed[j] = req.mask == mask_kind::causal ? j <= i
                     : req.mask == mask_kind::explicit_mask ? req.M.at(b, h, i, j)
                                                            : 1;
      const double* q = Q.values.data() + r * d;
      detail::row_inputs in{q, Kh, KT.data(), Vh, allowed.data(), nk, d, dv, sv.hi, sv.lo, sv.rad};
      if (!std::isfinite(sv.rad) || !detail::fast_row(in, ws, ohi.data(), olo.data(), orad.data())) {
        ++g.rows_skipped;
        continue;
      }
      // The weights and their sum as intervals: w_j in w (1 ± rho), W in [Wlo, Whi].
      const double rho = ws.rho, Wlo = ws.W_lo_bound, Whi = ws.W_hi_bound;
      const double* ah = A_hat.data() + r * nk;
      outward_interval l1{0, 0};
      for (auto& a : acc) a = {0, 0};
      const std::size_t n_allowed = static_cast<std::size_t>(std::count(allowed.begin(), allowed.end(), 1));
      for (std::size_t j = 0; j < nk; ++j) {
        outward_interval A{0, 0};
        if (allowed[j] && j < ws.w_hi.size()) {
          const double w = ws.w_hi[j];
          if (n_allowed == 1) {
            A = {1.0, 1.0};  // a single attended key: A_ij = 1 exactly
          } else if (w == 0.0 && ws.under > 0) {
            A = {0, up(0x1p-1019 / Wlo)};
          } else {
            const double wl = dn(dn(w + ws.w_lo[j]) * dn(1 - rho)), wu = up(up(w + ws.w_lo[j]) * up(1 + rho));
            A = {dn(wl / Whi), up(wu / Wlo)};
          }
        }
        const outward_interval diff = isub(outward_interval{ah[j], ah[j]}, A);
        l1 = iadd(l1, iabs(diff));
        if (diff.lo == 0 && diff.hi == 0) continue;
        for (std::size_t k = 0; k < dv; ++k) acc[k] = iadd(acc[k], imul_d(diff, Vh[j * dv + k]));
      }
      double lhs2_hi = 0, lhs2_lo = 0;
      for (std::size_t k = 0; k < dv; ++k) {
        const outward_interval a = iabs(acc[k]);
        lhs2_hi = sum_up(lhs2_hi, prod_up(a.hi, a.hi));
        lhs2_lo = sum_dn(lhs2_lo, prod_dn(a.lo, a.lo));
      }
      const double lhs_hi = lhs2_hi == 0 ? 0.0 : up(std::sqrt(lhs2_hi)), lhs_lo = dn(std::sqrt(lhs2_lo));
      const double rhs_lo = prod_dn(l1.lo, dn(std::sqrt(vmax_sq_lo))), rhs_hi = prod_up(l1.hi, up(std::sqrt(vmax_sq_hi)));
      g.row_l1[r] = 0.5 * (l1.lo + l1.hi);
      g.max_row_l1 = std::max(g.max_row_l1, l1.hi);
      g.lhs_upper[r] = lhs_hi;
      g.rhs_lower[r] = rhs_lo;
      if (lhs_hi <= rhs_lo) ++g.bound_certified;
      else if (lhs_lo > rhs_hi) ++g.bound_refuted;
      else ++g.bound_undecided;
    }
  }
  return g;
}

}  // namespace attncert::oracle
