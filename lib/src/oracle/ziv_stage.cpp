// lib/src/oracle/ziv_stage.cpp — the oracle's enclosure tier: the exact scale, the MPFI
// enclosure of one row's outputs at a given precision, and its conversion to a double-double
// with a radius.  The escalation over precisions is oracle_run's Ziv stage (run.cpp), through
// number/ziv.hpp.  Error analysis: proofs/P11-oracle.md.
#include <gmp.h>
#include <mpfi.h>
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/number/double_double.hpp"
#include "attncert/number/emulated.hpp"
#include "attncert/number/traits.hpp"
#include "internal.hpp"

namespace attncert::oracle::internal {

void init_scale(scale_value& sv, const scale_spec& spec, std::size_t d) {
  sv.inv_sqrt_d = spec.inv_sqrt_d;
  sv.d = static_cast<unsigned>(d);
  if (!spec.inv_sqrt_d) mpq_set(sv.q, spec.rational.backend().data());  // its size is bounded by validate_request
  mpfi_var s(400);
  sv.enclose(s.v);
  mpfr_var mid(400), a(2600), t(2600);
  mpfi_mid(mid.v, s.v);
  sv.sign = mpfr_sgn(mid.v) > 0 ? 1 : (mpfr_sgn(mid.v) < 0 ? -1 : 0);
  sv.approx = mpfr_get_d(mid.v, MPFR_RNDN);
  sv.hi = mpfr_get_d(mid.v, MPFR_RNDN);
  if (!std::isfinite(sv.hi) || std::fabs(sv.hi) > 0x1p1000 || (sv.hi != 0 && std::fabs(sv.hi) < 0x1p-900)) {
    sv.hi = sv.lo = 0;
    sv.rad = inf;  // the fast path declines; the MPFI stage handles any scale
    return;
  }
  mpfr_sub_d(a.v, mid.v, sv.hi, MPFR_RNDN);  // exact at 2600 bits
  sv.lo = mpfr_get_d(a.v, MPFR_RNDN);
  // rad >= max(|left - (hi+lo)|, |right - (hi+lo)|), each difference exact at 2600 bits.
  double rad = 0;
  for (int side = 0; side < 2; ++side) {
    if (side == 0) mpfi_get_left(t.v, s.v);
    else mpfi_get_right(t.v, s.v);
    if (mpfr_sub_d(t.v, t.v, sv.hi, MPFR_RNDN) != 0 || mpfr_sub_d(t.v, t.v, sv.lo, MPFR_RNDN) != 0) {
      sv.rad = inf;  // not exact (cannot happen at 2600 bits): no fast path rather than a rounded radius
      return;
    }
    mpfr_abs(t.v, t.v, MPFR_RNDN);
    rad = std::max(rad, mpfr_get_d(t.v, MPFR_RNDU));
  }
  sv.rad = rad;
  const dd n = two_sum(sv.hi, sv.lo);
  if (n.hi != sv.hi) sv.rad = inf;  // not normalized (cannot happen for RN); decline fast path
}

void init_variant_values(variant_values& vv, const attention_variant& v) {
  if (v.softcap) {  // C > 0 and its size are checked by validate_request
    const mpq_rational& C = *v.softcap;
    vv.has_softcap = true;
    mpq_set(vv.softcap, C.backend().data());
    // The fast path takes C only when it is a binary64 number in [2^-900, 2^900]; every other C
    // (2e308 included, whose nearest double is +inf: mpq_set_d(inf) raises SIGFPE) is left to
    // the MPFI stage, which uses the exact rational.
    const double cd = mpq_get_d(vv.softcap);
    vv.softcap_d = 0.0;
    if (std::isfinite(cd) && cd >= 0x1p-900 && cd <= 0x1p900) {
      mpq_t back;
      mpq_init(back);
      mpq_set_d(back, cd);
      if (mpq_equal(back, vv.softcap)) vv.softcap_d = cd;
      mpq_clear(back);
    }
  }
  if (v.has_dropout) {
    const mpq_rational& P = v.dropout_p;  // in [0, 1): validate_request
    vv.has_dropout = true;
    const mpq_rational c = mpq_rational(1) / (mpq_rational(1) - P);
    mpq_set(vv.keep_factor, c.backend().data());
    mpfr_var hi(53), r(400), t(400);
    mpfr_set_q(r.v, vv.keep_factor, MPFR_RNDN);
    vv.keep_hi = mpfr_get_d(r.v, MPFR_RNDN);
    mpfr_sub_d(t.v, r.v, vv.keep_hi, MPFR_RNDN);
    vv.keep_lo = mpfr_get_d(t.v, MPFR_RNDN);
    // |c - (hi + lo)| <= |c - r| + |r - hi - lo| <= 2^-399 c + ulp-level of t
    mpfr_sub_d(t.v, t.v, vv.keep_lo, MPFR_RNDN);
    mpfr_abs(t.v, t.v, MPFR_RNDU);
    vv.keep_rad = (mpfr_get_d(t.v, MPFR_RNDU) + std::fabs(vv.keep_hi) * 0x1p-398) * (1.0 + 0x1p-40);
    const dd n = two_sum(vv.keep_hi, vv.keep_lo);
    if (n.hi != vv.keep_hi) vv.keep_rad = inf;
  }
}

namespace {

/// The row's additive term a_j = -slope |pos - j| + bias_j as an interval (exact when prec
/// holds it; outward rounded otherwise).
void additive_term(const mpfi_row_ctx& c, std::size_t j, mpfi_ptr out) {
  mpfi_set_ui(out, 0);
  if (c.has_alibi) {
    const long long dist = c.pos >= static_cast<long long>(j) ? c.pos - static_cast<long long>(j)
                                                              : static_cast<long long>(j) - c.pos;
    mpfi_set_d(out, c.slope);
    mpfi_mul_d(out, out, static_cast<double>(dist));  // dist < 2^53: exact as a double
    mpfi_neg(out, out);
  }
  if (c.bias) mpfi_add_d(out, out, c.bias[j]);
}

bool has_additive(const mpfi_row_ctx& c) { return c.has_alibi || c.bias != nullptr; }

/// An approximate score in binary64, only to choose the reference key (any choice is exact).
double approx_score(const mpfi_row_ctx& c, std::size_t j) {
  double acc = 0;
  for (std::size_t l = 0; l < c.d; ++l) acc += c.q[l] * c.K[j * c.d + l];
  const bool modified = (c.var && c.var->has_softcap) || has_additive(c);
  if (!modified) return c.scale->sign * acc;  // the ordering of s·q·k_j
  double x = c.scale->approx * acc;
  if (c.var && c.var->has_softcap) {
    const double C = mpq_get_d(c.var->softcap);  // +inf beyond binary64: C·tanh(x/C) → x
    if (std::isfinite(C)) x = C * std::tanh(x / C);
  }
  if (c.has_alibi) x -= c.slope * std::fabs(static_cast<double>(c.pos) - static_cast<double>(j));
  if (c.bias) x += c.bias[j];
  return x;
}

/// The enclosures of one row at one precision (P11, P14).
class row_enclosure {
 public:
  row_enclosure(const mpfi_row_ctx& c, mpfr_prec_t prec)
      : c_(c), prec_(prec), store_(2 * std::max(c.d, c.dv)), ptrs_(2 * std::max(c.d, c.dv)), lo_(prec), hi_(prec), z_(c.nk),
        s_(prec), a_(prec), ar_(prec), S_(prec), th_(c.nk) {
    keep_tanh_ = softcapped();
    for (std::size_t l = 0; l < ptrs_.size(); ++l) {
      store_[l] = std::make_unique<mpfr_var>(106);
      ptrs_[l] = store_[l]->v;
    }
    c.scale->enclose(s_.v);
  }

  /// z_j = x_j - S for every allowed key, the shift S, and the sink's exponent.
  void scores() {
    std::size_t ref = approx_reference();
    if (ref == c_.nk) {  // no allowed key: only the sink (the row is not empty)
      mpfi_set_d(S_.v, c_.sink);
      return;
    }
    softcapped() ? softcap_scores(ref) : difference_scores(ref);
    const std::size_t best = largest_midpoint(ref);
    if (best != ref) softcapped() ? softcap_scores(best) : difference_scores(best);
    ref_ = best;
    shift_to_sink_if_larger();
  }

  /// out[idx] for ks[idx]: outputs (k < dv) and the LSE (k == dv).
  void outputs(const std::vector<std::size_t>& ks, std::vector<mpfi_var*>& out) {
    mpfi_var w(prec_), W(prec_), t(prec_);
    mpfi_set_ui(W.v, 0);
    std::vector<std::unique_ptr<mpfi_var>> N;
    for (std::size_t idx = 0; idx < ks.size(); ++idx) {
      N.push_back(std::make_unique<mpfi_var>(prec_));
      mpfi_set_ui(N.back()->v, 0);
    }
    for (std::size_t j = 0; j < c_.nk; ++j) {
      if (!c_.allowed[j]) continue;
      mpfi_exp(w.v, z_[j]->v);
      mpfi_add(W.v, W.v, w.v);
      if (c_.keep && !c_.keep[j]) continue;
      for (std::size_t idx = 0; idx < ks.size(); ++idx) {
        if (ks[idx] >= c_.dv) continue;
        mpfi_mul_d(t.v, w.v, c_.V[j * c_.dv + ks[idx]]);
        mpfi_add(N[idx]->v, N[idx]->v, t.v);
      }
    }
    if (c_.has_sink) {  // e^{sink - S}
      mpfi_d_sub(t.v, c_.sink, S_.v);
      mpfi_exp(w.v, t.v);
      mpfi_add(W.v, W.v, w.v);
    }
    for (std::size_t idx = 0; idx < ks.size(); ++idx) {
      mpfi_set_prec(out[idx]->v, prec_);
      if (ks[idx] == c_.dv) {  // LSE = S + ln W
        mpfi_log(out[idx]->v, W.v);
        mpfi_add(out[idx]->v, out[idx]->v, S_.v);
        if (c_.lse_base2) {
          mpfi_const_log2(t.v);
          mpfi_div(out[idx]->v, out[idx]->v, t.v);
        }
        continue;
      }
      mpfi_div(out[idx]->v, N[idx]->v, W.v);
      if (c_.var && c_.var->has_dropout) mpfi_mul_q(out[idx]->v, out[idx]->v, c_.var->keep_factor);
    }
  }

  /// The contributions of this row to dK_j and dV_j for the keys `keys` (P15, escalation 2), from
  /// the fast path's row quantities `rs` (the shift m, W, c = dP_r, base) and this key's exact
  /// score: dk[idx] (d intervals) += s dU_j q, dv[idx] (dv) += P_j κ_j dO.  No scores() needed.
  void key_columns(const row_summary& rs, const double* dO, const std::vector<std::size_t>& keys, mpfi_ptr* const* dk,
                   mpfi_ptr* const* dv) {
    mpfi_var W(prec_), base(prec_), cc(prec_), x(prec_), t(prec_), th(prec_), P(prec_), u(prec_);
    ball_interval(rs.W_hi, rs.W_lo, rs.W_rad, W.v);
    ball_interval(rs.base_hi, rs.base_lo, rs.base_rad, base.v);
    ball_interval(rs.c_hi, rs.c_lo, rs.c_rad, cc.v);
    const bool dropout = c_.keep != nullptr;
    for (std::size_t idx = 0; idx < keys.size(); ++idx) {
      const std::size_t j = keys[idx];
      if (!c_.allowed[j]) continue;
      exact_score(j, x.v, th.v);       // x_j, and tanh with a softcap
      mpfi_sub_d(x.v, x.v, rs.m);       // z_j = x_j - m: P_j = e^{z_j} / W
      mpfi_exp(P.v, x.v);
      mpfi_div(P.v, P.v, W.v);
      if (dropout && !c_.keep[j]) {     // delta_j = -c
        mpfi_neg(u.v, cc.v);
      } else if (rs.ref >= c_.nk) {     // no kept key in the row: c = 0, delta_j = dP_j = 0
        mpfi_set_ui(u.v, 0);
      } else {                          // delta_j = kappa dO·(v_j - v_r), exactly summed
        if (j == rs.ref) mpfi_set_ui(u.v, 0);
        else dot_dv(dO, j, rs.ref, u.v);
        if (dropout) mpfi_mul_q(u.v, u.v, c_.var->keep_factor);
      }
      mpfi_add(u.v, u.v, base.v);       // dS_j = P_j (delta_j + base)
      mpfi_mul(u.v, u.v, P.v);
      if (softcapped()) {
        mpfi_sqr(t.v, th.v);
        mpfi_ui_sub(t.v, 1, t.v);
        mpfi_mul(u.v, u.v, t.v);
      }
      mpfi_mul(u.v, u.v, s_.v);         // s dU_j
      for (std::size_t l = 0; l < c_.d; ++l) {
        mpfi_mul_d(t.v, u.v, c_.q[l]);
        mpfi_add(dk[idx][l], dk[idx][l], t.v);
      }
      if (dropout && !c_.keep[j]) continue;
      if (dropout) mpfi_mul_q(P.v, P.v, c_.var->keep_factor);
      for (std::size_t k = 0; k < c_.dv; ++k) {
        mpfi_mul_d(t.v, P.v, dO[k]);
        mpfi_add(dv[idx][k], dv[idx][k], t.v);
      }
    }
  }

  /// The backward of the row (P15), after scores(): adds its contributions to `out`.
  /// After scores(): the weights' sum W = Σ_j e^{z_j} (+ the sink's), P_j = e^{z_j} / W for the
  /// allowed keys and P_sink (0 without a sink).
  void probabilities(std::vector<std::unique_ptr<mpfi_var>>& P, mpfi_ptr W, mpfi_ptr wsink) {
    mpfi_var t(prec_);
    mpfi_set_ui(W, 0);
    for (std::size_t j = 0; j < c_.nk; ++j) {
      if (!c_.allowed[j]) continue;
      P[j] = std::make_unique<mpfi_var>(prec_);
      mpfi_exp(P[j]->v, z_[j]->v);
      mpfi_add(W, W, P[j]->v);
    }
    mpfi_set_ui(wsink, 0);
    if (c_.has_sink) {
      mpfi_d_sub(t.v, c_.sink, S_.v);
      mpfi_exp(wsink, t.v);
      mpfi_add(W, W, wsink);
      mpfi_div(wsink, wsink, W);  // P_sink
    }
    for (std::size_t j = 0; j < c_.nk; ++j)
      if (P[j]) mpfi_div(P[j]->v, P[j]->v, W);
  }

  /// After scores(): the row's summary for the key columns (row_summary) at this precision:
  /// m = S rounded, W_m = W e^{S - m}, a kept reference key (MPFI's own when kept) with c = dP_ref,
  /// and base = c P_sink - D'' + g with D'' = Σ_j P_j (dP_j - c), each as a ball.
  void summary(const double* dO, const double* dlse, row_summary& out) {
    const std::size_t nk = c_.nk;
    std::vector<std::unique_ptr<mpfi_var>> P(nk);
    mpfi_var W(prec_), wsink(prec_), t(prec_), c(prec_), Dp(prec_), g(prec_);
    probabilities(P, W.v, wsink.v);
    mpfr_var mid(prec_);
    mpfi_mid(mid.v, S_.v);
    out.m = mpfr_get_d(mid.v, MPFR_RNDN);
    mpfi_sub_d(t.v, S_.v, out.m);  // W_m = Σ e^{x_j - m} = W e^{S - m}
    mpfi_exp(t.v, t.v);
    mpfi_mul(t.v, t.v, W.v);
    enclosure_to_dd(t.v, out.W_hi, out.W_lo, out.W_rad);
    const bool dropout = c_.keep != nullptr;
    out.ref = nk;
    if (nk > 0 && c_.allowed[ref_] && (!dropout || c_.keep[ref_])) out.ref = ref_;
    for (std::size_t j = 0; j < nk && out.ref == nk; ++j)
      if (c_.allowed[j] && (!dropout || c_.keep[j])) out.ref = j;
    mpfi_set_ui(c.v, 0);
    if (out.ref < nk) {
      dot_dv(dO, out.ref, nk, c.v);
      if (dropout) mpfi_mul_q(c.v, c.v, c_.var->keep_factor);
    }
    mpfi_set_ui(Dp.v, 0);
    for (std::size_t j = 0; j < nk; ++j) {
      if (!P[j]) continue;
      if (dropout && !c_.keep[j]) {
        mpfi_neg(t.v, c.v);
      } else if (out.ref == nk || j == out.ref) {
        mpfi_set_ui(t.v, 0);
      } else {
        dot_dv(dO, j, out.ref, t.v);
        if (dropout) mpfi_mul_q(t.v, t.v, c_.var->keep_factor);
      }
      mpfi_mul(t.v, t.v, P[j]->v);
      mpfi_add(Dp.v, Dp.v, t.v);
    }
    lse_cotangent(dlse, g.v);
    mpfi_mul(t.v, c.v, wsink.v);
    mpfi_sub(t.v, t.v, Dp.v);
    mpfi_add(t.v, t.v, g.v);
    enclosure_to_dd(t.v, out.base_hi, out.base_lo, out.base_rad);
    enclosure_to_dd(c.v, out.c_hi, out.c_lo, out.c_rad);
  }

  /// g = dL/d ln W: dlse, or dlse / ln 2 with the LSE in base 2; 0 without dlse.
  void lse_cotangent(const double* dlse, mpfi_ptr g) {
    mpfi_set_ui(g, 0);
    if (!dlse) return;
    mpfi_set_d(g, *dlse);
    if (c_.lse_base2) {
      mpfi_var t(prec_);
      mpfi_const_log2(t.v);
      mpfi_div(g, g, t.v);
    }
  }

  void gradients(const double* dO, const double* dlse, const row_grad_sinks& out) {
    const std::size_t nk = c_.nk, d = c_.d, dv = c_.dv;
    std::vector<std::unique_ptr<mpfi_var>> P(nk), dP(nk);
    mpfi_var W(prec_), t(prec_), u(prec_), wsink(prec_), base(prec_), g(prec_), Dp(prec_), c(prec_);
    // weights, their sum (with the sink) and the probabilities P_j = w_j / W, P_sink = w_sink / W
    probabilities(P, W.v, wsink.v);
    // delta_j = dP_j - c with dP_j = kappa_j dO·v_j.  Without dropout c = dO·v_r and delta_j is the
    // exactly summed difference dO·(v_j - v_r) (exactly 0 when the products agree); with dropout c = 0.
    const bool dropout = c_.keep != nullptr;
    const std::size_t r = ref_;
    mpfi_set_ui(c.v, 0);
    if (!dropout && nk > 0 && c_.allowed[r]) dot_dv(dO, r, c_.nk, c.v);
    mpfi_set_ui(Dp.v, 0);  // D' = sum_j P_j delta_j
    for (std::size_t j = 0; j < nk; ++j) {
      if (!P[j]) continue;
      dP[j] = std::make_unique<mpfi_var>(prec_);
      mpfi_ptr x = dP[j]->v;
      if (!dropout) {
        if (j == r) mpfi_set_ui(x, 0);
        else dot_dv(dO, j, r, x);
      } else if (c_.keep[j]) {
        dot_dv(dO, j, c_.nk, x);
        mpfi_mul_q(x, x, c_.var->keep_factor);
      } else {
        mpfi_set_ui(x, 0);
      }
      mpfi_mul(t.v, P[j]->v, x);
      mpfi_add(Dp.v, Dp.v, t.v);
    }
    // g = dLSE (in natural-log units), base = c P_sink - D' + g:  dS_j = P_j (delta_j + base);
    // the sink's dS = P_sink (g - D) with D = c (1 - P_sink) + D'.
    lse_cotangent(dlse, g.v);
    mpfi_mul(base.v, c.v, wsink.v);
    mpfi_sub(base.v, base.v, Dp.v);
    mpfi_add(base.v, base.v, g.v);
    if (out.dsink) {
      mpfi_ui_sub(t.v, 1, wsink.v);
      mpfi_mul(t.v, t.v, c.v);
      mpfi_add(t.v, t.v, Dp.v);
      mpfi_sub(t.v, g.v, t.v);
      mpfi_mul(out.dsink, wsink.v, t.v);
    }
    std::vector<std::unique_ptr<mpfi_var>> dq(d);
    for (std::size_t l = 0; l < d; ++l) {
      dq[l] = std::make_unique<mpfi_var>(prec_);
      mpfi_set_ui(dq[l]->v, 0);
    }
    for (std::size_t j = 0; j < nk; ++j) {
      if (!P[j]) continue;
      // dS_j, then dU_j = dS_j (1 - t_j^2) with softcap, times the scale
      mpfi_add(u.v, dP[j]->v, base.v);
      mpfi_mul(u.v, u.v, P[j]->v);
      if (out.ds) mpfi_set(out.ds[j], u.v);
      if (keep_tanh_) {
        mpfi_sqr(t.v, th_[j]->v);
        mpfi_ui_sub(t.v, 1, t.v);
        mpfi_mul(u.v, u.v, t.v);
      }
      for (std::size_t l = 0; l < d; ++l) {  // dq += dU_j k_j (the scale once at the end)
        mpfi_mul_d(t.v, u.v, c_.K[j * d + l]);
        mpfi_add(dq[l]->v, dq[l]->v, t.v);
      }
      if (!out.dk) continue;     // dq only (a row escalated alone)
      mpfi_mul(u.v, u.v, s_.v);  // s dU_j
      for (std::size_t l = 0; l < d; ++l) {  // dk_j += s dU_j q
        mpfi_mul_d(t.v, u.v, c_.q[l]);
        mpfi_add(out.dk[j * d + l], out.dk[j * d + l], t.v);
      }
      if (dropout && !c_.keep[j]) continue;
      mpfi_set(u.v, P[j]->v);
      if (dropout) mpfi_mul_q(u.v, u.v, c_.var->keep_factor);
      for (std::size_t k = 0; k < dv; ++k) {  // dv_j += P_j kappa_j dO
        mpfi_mul_d(t.v, u.v, dO[k]);
        mpfi_add(out.dv[j * dv + k], out.dv[j * dv + k], t.v);
      }
    }
    for (std::size_t l = 0; l < d; ++l) {
      mpfi_mul(t.v, dq[l]->v, s_.v);
      mpfi_add(out.dq[l], out.dq[l], t.v);
    }
  }

 private:
  /// The exact dO·v_j - dO·v_r (r == nk: dO·v_j) as an interval in `out` (products exact at 106 bits,
  /// one correctly rounded sum each way).
  void dot_dv(const double* dO, std::size_t j, std::size_t r, mpfi_ptr out) {
    const std::size_t dv = c_.dv;
    for (std::size_t k = 0; k < dv; ++k) {
      mpfr_set_d(store_[k]->v, dO[k], MPFR_RNDN);
      mpfr_mul_d(store_[k]->v, store_[k]->v, c_.V[j * dv + k], MPFR_RNDN);  // exact
      if (r < c_.nk) {
        mpfr_set_d(store_[dv + k]->v, dO[k], MPFR_RNDN);
        mpfr_mul_d(store_[dv + k]->v, store_[dv + k]->v, -c_.V[r * dv + k], MPFR_RNDN);  // exact
      }
    }
    const std::size_t terms = r < c_.nk ? 2 * dv : dv;
    mpfr_sum(lo_.v, ptrs_.data(), terms, MPFR_RNDD);
    mpfr_sum(hi_.v, ptrs_.data(), terms, MPFR_RNDU);
    mpfi_interv_fr(out, lo_.v, hi_.v);
  }

  bool softcapped() const { return c_.var && c_.var->has_softcap; }

  /// [hi + lo - rad, hi + lo + rad], outward.
  void ball_interval(double hi, double lo, double rad, mpfi_ptr out) {
    mpfi_interv_d(out, -rad, rad);
    mpfi_add_d(out, out, hi);
    mpfi_add_d(out, out, lo);
  }

  /// The exact score x_j of key j (scale, softcap, ALiBi, bias) as an interval; with a softcap
  /// also tanh(s q·k_j / C) in `th`.
  void exact_score(std::size_t j, mpfi_ptr x, mpfi_ptr th) {
    dot_difference(j, c_.nk, x);
    mpfi_mul(x, x, s_.v);
    if (softcapped()) {
      mpfi_var C(prec_);
      mpfi_set_q(C.v, c_.var->softcap);
      mpfi_div(x, x, C.v);
      mpfi_tanh(th, x);
      mpfi_mul(x, th, C.v);
    }
    if (has_additive(c_)) {
      additive_term(c_, j, a_.v);
      mpfi_add(x, x, a_.v);
    }
  }

  std::size_t approx_reference() const {
    std::size_t best = c_.nk;
    double bv = -inf;
    for (std::size_t j = 0; j < c_.nk; ++j) {
      if (!c_.allowed[j]) continue;
      const double v = approx_score(c_, j);
      if (best == c_.nk || v > bv || std::isnan(bv)) {
        best = j;
        bv = v;
      }
    }
    return best;
  }

  mpfi_ptr zvar(std::size_t j) {
    if (!z_[j]) z_[j] = std::make_unique<mpfi_var>(prec_);
    return z_[j]->v;
  }

  /// The exact dot product q·k_j - q·k_r (r == nk: q·k_j) as an interval in `out`.
  void dot_difference(std::size_t j, std::size_t r, mpfi_ptr out) {
    const std::size_t d = c_.d;
    for (std::size_t l = 0; l < d; ++l) {
      mpfr_set_d(store_[l]->v, c_.q[l], MPFR_RNDN);
      mpfr_mul_d(store_[l]->v, store_[l]->v, c_.K[j * d + l], MPFR_RNDN);  // exact (106 bits)
      if (r < c_.nk) {
        mpfr_set_d(store_[d + l]->v, c_.q[l], MPFR_RNDN);
        mpfr_mul_d(store_[d + l]->v, store_[d + l]->v, -c_.K[r * d + l], MPFR_RNDN);  // exact
      }
    }
    const std::size_t terms = r < c_.nk ? 2 * d : d;
    mpfr_sum(lo_.v, ptrs_.data(), terms, MPFR_RNDD);
    mpfr_sum(hi_.v, ptrs_.data(), terms, MPFR_RNDU);
    mpfi_interv_fr(out, lo_.v, hi_.v);
  }

  // Without softcap: z_j = s (q·k_j - q·k_r) + (a_j - a_r) from an exactly summed difference
  // (no cancellation however large the scores), S = s q·k_r + a_r.
  void difference_scores(std::size_t r) {
    if (has_additive(c_)) additive_term(c_, r, ar_.v);
    for (std::size_t j = 0; j < c_.nk; ++j) {
      if (!c_.allowed[j]) continue;
      mpfi_ptr z = zvar(j);
      if (j == r) {
        mpfi_set_ui(z, 0);
        continue;
      }
      dot_difference(j, r, z);
      mpfi_mul(z, z, s_.v);
      if (has_additive(c_)) {
        additive_term(c_, j, a_.v);
        mpfi_sub(a_.v, a_.v, ar_.v);
        mpfi_add(z, z, a_.v);
      }
    }
    dot_difference(r, c_.nk, S_.v);
    mpfi_mul(S_.v, S_.v, s_.v);
    if (has_additive(c_)) mpfi_add(S_.v, S_.v, ar_.v);
  }

  // With softcap: x_j = C tanh(s q·k_j / C) + a_j, bounded by C + |a_j|; z_j = x_j - x_r, S = x_r.
  void softcap_scores(std::size_t r) {
    mpfi_var C(prec_);
    mpfi_set_q(C.v, c_.var->softcap);
    for (std::size_t j = 0; j < c_.nk; ++j) {
      if (!c_.allowed[j]) continue;
      mpfi_ptr x = zvar(j);
      dot_difference(j, c_.nk, x);
      mpfi_mul(x, x, s_.v);
      mpfi_div(x, x, C.v);
      mpfi_tanh(x, x);
      if (keep_tanh_) {
        if (!th_[j]) th_[j] = std::make_unique<mpfi_var>(prec_);
        mpfi_set(th_[j]->v, x);
      }
      mpfi_mul(x, x, C.v);
      if (has_additive(c_)) {
        additive_term(c_, j, a_.v);
        mpfi_add(x, x, a_.v);
      }
    }
    mpfi_set(S_.v, z_[r]->v);
    for (std::size_t j = 0; j < c_.nk; ++j)
      if (c_.allowed[j]) mpfi_sub(z_[j]->v, z_[j]->v, S_.v);
  }

  // If another key has a clearly larger exact score, the caller recomputes with it as the
  // reference (so no exponent is large and positive).
  std::size_t largest_midpoint(std::size_t ref) {
    std::size_t best = ref;
    mpfr_var m(prec_), bm(prec_);
    mpfr_set_ui(bm.v, 0, MPFR_RNDN);
    for (std::size_t j = 0; j < c_.nk; ++j) {
      if (!c_.allowed[j] || j == ref) continue;
      mpfi_mid(m.v, z_[j]->v);
      if (mpfr_cmp(m.v, bm.v) > 0) {
        mpfr_set(bm.v, m.v, MPFR_RNDN);
        best = j;
      }
    }
    return best;
  }

  // A sink larger than every score becomes the shift: z_j -= (sink - S), S = sink.
  void shift_to_sink_if_larger() {
    if (!c_.has_sink) return;
    mpfi_var t(prec_);
    mpfr_var m(prec_);
    mpfi_d_sub(t.v, c_.sink, S_.v);
    mpfi_mid(m.v, t.v);
    if (mpfr_sgn(m.v) <= 0) return;
    for (std::size_t j = 0; j < c_.nk; ++j)
      if (c_.allowed[j]) mpfi_sub(z_[j]->v, z_[j]->v, t.v);
    mpfi_set_d(S_.v, c_.sink);
  }

  const mpfi_row_ctx& c_;
  mpfr_prec_t prec_;
  std::vector<std::unique_ptr<mpfr_var>> store_;
  std::vector<mpfr_ptr> ptrs_;
  mpfr_var lo_, hi_;
  std::vector<std::unique_ptr<mpfi_var>> z_;
  mpfi_var s_, a_, ar_, S_;  // scale, additive terms, the shift
  bool keep_tanh_ = false;   // backward with softcap: keep t_j = tanh(s q·k_j / C)
  std::vector<std::unique_ptr<mpfi_var>> th_;
  std::size_t ref_ = 0;      // the reference key of the scores (z_ref = 0 without a sink shift)
};

}  // namespace

// Encloses o_k for k in `ks` at `prec` bits.  out[idx] receives the enclosure of o_{ks[idx]}.
void mpfi_row(const mpfi_row_ctx& c, const std::vector<std::size_t>& ks, mpfr_prec_t prec, std::vector<mpfi_var*>& out) {
  row_enclosure r(c, prec);
  r.scores();
  r.outputs(ks, out);
}

// The backward contributions of one row at `prec` bits (P15).
void mpfi_row_backward(const mpfi_row_ctx& c, const double* dO, const double* dlse, mpfr_prec_t prec,
                       const row_grad_sinks& out) {
  row_enclosure r(c, prec);
  r.scores();
  r.gradients(dO, dlse, out);
}

// The contributions of one row to the dK, dV columns of `keys` at `prec` bits (P15, escalation 2).
void mpfi_key_columns(const mpfi_row_ctx& c, const row_summary& rs, const double* dO, const std::vector<std::size_t>& keys,
                      mpfr_prec_t prec, mpfi_ptr* const* dk, mpfi_ptr* const* dv) {
  row_enclosure r(c, prec);
  r.key_columns(rs, dO, keys, dk, dv);
}

// The row's summary for the key columns from MPFI at `prec` bits (P15, escalation 2).
void mpfi_row_summary(const mpfi_row_ctx& c, const double* dO, const double* dlse, mpfr_prec_t prec, row_summary& out) {
  row_enclosure r(c, prec);
  r.scores();
  r.summary(dO, dlse, out);
}

// Fills t_hi, t_lo, t_rad from an MPFI enclosure: |o - (hi + lo)| <= rad.
void enclosure_to_dd(mpfi_srcptr o, double& hi, double& lo, double& rad) {
  const mpfr_prec_t p = mpfi_get_prec(o) + 2400;
  mpfr_var mid(mpfi_get_prec(o)), a(p), e(p);
  mpfi_mid(mid.v, o);
  hi = mpfr_get_d(mid.v, MPFR_RNDN);
  if (!std::isfinite(hi)) {
    lo = 0;
    rad = inf;
    return;
  }
  mpfr_sub_d(a.v, mid.v, hi, MPFR_RNDN);  // exact at p bits
  lo = mpfr_get_d(a.v, MPFR_RNDN);
  rad = 0;
  for (int side = 0; side < 2; ++side) {
    if (side == 0) mpfi_get_left(e.v, o);
    else mpfi_get_right(e.v, o);
    // Exact for endpoints within 2400 bits of hi; a nonzero ternary value (an endpoint far
    // beyond binary64's range) gives no radius rather than a rounded one.
    if (mpfr_sub_d(e.v, e.v, hi, MPFR_RNDN) != 0 || mpfr_sub_d(e.v, e.v, lo, MPFR_RNDN) != 0) {
      rad = inf;
      return;
    }
    mpfr_abs(e.v, e.v, MPFR_RNDN);
    rad = std::max(rad, mpfr_get_d(e.v, MPFR_RNDU));
  }
}

}  // namespace attncert::oracle::internal
