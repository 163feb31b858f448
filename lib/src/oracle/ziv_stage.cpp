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

#include "attncert/error.hpp"
#include "attncert/number/double_double.hpp"
#include "attncert/number/emulated.hpp"
#include "attncert/number/traits.hpp"
#include "internal.hpp"

namespace attncert::oracle::internal {

void init_scale(scale_value& sv, const scale_spec& spec, std::size_t d) {
  sv.inv_sqrt_d = spec.inv_sqrt_d;
  sv.d = static_cast<unsigned>(d);
  if (!spec.inv_sqrt_d) {
    const mpq_rational r = number_traits<mpq_rational>::from_string(spec.rational);
    mpq_set(sv.q, r.backend().data());
    if (mpz_sizeinbase(mpq_numref(sv.q), 2) > 4000 || mpz_sizeinbase(mpq_denref(sv.q), 2) > 4000)
      throw input_error("--scale '" + spec.rational + "' is too large or too small (more than 4000 bits)");
  }
  mpfi_var s(400);
  sv.enclose(s.v);
  mpfr_var mid(400), a(2600), t(2600);
  mpfi_mid(mid.v, s.v);
  sv.sign = mpfr_sgn(mid.v) > 0 ? 1 : (mpfr_sgn(mid.v) < 0 ? -1 : 0);
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
    mpfr_sub_d(t.v, t.v, sv.hi, MPFR_RNDN);
    mpfr_sub_d(t.v, t.v, sv.lo, MPFR_RNDN);
    mpfr_abs(t.v, t.v, MPFR_RNDN);
    rad = std::max(rad, mpfr_get_d(t.v, MPFR_RNDU));
  }
  sv.rad = rad;
  const dd n = two_sum(sv.hi, sv.lo);
  if (n.hi != sv.hi) sv.rad = inf;  // not normalized (cannot happen for RN); decline fast path
}

// Encloses o_k for k in `ks` at `prec` bits.  out[idx] receives the enclosure of o_{ks[idx]}.
void mpfi_row(const mpfi_row_ctx& c, const std::vector<std::size_t>& ks, mpfr_prec_t prec, std::vector<mpfi_var*>& out) {
  const std::size_t d = c.d;
  // approximate reference key: argmax of sign(s) q·k_j in binary64 (any choice is exact)
  auto approx_key = [&]() {
    std::size_t best = c.nk;
    double bv = -inf;
    for (std::size_t j = 0; j < c.nk; ++j) {
      if (!c.allowed[j]) continue;
      double acc = 0;
      for (std::size_t l = 0; l < d; ++l) acc += c.q[l] * c.K[j * d + l];
      const double v = c.scale->sign * acc;
      if (best == c.nk || v > bv || std::isnan(bv)) {
        best = j;
        bv = v;
      }
    }
    return best;
  };
  std::size_t ref = approx_key();
  std::vector<std::unique_ptr<mpfr_var>> store;
  store.reserve(2 * d);
  for (std::size_t l = 0; l < 2 * d; ++l) store.push_back(std::make_unique<mpfr_var>(106));
  std::vector<mpfr_ptr> ptrs(2 * d);
  for (std::size_t l = 0; l < 2 * d; ++l) ptrs[l] = store[l]->v;
  mpfr_var lo(prec), hi(prec);
  std::vector<std::unique_ptr<mpfi_var>> D(c.nk);
  auto differences = [&](std::size_t r) {
    for (std::size_t l = 0; l < d; ++l) {
      mpfr_set_d(store[d + l]->v, c.q[l], MPFR_RNDN);
      mpfr_mul_d(store[d + l]->v, store[d + l]->v, -c.K[r * d + l], MPFR_RNDN);  // exact (106 bits)
    }
    for (std::size_t j = 0; j < c.nk; ++j) {
      if (!c.allowed[j]) continue;
      if (!D[j]) D[j] = std::make_unique<mpfi_var>(prec);
      if (j == r) {
        mpfi_set_ui(D[j]->v, 0);
        continue;
      }
      for (std::size_t l = 0; l < d; ++l) {
        mpfr_set_d(store[l]->v, c.q[l], MPFR_RNDN);
        mpfr_mul_d(store[l]->v, store[l]->v, c.K[j * d + l], MPFR_RNDN);  // exact
      }
      mpfr_sum(lo.v, ptrs.data(), 2 * d, MPFR_RNDD);
      mpfr_sum(hi.v, ptrs.data(), 2 * d, MPFR_RNDU);
      mpfi_interv_fr(D[j]->v, lo.v, hi.v);
    }
  };
  differences(ref);
  // If another key has a larger exact score, shift by that one instead (so no exponent is large
  // and positive): the exact differences decide it up to the tiny width of D.
  {
    std::size_t best = ref;
    mpfr_var m(prec), bm(prec);
    mpfr_set_ui(bm.v, 0, MPFR_RNDN);
    for (std::size_t j = 0; j < c.nk; ++j) {
      if (!c.allowed[j] || j == ref) continue;
      mpfi_mid(m.v, D[j]->v);
      if (c.scale->sign < 0) mpfr_neg(m.v, m.v, MPFR_RNDN);
      if (mpfr_cmp(m.v, bm.v) > 0) {
        mpfr_set(bm.v, m.v, MPFR_RNDN);
        best = j;
      }
    }
    if (best != ref) {
      ref = best;
      differences(ref);
    }
  }
  mpfi_var s(prec), z(prec), w(prec), W(prec), t(prec);
  c.scale->enclose(s.v);
  mpfi_set_ui(W.v, 0);
  std::vector<std::unique_ptr<mpfi_var>> N;
  for (std::size_t idx = 0; idx < ks.size(); ++idx) {
    N.push_back(std::make_unique<mpfi_var>(prec));
    mpfi_set_ui(N.back()->v, 0);
  }
  for (std::size_t j = 0; j < c.nk; ++j) {
    if (!c.allowed[j]) continue;
    mpfi_mul(z.v, s.v, D[j]->v);
    mpfi_exp(w.v, z.v);
    mpfi_add(W.v, W.v, w.v);
    for (std::size_t idx = 0; idx < ks.size(); ++idx) {
      mpfi_mul_d(t.v, w.v, c.V[j * c.dv + ks[idx]]);
      mpfi_add(N[idx]->v, N[idx]->v, t.v);
    }
  }
  for (std::size_t idx = 0; idx < ks.size(); ++idx) {
    mpfi_set_prec(out[idx]->v, prec);
    mpfi_div(out[idx]->v, N[idx]->v, W.v);
  }
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
    mpfr_sub_d(e.v, e.v, hi, MPFR_RNDN);  // exact
    mpfr_sub_d(e.v, e.v, lo, MPFR_RNDN);  // exact
    mpfr_abs(e.v, e.v, MPFR_RNDN);
    rad = std::max(rad, mpfr_get_d(e.v, MPFR_RNDU));
  }
}

}  // namespace attncert::oracle::internal
