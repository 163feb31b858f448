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
#include "ziv_stage.hpp"
#include "row_enclosure.hpp"

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

}  // namespace attncert::oracle::internal

namespace attncert::oracle {

scale_ball scale_binary64(const scale_spec& s, std::size_t d) {
  internal::scale_value sv;
  internal::init_scale(sv, s, d);
  return {sv.hi, sv.lo, sv.rad};
}

}  // namespace attncert::oracle

namespace attncert::oracle::internal {

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

/// The row's additive term a_j = -slope |pos - j| + bias_j as an interval (exact when prec
/// holds it; outward rounded otherwise).
void additive_term(const mpfi_row_ctx& c, std::size_t j, mpfi_ptr out) {
  mpfi_set_ui(out, 0);
  if (c.has_alibi && c.alibi_key) {
    mpfi_set_d(out, c.slope);
    mpfi_mul_d(out, out, static_cast<double>(j));  // j < 2^53: exact as a double
  } else if (c.has_alibi) {
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
  if (c.has_alibi) x += c.alibi_key ? c.slope * static_cast<double>(j) : -c.slope * std::fabs(static_cast<double>(c.pos) - static_cast<double>(j));
  if (c.bias) x += c.bias[j];
  return x;
}

row_enclosure::row_enclosure(const mpfi_row_ctx& c, mpfr_prec_t prec)
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
void row_enclosure::scores() {
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
void row_enclosure::outputs(const std::vector<std::size_t>& ks, std::vector<mpfi_var*>& out) {
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

/// The exact score x_j of key j (scale, softcap, ALiBi, bias) as an interval; with a softcap
/// also tanh(s q·k_j / C) in `th`.
void row_enclosure::exact_score(std::size_t j, mpfi_ptr x, mpfi_ptr th) {
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

std::size_t row_enclosure::approx_reference() const {
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

mpfi_ptr row_enclosure::zvar(std::size_t j) {
  if (!z_[j]) z_[j] = std::make_unique<mpfi_var>(prec_);
  return z_[j]->v;
}

/// The exact dot product q·k_j - q·k_r (r == nk: q·k_j) as an interval in `out`.
void row_enclosure::dot_difference(std::size_t j, std::size_t r, mpfi_ptr out) {
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
void row_enclosure::difference_scores(std::size_t r) {
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
void row_enclosure::softcap_scores(std::size_t r) {
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
std::size_t row_enclosure::largest_midpoint(std::size_t ref) {
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
void row_enclosure::shift_to_sink_if_larger() {
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


// Encloses o_k for k in `ks` at `prec` bits.  out[idx] receives the enclosure of o_{ks[idx]}.
void mpfi_row(const mpfi_row_ctx& c, const std::vector<std::size_t>& ks, mpfr_prec_t prec, std::vector<mpfi_var*>& out) {
  row_enclosure r(c, prec);
  r.scores();
  r.outputs(ks, out);
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
