// Tests of oracle/backward.hpp: every gradient of run_oracle_backward (dQ, dK, dV, dBias, dSink) of
// every variant against an independent reference written straight from the chain rule in MPFR at
// 1024 bits.  Soundness: each enclosure contains the 1024-bit value, and each reference is its
// correct rounding to the target.  Completeness: every element decided, exact zeros where the
// exact value is 0 by structure (identical keys and values, keys no query attends, fully masked
// rows, -inf bias entries).  Negative controls: references with a deliberate mistake disagree.
#define BOOST_TEST_MODULE oracle_backward
#include <mpfr.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../support.hpp"
#include "attncert/number/exp_batch.hpp"
#include "attncert/number/traits.hpp"
#include "attncert/oracle/backward.hpp"

using namespace attncert;
using namespace attncert::oracle;

namespace {

constexpr mpfr_prec_t P = 1024;  // the reference's precision
// The reference's resolution: 2^-1000 times the sum of the magnitudes of an element's terms.  The
// 1024-bit reference errs by less than 2^-1005 of those magnitudes: the scores (|x| < 2^10 here)
// carry an absolute error below 2^-1013, so each weight a relative one below 2^-1011, and the few
// roundings after it (D, dS, the sums) stay below 2^-1005.  2^-900 would be too coarse: in the
// tiny-weights case dq and dk of the largest key are ~2^-880 of their terms (an exact cancellation
// of P_0 (dP_0 − D)), and at 2^-900 their binary64 rounding could not be judged.
constexpr long rel_exp = -1000;

/// An MPFR number at P bits.
struct mp {
  mpfr_t v;
  mp() {
    mpfr_init2(v, P);
    mpfr_set_zero(v, 1);
  }
  mp(const mp& o) : mp() { mpfr_set(v, o.v, MPFR_RNDN); }
  mp& operator=(const mp& o) {
    mpfr_set(v, o.v, MPFR_RNDN);
    return *this;
  }
  ~mp() { mpfr_clear(v); }
};

/// An exact sum and the sum of the magnitudes of its terms.
struct acc {
  mp v, m;
  void add(mpfr_srcptr x, mpfr_srcptr mag) {
    mpfr_add(v.v, v.v, x, MPFR_RNDN);
    mpfr_add(m.v, m.v, mag, MPFR_RNDN);
  }
  /// v += x·y, m += xm·|y|.
  void add_mul(mpfr_srcptr x, mpfr_srcptr xm, double y) {
    mp t;
    mpfr_mul_d(t.v, x, y, MPFR_RNDN);
    mpfr_add(v.v, v.v, t.v, MPFR_RNDN);
    mpfr_mul_d(t.v, xm, std::fabs(y), MPFR_RNDN);
    mpfr_add(m.v, m.v, t.v, MPFR_RNDN);
  }
};

/// "50", "1/8", "0.25": the exact value (at P bits; every text used here is exact at P bits).
mp exact_text(const std::string& s) {
  mp x;
  const auto slash = s.find('/');
  if (slash == std::string::npos) {
    mpfr_set_str(x.v, s.c_str(), 10, MPFR_RNDN);
  } else {
    mp den;
    mpfr_set_str(x.v, s.substr(0, slash).c_str(), 10, MPFR_RNDN);
    mpfr_set_str(den.v, s.substr(slash + 1).c_str(), 10, MPFR_RNDN);
    mpfr_div(x.v, x.v, den.v, MPFR_RNDN);
  }
  return x;
}

// Independent rounding: MPFR's own, with the format's exponent range and subnormals.
double ref_round(mpfr_srcptr x, target_format t) {
  const int p = target_precision(t), emin = target_emin(t);
  const int emax = t == target_format::binary64 ? 1024 : (t == target_format::binary16 ? 16 : 128);
  const mpfr_exp_t old_min = mpfr_get_emin(), old_max = mpfr_get_emax();
  mpfr_set_emin(emin - p + 2);  // MPFR exponents: x = 0.1b * 2^e
  mpfr_set_emax(emax);
  mpfr_t y;
  mpfr_init2(y, p);
  int inex = mpfr_set(y, x, MPFR_RNDN);
  inex = mpfr_check_range(y, inex, MPFR_RNDN);
  mpfr_subnormalize(y, inex, MPFR_RNDN);
  const double r = mpfr_get_d(y, MPFR_RNDN);  // exact
  mpfr_clear(y);
  mpfr_set_emin(old_min);
  mpfr_set_emax(old_max);
  return r;
}

std::string text(mpfr_srcptr x) {
  char buf[96];
  mpfr_snprintf(buf, sizeof buf, "%.25Re", x);
  return buf;
}

// ---- the reference -------------------------------------------------------------------------

/// Deliberate mistakes for the negative controls.
enum class mistake { none, no_D, wrong_gqa_head, no_softcap_derivative, no_keep_factor };

struct grads {
  std::vector<acc> dq, dk, dv, dbias, dsink;
};

struct ref_setup {
  const oracle_request& r;
  const backward_inputs& g;
  mistake err = mistake::none;
  mp scale, cap, kf, gfac;  // s, C, 1/(1-p), 1 or 1/ln 2
  bool has_cap = false, has_drop = false;
  std::size_t group = 1;
};

bool key_allowed(const oracle_request& r, std::size_t b, std::size_t h, std::size_t i, std::size_t j) {
  const attention_variant& v = r.variant;
  const long long ii = static_cast<long long>(i), jj = static_cast<long long>(j);
  const long long diag = ii + static_cast<long long>(r.K.n) - static_cast<long long>(r.Q.n);
  if (r.mask == mask_kind::causal && jj > ii) return false;
  if (v.causal_bottom_right && jj > diag) return false;
  if (v.window_left >= 0 && jj < diag - v.window_left) return false;
  if (v.window_right >= 0 && jj > diag + v.window_right) return false;
  if (r.mask == mask_kind::explicit_mask && !r.M.at(b, h, i, j)) return false;
  if (v.has_bias && v.bias.at(b, h, i, j) == -std::numeric_limits<double>::infinity()) return false;
  return true;
}

std::size_t kv_head(const ref_setup& s, std::size_t h) {
  return s.err == mistake::wrong_gqa_head ? h % s.r.K.H : h / s.group;
}

/// One row's probabilities over its allowed keys (and the sink's), with sech²(s q·k_j / C).
struct row_weights {
  std::vector<std::size_t> keys;
  std::vector<mp> P, sech2;
  mp Ps;
};

// The score x_j = C·tanh(s q·k_j / C) − slope·|i + n_k − n_q − j| + bias_ij, with sech² of the softcap.
void score(const ref_setup& s, std::size_t b, std::size_t h, std::size_t i, std::size_t j, mp& x, mp& sech2) {
  const oracle_request& r = s.r;
  const double *q = r.Q.row(b, h, i), *k = r.K.row(b, kv_head(s, h), j);
  mp t;
  mpfr_set_zero(x.v, 1);
  for (std::size_t l = 0; l < r.Q.d; ++l) {
    mpfr_set_d(t.v, q[l], MPFR_RNDN);
    mpfr_mul_d(t.v, t.v, k[l], MPFR_RNDN);
    mpfr_add(x.v, x.v, t.v, MPFR_RNDN);
  }
  mpfr_mul(x.v, x.v, s.scale.v, MPFR_RNDN);
  mpfr_set_ui(sech2.v, 1, MPFR_RNDN);
  if (s.has_cap) {
    mpfr_div(t.v, x.v, s.cap.v, MPFR_RNDN);
    mpfr_sech(sech2.v, t.v, MPFR_RNDN);  // 1 - tanh² = sech², accurate also when tanh saturates
    mpfr_sqr(sech2.v, sech2.v, MPFR_RNDN);
    mpfr_tanh(t.v, t.v, MPFR_RNDN);
    mpfr_mul(x.v, t.v, s.cap.v, MPFR_RNDN);
  }
  const auto& slopes = r.variant.alibi_slopes;
  if (!slopes.empty()) {
    const double slope = slopes.size() == r.Q.H ? slopes[h] : slopes[b * r.Q.H + h];
    const long long dist = std::llabs(static_cast<long long>(i + r.K.n) - static_cast<long long>(r.Q.n + j));
    mpfr_set_d(t.v, slope, MPFR_RNDN);
    mpfr_mul_si(t.v, t.v, static_cast<long>(dist), MPFR_RNDN);
    mpfr_sub(x.v, x.v, t.v, MPFR_RNDN);
  }
  if (r.variant.has_bias) mpfr_add_d(x.v, x.v, r.variant.bias.at(b, h, i, j), MPFR_RNDN);
}

// Softmax over the allowed keys with the sink in the denominator; false for an unused row.
bool weights(const ref_setup& s, std::size_t b, std::size_t h, std::size_t i, row_weights& w) {
  const oracle_request& r = s.r;
  const bool sink = !r.variant.sink.empty();
  w.keys.clear();
  for (std::size_t j = 0; j < r.K.n; ++j)
    if (key_allowed(r, b, h, i, j)) w.keys.push_back(j);
  if (w.keys.empty() && !sink) return false;
  const std::size_t n = w.keys.size();
  std::vector<mp> x(n);
  w.P.assign(n, mp());
  w.sech2.assign(n, mp());
  mp m, W, t;
  if (sink) mpfr_set_d(m.v, r.variant.sink[h], MPFR_RNDN);
  for (std::size_t k = 0; k < n; ++k) {
    score(s, b, h, i, w.keys[k], x[k], w.sech2[k]);
    if ((k == 0 && !sink) || mpfr_cmp(x[k].v, m.v) > 0) mpfr_set(m.v, x[k].v, MPFR_RNDN);
  }
  for (std::size_t k = 0; k < n; ++k) {
    mpfr_sub(t.v, x[k].v, m.v, MPFR_RNDN);
    mpfr_exp(w.P[k].v, t.v, MPFR_RNDN);
    mpfr_add(W.v, W.v, w.P[k].v, MPFR_RNDN);
  }
  mpfr_set_zero(w.Ps.v, 1);
  if (sink) {
    mpfr_set_d(t.v, r.variant.sink[h], MPFR_RNDN);
    mpfr_sub(t.v, t.v, m.v, MPFR_RNDN);
    mpfr_exp(w.Ps.v, t.v, MPFR_RNDN);
    mpfr_add(W.v, W.v, w.Ps.v, MPFR_RNDN);
    mpfr_div(w.Ps.v, w.Ps.v, W.v, MPFR_RNDN);
  }
  for (auto& p : w.P) mpfr_div(p.v, p.v, W.v, MPFR_RNDN);
  return true;
}

// dP_j = κ_j dO·v_j with its magnitude κ_j Σ|dO_l v_jl|; κ_j as a number.
void row_dP(const ref_setup& s, std::size_t b, std::size_t h, std::size_t i, const double* dO, const row_weights& w,
            std::vector<mp>& kap, std::vector<mp>& dP, std::vector<mp>& dPm) {
  const oracle_request& r = s.r;
  const std::size_t n = w.keys.size();
  kap.assign(n, mp());
  dP.assign(n, mp());
  dPm.assign(n, mp());
  mp t;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t j = w.keys[k];
    const double* v = r.V.row(b, kv_head(s, h), j);
    for (std::size_t l = 0; l < r.V.d; ++l) {
      mpfr_set_d(t.v, dO[l], MPFR_RNDN);
      mpfr_mul_d(t.v, t.v, v[l], MPFR_RNDN);
      mpfr_add(dP[k].v, dP[k].v, t.v, MPFR_RNDN);
      mpfr_abs(t.v, t.v, MPFR_RNDN);
      mpfr_add(dPm[k].v, dPm[k].v, t.v, MPFR_RNDN);
    }
    mpfr_set_ui(kap[k].v, 1, MPFR_RNDN);
    if (s.has_drop) {
      if (!r.variant.dropout_keep.at(b, h, i, j)) mpfr_set_zero(kap[k].v, 1);
      else if (s.err != mistake::no_keep_factor) mpfr_set(kap[k].v, s.kf.v, MPFR_RNDN);
    }
    mpfr_mul(dP[k].v, dP[k].v, kap[k].v, MPFR_RNDN);
    mpfr_mul(dPm[k].v, dPm[k].v, kap[k].v, MPFR_RNDN);
  }
}

std::size_t bias_index(const score_bias& sb, std::size_t b, std::size_t h, std::size_t i, std::size_t j) {
  return (((sb.mb == 1 ? 0 : b) * sb.mh + (sb.mh == 1 ? 0 : h)) * sb.mq + (sb.mq == 1 ? 0 : i)) * sb.mk +
         (sb.mk == 1 ? 0 : j);
}

// The row's contributions: D = Σ P_j dP_j, dS_j = P_j (dP_j − D + g), dU_j = dS_j sech²_j, then dq,
// dk, dv, dbias, dsink (each term with its magnitude, from the magnitudes of dP, D and g).
void row_grads(const ref_setup& s, std::size_t b, std::size_t h, std::size_t i, const row_weights& w, grads& G) {
  const oracle_request& r = s.r;
  const std::size_t H = r.Q.H, nq = r.Q.n, nk = r.K.n, d = r.Q.d, dv = r.V.d, hk = kv_head(s, h);
  const std::size_t row = (b * H + h) * nq + i, unit = b * r.K.H + hk;
  const double* dO = s.g.dO.data() + row * dv;
  std::vector<mp> kap, dP, dPm;
  row_dP(s, b, h, i, dO, w, kap, dP, dPm);
  mp D, Dm, g, gm, t, dS, dSm, dU, dUm;
  for (std::size_t k = 0; k < w.keys.size(); ++k) {
    mpfr_fma(D.v, w.P[k].v, dP[k].v, D.v, MPFR_RNDN);
    mpfr_fma(Dm.v, w.P[k].v, dPm[k].v, Dm.v, MPFR_RNDN);
  }
  if (s.err == mistake::no_D) mpfr_set_zero(D.v, 1);
  if (!s.g.dLSE.empty()) {
    mpfr_set_d(g.v, s.g.dLSE[row], MPFR_RNDN);
    mpfr_mul(g.v, g.v, s.gfac.v, MPFR_RNDN);
    mpfr_abs(gm.v, g.v, MPFR_RNDN);
  }
  const double* q = r.Q.row(b, h, i);
  for (std::size_t k = 0; k < w.keys.size(); ++k) {
    const std::size_t j = w.keys[k];
    const double* kj = r.K.row(b, hk, j);
    mpfr_sub(dS.v, dP[k].v, D.v, MPFR_RNDN);
    mpfr_add(dS.v, dS.v, g.v, MPFR_RNDN);
    mpfr_mul(dS.v, dS.v, w.P[k].v, MPFR_RNDN);
    mpfr_add(dSm.v, dPm[k].v, Dm.v, MPFR_RNDN);
    mpfr_add(dSm.v, dSm.v, gm.v, MPFR_RNDN);
    mpfr_mul(dSm.v, dSm.v, w.P[k].v, MPFR_RNDN);
    const bool deriv = s.has_cap && s.err != mistake::no_softcap_derivative;
    if (deriv) mpfr_mul(dU.v, dS.v, w.sech2[k].v, MPFR_RNDN);
    else mpfr_set(dU.v, dS.v, MPFR_RNDN);
    mpfr_mul(dUm.v, dSm.v, w.sech2[k].v, MPFR_RNDN);
    mpfr_mul(dU.v, dU.v, s.scale.v, MPFR_RNDN);
    mpfr_mul(dUm.v, dUm.v, s.scale.v, MPFR_RNDN);
    mpfr_abs(dUm.v, dUm.v, MPFR_RNDN);
    for (std::size_t l = 0; l < d; ++l) {
      G.dq[row * d + l].add_mul(dU.v, dUm.v, kj[l]);
      G.dk[(unit * nk + j) * d + l].add_mul(dU.v, dUm.v, q[l]);
    }
    mpfr_mul(t.v, w.P[k].v, kap[k].v, MPFR_RNDN);
    for (std::size_t l = 0; l < dv; ++l) G.dv[(unit * nk + j) * dv + l].add_mul(t.v, t.v, dO[l]);
    if (r.variant.has_bias) G.dbias[bias_index(r.variant.bias, b, h, i, j)].add(dS.v, dSm.v);
  }
  if (!r.variant.sink.empty()) {
    mpfr_sub(t.v, g.v, D.v, MPFR_RNDN);
    mpfr_mul(t.v, t.v, w.Ps.v, MPFR_RNDN);
    mpfr_add(dSm.v, gm.v, Dm.v, MPFR_RNDN);
    mpfr_mul(dSm.v, dSm.v, w.Ps.v, MPFR_RNDN);
    G.dsink[h].add(t.v, dSm.v);
  }
}

grads reference(const oracle_request& r, const backward_inputs& g, mistake err = mistake::none) {
  ref_setup s{r, g, err, {}, {}, {}, {}, false, false, r.Q.H / r.K.H};
  if (r.scale.inv_sqrt_d) {
    mpfr_set_ui(s.scale.v, static_cast<unsigned long>(r.Q.d), MPFR_RNDN);
    mpfr_rec_sqrt(s.scale.v, s.scale.v, MPFR_RNDN);
  } else {
    s.scale = exact_text(r.scale.rational.str());
  }
  s.has_cap = r.variant.softcap.has_value();
  if (s.has_cap) s.cap = exact_text(r.variant.softcap->str());
  s.has_drop = r.variant.has_dropout;
  if (s.has_drop) {
    const mp p = exact_text(r.variant.dropout_p.str());
    mpfr_ui_sub(s.kf.v, 1, p.v, MPFR_RNDN);
    mpfr_ui_div(s.kf.v, 1, s.kf.v, MPFR_RNDN);
  }
  mpfr_set_ui(s.gfac.v, 1, MPFR_RNDN);
  if (r.lse.base2) {
    mpfr_const_log2(s.gfac.v, MPFR_RNDN);
    mpfr_ui_div(s.gfac.v, 1, s.gfac.v, MPFR_RNDN);
  }
  grads G;
  G.dq.resize(r.Q.values.size());
  G.dk.resize(r.K.values.size());
  G.dv.resize(r.V.values.size());
  if (r.variant.has_bias) G.dbias.resize(r.variant.bias.values.size());
  if (!r.variant.sink.empty()) G.dsink.resize(r.Q.H);
  row_weights w;
  for (std::size_t b = 0; b < r.Q.B; ++b)
    for (std::size_t h = 0; h < r.Q.H; ++h)
      for (std::size_t i = 0; i < r.Q.n; ++i)
        if (weights(s, b, h, i, w)) row_grads(s, b, h, i, w, G);
  return G;
}

}  // namespace

namespace {

// ---- checking a result against the reference -----------------------------------------------

const char* how_text(decided_by h) {
  switch (h) {
    case decided_by::double_double: return "double_double";
    case decided_by::mpfi: return "mpfi";
    case decided_by::faithful_only: return "faithful_only";
    case decided_by::exact_policy: return "exact_policy";
    case decided_by::ieee_nonfinite: return "ieee_nonfinite";
    default: return "padding";
  }
}

struct tally {
  std::size_t dd = 0, mpfi = 0, faithful = 0, bad = 0;
  std::size_t rounded = 0;   // reference compared with the correct rounding
  std::size_t boundary = 0;  // truth within δ of a rounding boundary (or faithful_only): bracketed only
  std::size_t zeros = 0;     // |truth| <= δ
  std::map<unsigned, std::size_t> bits;  // MPFI precision -> elements
};

std::string index_of(const gradient_tensor& t, std::size_t e) {
  std::string s = ")";
  for (std::size_t k = t.shape.size(); k-- > 0;) {
    s = std::to_string(e % t.shape[k]) + (s == ")" ? "" : ", ") + s;
    e /= t.shape[k];
  }
  return "(" + s;
}

// One element: |truth − (hi + lo)| <= rad + δ, δ = 2^-1000 · (the sum of the magnitudes of the
// element's terms), the reference's own resolution; and reference == RN_target(truth) unless the
// truth lies within δ of a rounding boundary (RN(truth − δ) != RN(truth + δ)), where the reference
// must still lie between those two.  Returns "" or what is wrong.
std::string check_element(const gradient_tensor& t, std::size_t e, const acc& a, target_format tf, tally& c) {
  const double hi = t.hi[e], lo = t.lo[e], rad = t.rad[e], ref = t.reference[e];
  const decided_by how = t.how[e];
  if (how == decided_by::double_double) ++c.dd;
  else if (how == decided_by::mpfi) ++c.mpfi, ++c.bits[t.bits_used[e]];
  else if (how == decided_by::faithful_only) ++c.faithful;
  else return std::string("decided by ") + how_text(how);
  if (!std::isfinite(hi) || !std::isfinite(lo) || !(rad >= 0) || !std::isfinite(rad)) return "enclosure not finite";
  mpfr_t err, tol, x;
  for (auto* v : {&err, &tol, &x}) mpfr_init2(*v, 2200);
  mpfr_sub_d(err, a.v.v, hi, MPFR_RNDN);
  mpfr_sub_d(err, err, lo, MPFR_RNDN);
  mpfr_abs(err, err, MPFR_RNDN);
  mpfr_mul_2si(tol, a.m.v, rel_exp, MPFR_RNDN);  // δ
  mpfr_add_d(x, tol, rad, MPFR_RNDN);
  std::string what;
  if (mpfr_cmp(err, x) > 0) what = "truth outside the enclosure";
  mpfr_abs(x, a.v.v, MPFR_RNDN);
  if (mpfr_cmp(x, tol) <= 0) ++c.zeros;  // 0 at the reference's resolution (checked where it is 0 by structure)
  mpfr_sub(x, a.v.v, tol, MPFR_RNDN);
  const double down = ref_round(x, tf);
  mpfr_add(x, a.v.v, tol, MPFR_RNDN);
  const double up = ref_round(x, tf);
  if (how == decided_by::faithful_only) {
    ++c.boundary;  // one of the two target numbers around the truth: only its enclosure is judged
  } else if (down != up) {
    ++c.boundary;
    if (what.empty() && !(down <= ref && ref <= up)) what = "reference outside [RN(truth - delta), RN(truth + delta)]";
  } else {
    ++c.rounded;
    if (what.empty() && !(ref == down)) what = "reference is not the correct rounding " + std::to_string(down);
  }
  if (!what.empty()) {
    std::ostringstream os;
    os.precision(17);
    os << what << ": truth " << text(a.v.v) << ", hi " << hi << ", lo " << lo << ", rad " << rad << ", reference "
       << ref << ", how " << how_text(how) << " at " << t.bits_used[e] << " bits";
    what = os.str();
  }
  for (auto* v : {&err, &tol, &x}) mpfr_clear(*v);
  return what;
}

// Every element of one gradient; reports the first few failures unless quiet.  Returns the failures.
std::size_t check_tensor(const std::string& where, const char* name, const gradient_tensor& t,
                         const std::vector<acc>& ref, target_format tf, tally& c, bool quiet) {
  if (t.size() != ref.size() || t.hi.size() != ref.size() || t.rad.size() != ref.size() ||
      t.how.size() != ref.size()) {
    if (!quiet) BOOST_ERROR(where << ": " << name << " has " << t.size() << " elements, expected " << ref.size());
    return 1;
  }
  std::size_t bad = 0;
  for (std::size_t e = 0; e < t.size(); ++e) {
    const std::string what = check_element(t, e, ref[e], tf, c);
    if (what.empty()) continue;
    if (!quiet && ++bad <= 4)
      BOOST_ERROR(where << " (seed " << test_seed() << "), " << name << index_of(t, e) << ": " << what);
    else if (quiet) ++bad;
  }
  c.bad += bad;
  return bad;
}

std::size_t check_all(const std::string& where, const oracle_request& r, const backward_result& res, const grads& G,
                      tally& c, bool quiet) {
  std::size_t bad = check_tensor(where, "dq", res.dq, G.dq, r.target, c, quiet);
  bad += check_tensor(where, "dk", res.dk, G.dk, r.target, c, quiet);
  bad += check_tensor(where, "dv", res.dv, G.dv, r.target, c, quiet);
  if (!quiet) {
    BOOST_TEST(res.has_dbias == r.variant.has_bias);
    BOOST_TEST(res.has_dsink == !r.variant.sink.empty());
  }
  if (res.has_dbias) bad += check_tensor(where, "dbias", res.dbias, G.dbias, r.target, c, quiet);
  if (res.has_dsink) bad += check_tensor(where, "dsink", res.dsink, G.dsink, r.target, c, quiet);
  return bad;
}

// Completeness: the summary counts agree with the elements (every element decided, by whom).
void check_summary(const std::string& where, const backward_result& res, const tally& c) {
  std::size_t mpfi = 0;
  for (const auto& pr : res.by_mpfi) mpfi += pr.second;
  const std::size_t total = c.dd + c.mpfi + c.faithful;
  BOOST_TEST(res.elements == total, where << ": " << res.elements << " elements counted, " << total << " checked");
  BOOST_TEST(res.double_double == c.dd, where);
  BOOST_TEST(mpfi == c.mpfi, where);
  BOOST_TEST(res.faithful_only == c.faithful, where);
  BOOST_TEST(res.correctly_rounded + res.faithful_only == res.elements, where);
}

struct case_result {
  backward_result res;
  grads ref;
  tally t;
};

// Runs the backward, recomputes the reference, checks every element and the summary, and says
// how the elements were decided.
case_result run_case(const std::string& name, const oracle_request& r, const backward_inputs& g, bool verbose = true) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  case_result c;
  c.res = run_oracle_backward(r, g);
  const auto t1 = clock::now();
  c.ref = reference(r, g);
  check_all(name, r, c.res, c.ref, c.t, false);
  check_summary(name, c.res, c.t);
  const auto t2 = clock::now();
  auto ms = [](clock::duration x) { return std::chrono::duration_cast<std::chrono::microseconds>(x).count() / 1000.0; };
  if (!verbose) return c;
  std::ostringstream bits;
  for (const auto& pr : c.t.bits) bits << " " << pr.first << ":" << pr.second;
  BOOST_TEST_MESSAGE(name << " [" << to_string(r.target) << "]: " << c.res.elements << " elements; double_double "
                          << c.t.dd << ", mpfi " << c.t.mpfi << " (bits" << bits.str() << "), faithful_only "
                          << c.t.faithful << "; rounding checked " << c.t.rounded << ", bracketed only " << c.t.boundary
                          << " (zeros " << c.t.zeros << "); units escalated " << c.res.units_escalated
                          << " (declined " << c.res.units_declined << "), rows escalated " << c.res.rows_escalated
                          << "; oracle " << ms(t1 - t0) << " ms, reference " << ms(t2 - t1) << " ms");
  return c;
}

/// A reference with a deliberate mistake must disagree with the result somewhere.
void expect_told_apart(const std::string& name, const oracle_request& r, const backward_inputs& g,
                       const backward_result& res, mistake m, const char* what) {
  tally c;
  const std::size_t bad = check_all(name, r, res, reference(r, g, m), c, true);
  BOOST_TEST(bad > 0u, name << ": a reference that " << what << " is not told apart");
  BOOST_TEST_MESSAGE(name << ": the reference that " << what << " disagrees on " << bad << " elements");
}

/// Element e of t is an exact zero, decided (and, with `point`, with radius 0).
void expect_exact_zero(const std::string& where, const char* name, const gradient_tensor& t, std::size_t e,
                       bool point) {
  BOOST_TEST(t.reference[e] == 0.0, where << ": " << name << index_of(t, e) << " = " << t.reference[e]);
  BOOST_TEST((t.how[e] == decided_by::double_double || t.how[e] == decided_by::mpfi),
             where << ": " << name << index_of(t, e) << " decided by " << how_text(t.how[e]));
  if (point)
    BOOST_TEST((t.hi[e] == 0.0 && t.lo[e] == 0.0 && t.rad[e] == 0.0),
               where << ": " << name << index_of(t, e) << " encloses [" << t.hi[e] << " + " << t.lo[e] << " ± "
                     << t.rad[e] << "]");
}

// ---- building requests -------------------------------------------------------------------------

struct shape {
  std::size_t B = 1, H = 1, Hkv = 1, nq = 4, nk = 4, d = 4, dv = 4;
};

tensor4 randn(std::mt19937_64& rng, std::size_t B, std::size_t H, std::size_t n, std::size_t d) {
  std::normal_distribution<double> N(0, 1);
  tensor4 t;
  t.B = B;
  t.H = H;
  t.n = n;
  t.d = d;
  t.values.resize(B * H * n * d);
  for (auto& x : t.values) x = N(rng);
  return t;
}

oracle_request make_request(std::mt19937_64& rng, const shape& s, target_format tf = target_format::binary64) {
  oracle_request r;
  r.Q = randn(rng, s.B, s.H, s.nq, s.d);
  r.K = randn(rng, s.B, s.Hkv, s.nk, s.d);
  r.V = randn(rng, s.B, s.Hkv, s.nk, s.dv);
  r.target = tf;
  r.threads = 2;
  return r;
}

backward_inputs cotangents(std::mt19937_64& rng, const oracle_request& r, bool dlse = false) {
  std::normal_distribution<double> N(0, 1);
  backward_inputs g;
  g.dO.resize(r.Q.B * r.Q.H * r.Q.n * r.V.d);
  for (auto& x : g.dO) x = N(rng);
  if (dlse) {
    g.dLSE.resize(r.Q.B * r.Q.H * r.Q.n);
    for (auto& x : g.dLSE) x = N(rng);
  }
  return g;
}

/// Keys of (b, kv head hk) that no query of the group attends.
std::vector<std::size_t> unattended_keys(const oracle_request& r, std::size_t b, std::size_t hk) {
  std::vector<std::size_t> out;
  const std::size_t group = r.Q.H / r.K.H;
  for (std::size_t j = 0; j < r.K.n; ++j) {
    bool seen = false;
    for (std::size_t h = hk * group; h < (hk + 1) * group && !seen; ++h)
      for (std::size_t i = 0; i < r.Q.n && !seen; ++i) seen = key_allowed(r, b, h, i, j);
    if (!seen) out.push_back(j);
  }
  return out;
}

}  // namespace

// ---- the cases -----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(plain_gaussian_inputs) {
  auto rng = make_rng(1);
  const auto r = make_request(rng, {2, 4, 2, 10, 12, 8, 6});
  const auto g = cotangents(rng, r);
  const auto c = run_case("plain", r, g);
  BOOST_TEST(c.res.fast_path);
  BOOST_TEST(c.t.dd > 0u, "the fast path decided no element");
  BOOST_TEST(c.t.dd >= c.res.elements / 2, "the fast path decided only " << c.t.dd << " of " << c.res.elements);
  expect_told_apart("plain", r, g, c.res, mistake::no_D, "forgets the D term");
}

BOOST_AUTO_TEST_CASE(causal_top_left) {
  auto rng = make_rng(2);
  auto r = make_request(rng, {1, 2, 2, 8, 8, 4, 4}, target_format::binary32);
  r.mask = mask_kind::causal;
  const auto g = cotangents(rng, r);
  const auto c = run_case("causal", r, g);
  BOOST_TEST(c.t.dd > 0u);
}

// GQA 4/2 with n_q != n_k, bottom-right causal and a window: keys 0 and 1 are attended by no query
// (row i sees keys [i + 2, i + 4]): their dk and dv are exact zeros with radius 0.
BOOST_AUTO_TEST_CASE(gqa_bottom_right_window) {
  auto rng = make_rng(3);
  auto r = make_request(rng, {2, 4, 2, 5, 9, 3, 5}, target_format::binary16);
  r.variant.causal_bottom_right = true;
  r.variant.window_left = 2;
  r.variant.window_right = 0;
  const auto g = cotangents(rng, r);
  const auto c = run_case("GQA", r, g);
  expect_told_apart("GQA", r, g, c.res, mistake::wrong_gqa_head, "reduces over the wrong query heads");
  std::size_t zeros = 0;
  for (std::size_t b = 0; b < r.Q.B; ++b)
    for (std::size_t hk = 0; hk < r.K.H; ++hk)
      for (std::size_t j : unattended_keys(r, b, hk)) {
        const std::size_t u = (b * r.K.H + hk) * r.K.n + j;
        for (std::size_t l = 0; l < r.Q.d; ++l) expect_exact_zero("GQA", "dk", c.res.dk, u * r.Q.d + l, true);
        for (std::size_t l = 0; l < r.V.d; ++l) expect_exact_zero("GQA", "dv", c.res.dv, u * r.V.d + l, true);
        ++zeros;
      }
  BOOST_TEST(zeros == 8u, zeros << " unattended keys");  // keys 0, 1 of 2 batches x 2 kv heads
}

BOOST_AUTO_TEST_CASE(peaked_scores_scale_50) {
  auto rng = make_rng(4);
  auto r = make_request(rng, {1, 2, 1, 6, 8, 4, 3});
  r.scale.inv_sqrt_d = false;
  r.scale.rational = attncert::number_traits<attncert::mpq_rational>::from_string("50");
  const auto g = cotangents(rng, r);
  run_case("peaked (scale 50)", r, g);
}

// v_j = v_0 + 1e-12 noise: dP_j ≈ D, dS cancels to ~1e-12 of its terms.
BOOST_AUTO_TEST_CASE(cancelling_values) {
  auto rng = make_rng(5);
  auto r = make_request(rng, {1, 1, 1, 6, 8, 4, 3});
  std::normal_distribution<double> N(0, 1);
  for (std::size_t j = 1; j < r.K.n; ++j)
    for (std::size_t l = 0; l < r.V.d; ++l) r.V.values[j * r.V.d + l] = r.V.values[l] + 1e-12 * N(rng);
  const auto g = cotangents(rng, r);
  run_case("cancelling values", r, g);
}

// All keys equal: uniform attention.  With all values equal too, dS = 0 exactly, so dq = dk = 0
// exactly; with random values, dq = s·k·Σ_j dS_j = 0 still (Σ_j dS_j = D − D), dk is not 0.
BOOST_AUTO_TEST_CASE(exactly_uniform_attention) {
  auto rng = make_rng(6);
  for (int same_v = 1; same_v >= 0; --same_v) {
    auto r = make_request(rng, {1, 2, 1, 5, 6, 3, 2});
    for (std::size_t j = 1; j < r.K.n; ++j) {
      for (std::size_t l = 0; l < r.K.d; ++l) r.K.values[j * r.K.d + l] = r.K.values[l];
      if (same_v)
        for (std::size_t l = 0; l < r.V.d; ++l) r.V.values[j * r.V.d + l] = r.V.values[l];
    }
    const auto g = cotangents(rng, r);
    const std::string name = same_v ? "uniform, identical values" : "uniform, random values";
    const auto c = run_case(name, r, g);
    for (std::size_t e = 0; e < c.res.dq.size(); ++e) expect_exact_zero(name, "dq", c.res.dq, e, false);
    if (same_v)
      for (std::size_t e = 0; e < c.res.dk.size(); ++e) expect_exact_zero(name, "dk", c.res.dk, e, false);
  }
}

// C = 0.5 with scores up to ~100: tanh saturates, sech² ~ e^-400; C = 30 with ordinary scores.
BOOST_AUTO_TEST_CASE(softcap) {
  auto rng = make_rng(7);
  auto r = make_request(rng, {1, 2, 2, 5, 6, 4, 3});
  r.scale.inv_sqrt_d = false;
  r.scale.rational = attncert::number_traits<attncert::mpq_rational>::from_string("20");
  r.variant.softcap = attncert::number_traits<attncert::mpq_rational>::from_string("0.5");
  auto g = cotangents(rng, r);
  auto c = run_case("softcap 0.5 saturated", r, g);
  expect_told_apart("softcap 0.5", r, g, c.res, mistake::no_softcap_derivative, "leaves out the tanh derivative");
  r = make_request(rng, {2, 2, 1, 5, 6, 4, 3}, target_format::bfloat16);
  r.variant.softcap = attncert::number_traits<attncert::mpq_rational>::from_string("30");
  r.mask = mask_kind::causal;
  g = cotangents(rng, r);
  c = run_case("softcap 30", r, g);
  expect_told_apart("softcap 30", r, g, c.res, mistake::no_softcap_derivative, "leaves out the tanh derivative");
}

// Sinks +15 (almost all weight on the sink) and -15 (almost none), a dLSE in natural units, and a
// row whose keys are all masked (explicit mask): with a sink it is used, P_sink = 1.
BOOST_AUTO_TEST_CASE(sink_with_dlse) {
  auto rng = make_rng(8);
  auto r = make_request(rng, {2, 2, 2, 5, 6, 4, 3});
  r.variant.sink = {15.0, -15.0};
  r.mask = mask_kind::explicit_mask;
  r.M.nq = r.Q.n;
  r.M.nk = r.K.n;
  r.M.allowed.assign(r.Q.n * r.K.n, 1);
  for (std::size_t j = 0; j < r.K.n; ++j) r.M.allowed[1 * r.K.n + j] = 0;  // row 1 fully masked
  const auto g = cotangents(rng, r, true);
  const auto c = run_case("sink +-15 with dLSE", r, g);
  for (std::size_t b = 0; b < r.Q.B; ++b)
    for (std::size_t h = 0; h < r.Q.H; ++h)
      for (std::size_t l = 0; l < r.Q.d; ++l)
        expect_exact_zero("sink", "dq", c.res.dq, ((b * r.Q.H + h) * r.Q.n + 1) * r.Q.d + l, true);
  expect_told_apart("sink", r, g, c.res, mistake::no_D, "forgets the D term");
}

BOOST_AUTO_TEST_CASE(dlse_base2) {
  auto rng = make_rng(9);
  auto r = make_request(rng, {1, 2, 2, 6, 6, 4, 3}, target_format::binary32);
  r.mask = mask_kind::causal;
  r.lse.want = true;
  r.lse.base2 = true;
  const auto g = cotangents(rng, r, true);
  const auto c = run_case("dLSE base 2", r, g);
  // the same request in natural units must give other gradients (1/ln 2 is applied)
  auto rn = r;
  rn.lse.base2 = false;
  tally t;
  BOOST_TEST(check_all("dLSE base 2 read as natural", rn, c.res, reference(rn, g), t, true) > 0u);
}

BOOST_AUTO_TEST_CASE(dropout_keep_mask) {
  auto rng = make_rng(10);
  auto r = make_request(rng, {2, 2, 2, 5, 7, 3, 4});
  r.variant.has_dropout = true;
  r.variant.dropout_p = attncert::number_traits<attncert::mpq_rational>::from_string("0.25");
  bool_mask& m = r.variant.dropout_keep;
  m.mb = r.Q.B;
  m.mh = r.Q.H;
  m.nq = r.Q.n;
  m.nk = r.K.n;
  m.allowed.resize(m.mb * m.mh * m.nq * m.nk);
  for (auto& x : m.allowed) x = static_cast<std::uint8_t>(rng() % 4 != 0);
  const auto g = cotangents(rng, r);
  const auto c = run_case("dropout 0.25", r, g);
  expect_told_apart("dropout", r, g, c.res, mistake::no_keep_factor, "forgets 1/(1 - p)");
}

// Bias (1, 1, nq, nk) broadcast over b and h (dbias sums over them), and a full (B, H, nq, nk) bias
// with -inf entries (masked keys: their dbias is an exact 0).
BOOST_AUTO_TEST_CASE(bias_broadcast_and_full) {
  auto rng = make_rng(11);
  std::normal_distribution<double> N(0, 1);
  for (int full = 0; full < 2; ++full) {
    auto r = make_request(rng, {2, 2, 2, 4, 5, 3, 3}, full ? target_format::binary64 : target_format::binary32);
    score_bias& sb = r.variant.bias;
    r.variant.has_bias = true;
    sb.mb = full ? r.Q.B : 1;
    sb.mh = full ? r.Q.H : 1;
    sb.mq = r.Q.n;
    sb.mk = r.K.n;
    sb.values.resize(sb.mb * sb.mh * sb.mq * sb.mk);
    for (auto& x : sb.values) x = N(rng);
    std::vector<std::size_t> masked;
    if (full)
      for (std::size_t e = 3; e < sb.values.size(); e += 7) {
        sb.values[e] = -std::numeric_limits<double>::infinity();
        masked.push_back(e);
      }
    const auto g = cotangents(rng, r, full == 1);
    const std::string name = full ? "bias (B,H,nq,nk) with -inf" : "bias (1,1,nq,nk)";
    const auto c = run_case(name, r, g);
    BOOST_TEST_REQUIRE(c.res.has_dbias);
    BOOST_TEST((c.res.dbias.shape == std::vector<std::size_t>{sb.mb, sb.mh, sb.mq, sb.mk}));
    for (std::size_t e : masked) expect_exact_zero(name, "dbias", c.res.dbias, e, true);
  }
}

BOOST_AUTO_TEST_CASE(alibi) {
  auto rng = make_rng(12);
  auto r = make_request(rng, {2, 2, 1, 5, 7, 4, 3}, target_format::bfloat16);
  r.variant.alibi_slopes = {0.5, 0.25};
  r.variant.causal_bottom_right = true;
  auto g = cotangents(rng, r);
  run_case("ALiBi per head", r, g);
  r.variant.alibi_slopes = {0.75, 0.125, 1.5, 0.0625};  // B·H slopes
  r.variant.causal_bottom_right = false;
  r.target = target_format::binary64;
  run_case("ALiBi per batch and head", r, g);
}

// Scores spread by 600-850 (scale 1, q_i0 = 1, k_00 = 800): the other keys' weights are between
// e^-850 and e^-600 of the largest, below 2^-900 (and below the binary64 range for most); some
// gradients of those keys are tiny normal numbers, others round to 0, and dq, dk of key 0 are exact
// cancellations down to ~e^-610 of their terms.
BOOST_AUTO_TEST_CASE(tiny_weights) {
  auto rng = make_rng(13);
  std::uniform_real_distribution<double> U(640, 850), U01(0, 1);
  std::normal_distribution<double> N(0, 1);
  auto r = make_request(rng, {1, 1, 1, 4, 8, 2, 3});
  r.scale.inv_sqrt_d = false;
  r.scale.rational = attncert::number_traits<attncert::mpq_rational>::from_string("1");
  for (std::size_t i = 0; i < r.Q.n; ++i) r.Q.values[i * 2] = 1, r.Q.values[i * 2 + 1] = 0.01 * N(rng);
  r.K.values[0] = 800;
  for (std::size_t j = 1; j < r.K.n; ++j) r.K.values[j * 2] = 800 - U(rng);
  r.K.values[2] = 800 - 600 - 20 * U01(rng);  // the nearest key: weights ~ e^-610 ~ 2^-880
  const auto g = cotangents(rng, r);
  const auto c = run_case("tiny weights", r, g);
  std::size_t tiny = 0;  // dv of the tiny keys: nonzero binary64 numbers below 2^-800
  for (std::size_t e = r.V.d; e < c.res.dv.size(); ++e)
    tiny += c.res.dv.reference[e] != 0 && std::fabs(c.res.dv.reference[e]) < 0x1p-800;
  BOOST_TEST(tiny > 0u);
}

// A fully masked row (explicit mask) with empty_rows zeros: its dq is an exact 0, it contributes
// nothing (NaN in its dO is not used), and so key 3, attended only by that row... is attended by no one.
BOOST_AUTO_TEST_CASE(fully_masked_row_zeros_policy) {
  auto rng = make_rng(14);
  auto r = make_request(rng, {1, 1, 1, 5, 6, 3, 2});
  r.empty_rows = empty_row_policy::zeros;
  r.mask = mask_kind::explicit_mask;
  r.M.nq = r.Q.n;
  r.M.nk = r.K.n;
  r.M.allowed.assign(r.Q.n * r.K.n, 1);
  for (std::size_t j = 0; j < r.K.n; ++j) r.M.allowed[2 * r.K.n + j] = 0;  // row 2: no key
  for (std::size_t i = 0; i < r.Q.n; ++i) r.M.allowed[i * r.K.n + 3] = 0;  // key 3: no query
  auto g = cotangents(rng, r);
  for (std::size_t l = 0; l < r.V.d; ++l) g.dO[2 * r.V.d + l] = std::numeric_limits<double>::quiet_NaN();
  const auto c = run_case("fully masked row", r, g);
  for (std::size_t l = 0; l < r.Q.d; ++l) expect_exact_zero("masked row", "dq", c.res.dq, 2 * r.Q.d + l, true);
  for (std::size_t l = 0; l < r.K.d; ++l) expect_exact_zero("masked key", "dk", c.res.dk, 3 * r.K.d + l, true);
  for (std::size_t l = 0; l < r.V.d; ++l) expect_exact_zero("masked key", "dv", c.res.dv, 3 * r.V.d + l, true);
}

namespace {

// A random mixture of the variants (masks, window, softcap, ALiBi, a bias of random broadcast
// shape, sink, dropout, dLSE in either base, scale, target), fully masked rows under policy zeros.
oracle_request random_request(std::mt19937_64& rng) {
  auto pick = [&rng](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const target_format targets[] = {target_format::binary64, target_format::binary32, target_format::binary16,
                                   target_format::bfloat16};
  const std::size_t B = 1 + pick(2), Hkv = 1 + pick(2), H = Hkv * (1 + pick(2));
  auto r = make_request(rng, {B, H, Hkv, 1 + pick(8), 1 + pick(10), 1 + pick(6), 1 + pick(5)}, targets[pick(4)]);
  std::normal_distribution<double> N(0, 1);
  r.empty_rows = empty_row_policy::zeros;
  attention_variant& v = r.variant;
  if (pick(3) == 0) r.mask = mask_kind::causal;
  v.causal_bottom_right = pick(3) == 0;
  if (pick(3) == 0) v.window_left = static_cast<long long>(pick(4)), v.window_right = static_cast<long long>(pick(3)) - 1;
  if (pick(3) == 0) r.scale = {false, pick(2) ? mpq_rational(3) : mpq_rational(1, 2)};
  if (pick(3) == 0) v.softcap = attncert::number_traits<attncert::mpq_rational>::from_string(pick(2) ? "1" : "30");
  if (pick(3) == 0)
    for (std::size_t h = 0; h < H; ++h) v.alibi_slopes.push_back(std::ldexp(1.0, -static_cast<int>(h)));
  if ((v.has_bias = pick(3) == 0)) {
    v.bias = {pick(2) ? B : 1, pick(2) ? H : 1, pick(2) ? r.Q.n : 1, pick(2) ? r.K.n : 1, {}};
    v.bias.values.resize(v.bias.mb * v.bias.mh * v.bias.mq * v.bias.mk);
    for (auto& x : v.bias.values) x = N(rng);
  }
  if (pick(3) == 0)
    for (std::size_t h = 0; h < H; ++h) v.sink.push_back(3 * N(rng));
  if ((v.has_dropout = pick(3) == 0)) {
    v.dropout_p = attncert::number_traits<attncert::mpq_rational>::from_string(pick(2) ? "0.25" : "0.5");
    v.dropout_keep = {pick(2) ? B : 1, pick(2) ? H : 1, r.Q.n, r.K.n, {}};
    v.dropout_keep.allowed.resize(v.dropout_keep.mb * v.dropout_keep.mh * r.Q.n * r.K.n);
    for (auto& x : v.dropout_keep.allowed) x = static_cast<std::uint8_t>(pick(4) != 0);
  }
  r.lse.base2 = pick(2) == 0;
  return r;
}

std::string describe(const oracle_request& r, const backward_inputs& g) {
  const attention_variant& v = r.variant;
  std::ostringstream os;
  os << "B " << r.Q.B << ", H " << r.Q.H << "/" << r.K.H << ", nq " << r.Q.n << ", nk " << r.K.n << ", d " << r.Q.d
     << ", dv " << r.V.d << ", " << to_string(r.target) << ", scale " << (r.scale.inv_sqrt_d ? std::string("1/sqrt(d)") : r.scale.rational.str())
     << (r.mask == mask_kind::causal ? ", causal" : "") << (v.causal_bottom_right ? ", bottom-right" : "");
  if (v.window_left >= 0) os << ", window (" << v.window_left << ", " << v.window_right << ")";
  if (v.softcap) os << ", softcap " << v.softcap->str();
  if (!v.alibi_slopes.empty()) os << ", alibi";
  if (v.has_bias) os << ", bias (" << v.bias.mb << "," << v.bias.mh << "," << v.bias.mq << "," << v.bias.mk << ")";
  if (!v.sink.empty()) os << ", sink";
  if (v.has_dropout) os << ", dropout " << v.dropout_p.str();
  if (!g.dLSE.empty()) os << ", dLSE" << (r.lse.base2 ? " base 2" : "");
  return os.str();
}

}  // namespace

// The Dot2 loops' kernels (AVX-512F, AVX2: oracle/fast_common.hpp, capped with the exponential's
// by exp_batch_limit_isa) give the backward the same bits: every gradient's value and enclosure
// compared.  n_k and d_v straddle the 64-wide register blocks (a full block and a masked tail).
BOOST_AUTO_TEST_CASE(kernel_widths_give_the_same_gradients) {
  auto rng = make_rng(16);
  for (const shape s : {shape{1, 2, 1, 5, 100, 7, 70}, shape{1, 1, 1, 3, 64, 9, 64}, shape{2, 2, 2, 4, 13, 3, 5}}) {
    auto r = make_request(rng, s);
    if (s.nk == 64) r.mask = mask_kind::causal;
    const auto g = cotangents(rng, r, true);
    auto run = [&](int cap) {
      const int previous = exp_batch_limit_isa(cap);
      backward_result res = run_oracle_backward(r, g);
      exp_batch_limit_isa(previous);
      return res;
    };
    const backward_result wide = run(2), narrow = run(1);
    auto same = [](const gradient_tensor& a, const gradient_tensor& b) {
      auto bits = [](const std::vector<double>& x, const std::vector<double>& y) {
        return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0);
      };
      return bits(a.reference, b.reference) && bits(a.hi, b.hi) && bits(a.lo, b.lo) && bits(a.rad, b.rad);
    };
    BOOST_TEST(wide.double_double == narrow.double_double);
    BOOST_TEST(wide.double_double > 0u);
    BOOST_TEST(same(wide.dq, narrow.dq), "dq, n_k " << s.nk << ", d_v " << s.dv);
    BOOST_TEST(same(wide.dk, narrow.dk), "dk, n_k " << s.nk << ", d_v " << s.dv);
    BOOST_TEST(same(wide.dv, narrow.dv), "dv, n_k " << s.nk << ", d_v " << s.dv);
  }
  BOOST_TEST_MESSAGE("widest kernel here: " << exp_batch_isa());
}

BOOST_AUTO_TEST_CASE(random_variant_mixtures) {
  auto rng = make_rng(15);
  tally all;
  std::size_t elements = 0;
  for (int it = 0; it < 30; ++it) {
    const auto r = random_request(rng);
    const auto g = cotangents(rng, r, rng() % 2 == 0);
    case_result c;
    try {
      c = run_case("mixture " + std::to_string(it) + " (" + describe(r, g) + ")", r, g, false);
    } catch (const std::exception& e) {
      BOOST_ERROR("mixture " << it << " (seed " << test_seed() << "; " << describe(r, g) << "): " << e.what());
      continue;
    }
    elements += c.res.elements;
    all.dd += c.t.dd, all.mpfi += c.t.mpfi, all.faithful += c.t.faithful, all.rounded += c.t.rounded;
  }
  BOOST_TEST_MESSAGE("30 random mixtures: " << elements << " elements; double_double " << all.dd << ", mpfi "
                                            << all.mpfi << ", faithful_only " << all.faithful << "; rounding checked "
                                            << all.rounded);
}

// Rows with no key (bottom-right causal, n_q > n_k) under policy zeros while every key is attended:
// the unit's dk and dv are all decided by the fast path, and the empty rows' dq (exact zeros) must
// be decided too.  Every target: in binary64 an exact zero ball (0 + 0 ± 0) is the case where the
// decision's one-binary64-ulp widening (±2^-1074) does not round to 0.
// NOTE: on the code of this commit this case fails for binary64 with internal_error "backward: an
// unused row has an undecided dq" (decide_fast leaves the zero dq open, escalate_rows refuses it);
// kept strict on purpose.
BOOST_AUTO_TEST_CASE(fully_masked_rows_with_every_key_attended) {
  auto rng = make_rng(16);
  for (target_format tf : {target_format::binary32, target_format::binary16, target_format::bfloat16,
                           target_format::binary64}) {
    auto r = make_request(rng, {1, 2, 1, 5, 3, 3, 2}, tf);
    r.variant.causal_bottom_right = true;  // rows 0 and 1 see no key; key 0 is seen by rows 2-4
    r.empty_rows = empty_row_policy::zeros;
    const auto g = cotangents(rng, r);
    const std::string name = "empty rows, every key attended";
    const auto c = run_case(name, r, g);
    for (std::size_t h = 0; h < r.Q.H; ++h)
      for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t l = 0; l < r.Q.d; ++l)
          expect_exact_zero(name, "dq", c.res.dq, (h * r.Q.n + i) * r.Q.d + l, true);
  }
}

// ---- split by blocks of rows (run_oracle_backward_block, reduce_backward_blocks; P15 "Split by
//      blocks of rows") -------------------------------------------------------------------------

namespace {

/// Every ball of `p` (times nothing: a partial sum before the scale) encloses ref / divisor, at the
/// reference's resolution.  Returns the failures (the first few reported).
std::size_t check_partial(const std::string& where, const char* name, const partial_sums& p, const std::vector<acc>& ref,
                          mpfr_srcptr divisor) {
  if (p.hi.size() != ref.size() || p.lo.size() != ref.size() || p.rad.size() != ref.size()) {
    BOOST_ERROR(where << ": " << name << " has " << p.hi.size() << " elements, expected " << ref.size());
    return 1;
  }
  std::size_t bad = 0;
  mp x, m, err;
  for (std::size_t e = 0; e < ref.size(); ++e) {
    mpfr_div(x.v, ref[e].v.v, divisor, MPFR_RNDN);
    mpfr_div(m.v, ref[e].m.v, divisor, MPFR_RNDN);
    mpfr_abs(m.v, m.v, MPFR_RNDN);
    mpfr_mul_2si(m.v, m.v, rel_exp, MPFR_RNDN);
    mpfr_add_d(m.v, m.v, p.rad[e], MPFR_RNDU);
    mpfr_sub_d(err.v, x.v, p.hi[e], MPFR_RNDN);
    mpfr_sub_d(err.v, err.v, p.lo[e], MPFR_RNDN);
    mpfr_abs(err.v, err.v, MPFR_RNDN);
    if (!(p.rad[e] >= 0) || mpfr_cmp(err.v, m.v) > 0) {
      if (++bad <= 4)
        BOOST_ERROR(where << " (seed " << test_seed() << "): " << name << "[" << e << "] = " << p.hi[e] << " + " << p.lo[e]
                          << " ± " << p.rad[e] << " excludes the block's exact sum " << text(x.v));
    }
  }
  return bad;
}

/// The cotangents of the rows [begin, end) only: the others zero, so that the reference's dK and dV
/// are the sums over the block's rows.
backward_inputs block_cotangents(const backward_inputs& g, std::size_t dv, std::size_t begin, std::size_t end) {
  backward_inputs out = g;
  for (std::size_t r = 0; r < out.dO.size() / dv; ++r) {
    if (r >= begin && r < end) continue;
    for (std::size_t k = 0; k < dv; ++k) out.dO[r * dv + k] = 0.0;
    if (!out.dLSE.empty()) out.dLSE[r] = 0.0;
  }
  return out;
}

/// Splits the rows of r at `cuts`: each block's partial sums enclose the exact ones (the reference
/// with the other rows' cotangents zeroed), its dq rows are the whole call's, and the reduced dK and
/// dV are decided and equal the whole call's.  Returns the number of blocks.
void check_split(const std::string& name, const oracle_request& r, const backward_inputs& g,
                 const std::vector<std::size_t>& cuts) {
  const backward_result whole = run_oracle_backward(r, g);
  mp s;
  if (r.scale.inv_sqrt_d) {
    mpfr_set_ui(s.v, static_cast<unsigned long>(r.Q.d), MPFR_RNDN);
    mpfr_rec_sqrt(s.v, s.v, MPFR_RNDN);
  } else {
    s = exact_text(r.scale.rational.str());
  }
  mp one;
  mpfr_set_ui(one.v, 1, MPFR_RNDN);
  std::vector<backward_block_result> blocks;
  for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
    const std::string where = name + ", rows [" + std::to_string(cuts[c]) + ", " + std::to_string(cuts[c + 1]) + ")";
    blocks.push_back(run_oracle_backward_block(r, g, cuts[c], cuts[c + 1]));
    const backward_block_result& b = blocks.back();
    BOOST_TEST_REQUIRE(b.complete, where << ": declined: " << b.declined);
    const grads G = reference(r, block_cotangents(g, r.V.d, cuts[c], cuts[c + 1]));
    BOOST_TEST(check_partial(where, "dk", b.dk, G.dk, s.v) == 0u);
    BOOST_TEST(check_partial(where, "dv", b.dv, G.dv, one.v) == 0u);
    BOOST_TEST_REQUIRE(b.dq.size() == (cuts[c + 1] - cuts[c]) * r.Q.d);
    for (std::size_t e = 0; e < b.dq.size(); ++e)
      if (b.dq[e] != whole.dq.reference[cuts[c] * r.Q.d + e]) {
        BOOST_ERROR(where << ": dq element " << e << " is " << b.dq[e] << ", the whole call's "
                          << whole.dq.reference[cuts[c] * r.Q.d + e]);
        break;
      }
  }
  std::vector<const partial_sums*> dk, dv;
  for (const auto& b : blocks) dk.push_back(&b.dk), dv.push_back(&b.dv);
  const double scale[3] = {blocks[0].scale_hi, blocks[0].scale_lo, blocks[0].scale_rad};
  const reduced_gradient rk = reduce_backward_blocks(dk, scale, r.target), rv = reduce_backward_blocks(dv, nullptr, r.target);
  BOOST_TEST(rk.undecided == 0u, name << ": " << rk.undecided << " dk elements undecided");
  BOOST_TEST(rv.undecided == 0u, name << ": " << rv.undecided << " dv elements undecided");
  BOOST_TEST(rk.reference == whole.dk.reference, name << ": the reduced dk differs from the whole call's");
  BOOST_TEST(rv.reference == whole.dv.reference, name << ": the reduced dv differs from the whole call's");
  BOOST_TEST_MESSAGE(name << ": " << blocks.size() << " blocks, dk and dv reduced and equal to the whole call's");
}

}  // namespace

BOOST_AUTO_TEST_CASE(split_by_row_blocks_encloses_and_matches_the_whole_call) {
  auto rng = make_rng(17);
  {  // GQA 4/2, two batches, dLSE; blocks that cut inside a head and across units
    auto r = make_request(rng, {2, 4, 2, 9, 11, 6, 5});
    r.variant.causal_bottom_right = true;
    r.mask = mask_kind::causal;
    const auto g = cotangents(rng, r, true);
    check_split("gqa causal bottom-right", r, g, {0, 5, 9, 23, 40, 41, 72});
  }
  {  // binary32 target, a rational scale, a window, one block per row at the start
    auto r = make_request(rng, {1, 2, 1, 7, 7, 4, 3}, target_format::binary32);
    r.scale = {false, mpq_rational(1, 2)};
    r.variant.window_left = 2;
    r.variant.window_right = 0;
    const auto g = cotangents(rng, r);
    check_split("binary32 window scale 1/2", r, g, {0, 1, 2, 3, 14});
  }
}

// The reduction's decision rule on constructed balls: an exact binary64 tie (1 + 2^-53) is decided
// (to even) only with radius 0; with any radius, or after a ball sum (whose radius bounds the
// addition's error, P15 step A, even when it happens to be exact), it stays undecided.
BOOST_AUTO_TEST_CASE(reduce_backward_blocks_decides_only_what_the_enclosure_decides) {
  const partial_sums tie{{1.0, 1.0}, {0x1p-53, 0x1p-53}, {0.0, 0x1p-200}};
  const reduced_gradient r1 = reduce_backward_blocks({&tie}, nullptr, target_format::binary64);
  BOOST_TEST(r1.decided[0] == 1);
  BOOST_TEST(r1.reference[0] == 1.0);  // the tie rounds to even
  BOOST_TEST(r1.decided[1] == 0);      // the same tie ± 2^-200: either neighbour
  const partial_sums a{{1.0, 1.0, 3.0}, {0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}};
  const partial_sums b{{0.25, 0x1p-53, 0.0}, {0.0, 0.0, 0.0}, {0x1p-80, 0.0, std::numeric_limits<double>::infinity()}};
  const reduced_gradient r2 = reduce_backward_blocks({&a, &b}, nullptr, target_format::binary64);
  BOOST_TEST(r2.decided[0] == 1);
  BOOST_TEST(r2.reference[0] == 1.25);
  BOOST_TEST(r2.decided[1] == 0);  // 1 + 2^-53 from a sum: a radius, so undecided
  BOOST_TEST(r2.decided[2] == 0);  // an infinite radius
  BOOST_TEST(r2.undecided == 2u);
  const double half[3] = {0.5, 0.0, 0.0};
  const reduced_gradient h = reduce_backward_blocks({&a}, half, target_format::binary64);
  BOOST_TEST(h.reference[2] == 1.5);
  BOOST_TEST(h.decided[2] == 1);
  const partial_sums c{{1.0}, {0.0}, {0.0}};
  BOOST_CHECK_THROW(reduce_backward_blocks({&a, &c}, nullptr, target_format::binary64), input_error);
  BOOST_CHECK_THROW(reduce_backward_blocks({}, nullptr, target_format::binary64), input_error);
}

BOOST_AUTO_TEST_CASE(a_backward_block_declines_a_bias_and_rejects_bad_rows) {
  auto rng = make_rng(18);
  auto r = make_request(rng, {1, 1, 1, 4, 4, 2, 2});
  const auto g = cotangents(rng, r);
  BOOST_CHECK_THROW(run_oracle_backward_block(r, g, 2, 2), input_error);
  BOOST_CHECK_THROW(run_oracle_backward_block(r, g, 0, 5), input_error);
  r.variant.has_bias = true;
  r.variant.bias = {1, 1, 4, 4, std::vector<double>(16, 0.5)};
  const backward_block_result b = run_oracle_backward_block(r, g, 0, 2);
  BOOST_TEST(!b.complete);
  BOOST_TEST(b.declined.find("dBias") != std::string::npos, b.declined);
}
