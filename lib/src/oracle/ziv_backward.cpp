// lib/src/oracle/ziv_backward.cpp — the backward's MPFI stage (proofs/P15-oracle-backward.md): one
// row's gradient contributions, the key columns of dK / dV, and the row summary they start from, at
// one precision each (the escalation is the caller's: backward.cpp).
#include <gmp.h>
#include <mpfi.h>
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "ziv_stage.hpp"
#include "row_enclosure.hpp"

namespace attncert::oracle::internal {

/// [hi + lo - rad, hi + lo + rad], outward.
void row_enclosure::ball_interval(double hi, double lo, double rad, mpfi_ptr out) {
  mpfi_interv_d(out, -rad, rad);
  mpfi_add_d(out, out, hi);
  mpfi_add_d(out, out, lo);
}

/// The contributions of this row to dK_j and dV_j for the keys `keys` (P15, escalation 2), from
/// the fast path's row quantities `rs` (the shift m, W, c = dP_r, base) and this key's exact
/// score: dk[idx] (d intervals) += s dU_j q, dv[idx] (dv) += P_j κ_j dO.  No scores() needed.
void row_enclosure::key_columns(const row_summary& rs, const double* dO, const std::vector<std::size_t>& keys, mpfi_ptr* const* dk,
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
void row_enclosure::probabilities(std::vector<std::unique_ptr<mpfi_var>>& P, mpfi_ptr W, mpfi_ptr wsink) {
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
void row_enclosure::summary(const double* dO, const double* dlse, row_summary& out) {
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
void row_enclosure::lse_cotangent(const double* dlse, mpfi_ptr g) {
  mpfi_set_ui(g, 0);
  if (!dlse) return;
  mpfi_set_d(g, *dlse);
  if (c_.lse_base2) {
    mpfi_var t(prec_);
    mpfi_const_log2(t.v);
    mpfi_div(g, g, t.v);
  }
}

void row_enclosure::gradients(const double* dO, const double* dlse, const row_grad_sinks& out) {
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

/// The exact dO·v_j - dO·v_r (r == nk: dO·v_j) as an interval in `out` (products exact at 106 bits,
/// one correctly rounded sum each way).
void row_enclosure::dot_dv(const double* dO, std::size_t j, std::size_t r, mpfi_ptr out) {
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

}  // namespace attncert::oracle::internal
