// The objects of one attention layer enclosed in binary64 (enclosure tier).  Each bound is
// stated where it is computed; proofs/P16-fast-singular-values.md, part A, derives them.
// Arithmetic: round to nearest; a bound is moved outward by one ulp after every operation
// (up/down below), which covers that operation's rounding error, subnormal results included.
#include "attncert/attention/binary64_enclosure.hpp"

#include <mpfr.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attncert/error.hpp"
#include "attncert/deadline.hpp"
#include "attncert/number/outward.hpp"
#include "attncert/number/double_double.hpp"
#include "attncert/number/exp_batch.hpp"
#include "attncert/number/parallel.hpp"
#include "attncert/number/dot2_loop.hpp"

namespace attncert {

namespace {

constexpr auto up = next_up;
constexpr auto down = next_down;

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double unit = 0x1p-53;
constexpr double eta = 0x1p-1074;

// Upper bound of the Euclidean norm of row i of M.
double row_norm_up(const matrix<double>& M, Eigen::Index i) {
  double s = 0;
  for (Eigen::Index k = 0; k < M.cols(); ++k) s = up(s + up(M(i, k) * M(i, k)));
  return up(std::sqrt(s));
}

// ĉ, a binary64 number near c, and δc ≥ |ĉ − c|.
//  - c rational: ĉ = RN(c) (possibly rounded twice: 53 bits in MPFR, whose exponent range is
//    wider, then into binary64's subnormals), and δc = |c − ĉ| computed exactly in ℚ and rounded
//    up.  u·|ĉ| would not bound a subnormal ĉ's error, and MPFR's inexact flag of the first
//    rounding says nothing of the second.
//  - c = 1/√d (d < 2^53): MPFR's correctly rounded reciprocal square root, a normal number
//    (≥ 2^-27), so δc ≤ u|ĉ|, and 0 when MPFR reports it exact.
//  - c = 1: exact.
std::pair<double, double> scale_binary64(const score_scale& c, Eigen::Index d) {
  mpfr_t x;
  mpfr_init2(x, 53);
  int inexact = 0;
  if (c.rational) {
    mpfr_set_q(x, c.rational->backend().data(), MPFR_RNDN);
  } else if (c.inv_sqrt_d) {
    mpfr_set_si(x, static_cast<long>(d), MPFR_RNDN);  // exact for d < 2^53
    inexact = mpfr_rec_sqrt(x, x, MPFR_RNDN);
  } else {
    mpfr_set_si(x, 1, MPFR_RNDN);
  }
  const double v = mpfr_get_d(x, MPFR_RNDN);
  if (!(v != 0.0) || !std::isfinite(v)) {
    mpfr_clear(x);
    throw input_error("the scale is zero or outside binary64's range");
  }
  double dc = inexact ? up(std::fabs(v) * unit) : 0.0;
  if (c.rational) {
    mpq_t diff;
    mpq_init(diff);
    mpq_set_d(diff, v);  // exact: v is finite
    mpq_sub(diff, c.rational->backend().data(), diff);
    mpq_abs(diff, diff);
    mpfr_set_q(x, diff, MPFR_RNDU);   // ≥ |c − ĉ|
    dc = mpfr_get_d(x, MPFR_RNDU);    // ≥ that, subnormal or not (0 only when c = ĉ)
    mpq_clear(diff);
  }
  mpfr_clear(x);
  return {v, dc};
}

}  // namespace

std::optional<matrix<double>> exactly_binary64(const matrix<mpq_rational>& M) {
  matrix<double> out(M.rows(), M.cols());
  mpfr_t x;
  mpfr_init2(x, 53);
  bool ok = true;
  for (Eigen::Index j = 0; j < M.cols() && ok; ++j)
    for (Eigen::Index i = 0; i < M.rows() && ok; ++i) {
      mpfr_clear_flags();
      const int inexact = mpfr_set_q(x, M(i, j).backend().data(), MPFR_RNDN);
      const double v = mpfr_get_d(x, MPFR_RNDN);
      ok = inexact == 0 && std::isfinite(v) && mpfr_underflow_p() == 0 && mpfr_overflow_p() == 0 &&
           mpfr_cmp_d(x, v) == 0;
      out(i, j) = v;
    }
  mpfr_clear(x);
  if (!ok) return std::nullopt;
  return out;
}

binary64_enclosure enclose_scores_binary64(const matrix<double>& Q, const matrix<double>& K, const score_scale& c) {
  if (Q.cols() != K.cols()) throw input_error("Q and K have different widths");
  const auto [ch, dc] = scale_binary64(c, Q.cols());
  const Eigen::Index nq = Q.rows(), nk = K.rows(), d = Q.cols();
  // t_ij = q_i·k_j by Dot2 (Ogita–Rump–Oishi; the oracle's loop and step 1, proofs/P11): p + e =
  // TwoProd, (s, σ) = TwoSum(s, p), c ← c + (σ + e), P ← P + |p|, across j for one i (K column-major:
  // its data is the d × n_k row-major MT the loop takes).  |t − (s + c)| ≤ d(d + 1)u²P̂(1 + 2⁻²⁶) + d·2⁻¹⁰⁷⁰ for
  // d ≤ 2²⁰ when nothing overflows (P̂ ≤ 2^1020 keeps every |product| and partial sum below
  // 2^1021); t̂ = RN(s + c) adds u(1 + 2u)|t̂| + η.  Otherwise (huge entries, or d > 2²⁰) the entry
  // falls back to t̂ = fl(q_i·k_j) in order, with |t̂ − t| ≤ γ_d‖q_i‖‖k_j‖ + d·η (Cauchy–Schwarz).
  const bool dot2_applies = d <= (Eigen::Index{1} << 20);
  std::vector<double> qn(static_cast<std::size_t>(nq)), kn(static_cast<std::size_t>(nk));
  for (Eigen::Index i = 0; i < nq; ++i) qn[static_cast<std::size_t>(i)] = row_norm_up(Q, i);
  for (Eigen::Index j = 0; j < nk; ++j) kn[static_cast<std::size_t>(j)] = row_norm_up(K, j);
  const double gd = gamma_up(static_cast<std::size_t>(d)), deta = up(static_cast<double>(d) * eta);
  const double dd1 = up(up(static_cast<double>(d) * static_cast<double>(d + 1)) * 0x1p-106);
  const double dsub = up(static_cast<double>(d) * 0x1p-1070);
  const double ach = std::fabs(ch);
  binary64_enclosure S{matrix<double>(nq, nk), matrix<double>(nq, nk)};
  std::vector<double> sv(static_cast<std::size_t>(nk)), cv(sv.size()), pv(sv.size()), qi(static_cast<std::size_t>(d));
  for (Eigen::Index i = 0; i < nq; ++i) {
    std::fill(sv.begin(), sv.end(), 0.0);
    std::fill(cv.begin(), cv.end(), 0.0);
    std::fill(pv.begin(), pv.end(), 0.0);
    for (Eigen::Index l = 0; l < d; ++l) qi[static_cast<std::size_t>(l)] = Q(i, l);
    dot2_detail::dot2_columns_loop(qi.data(), K.data(), static_cast<std::size_t>(nk), static_cast<std::size_t>(d), 0,
                                   static_cast<std::size_t>(nk), sv.data(), cv.data(), pv.data());
    for (Eigen::Index j = 0; j < nk; ++j) {
      const auto jj = static_cast<std::size_t>(j);
      double t = sv[jj] + cv[jj], dt = 0;
      if (dot2_applies && pv[jj] <= 0x1p1020 && std::isfinite(t)) {
        dt = up(up(up(up(dd1 * up(pv[jj] * (1.0 + 0x1p-26))) + dsub) + up(std::fabs(t) * (unit * (1.0 + 0x1p-51)))) + eta);
      } else {
        t = 0;
        for (Eigen::Index l = 0; l < d; ++l) t += Q(i, l) * K(j, l);
        dt = up(up(gd * up(qn[static_cast<std::size_t>(i)] * kn[jj])) + deta);
      }
      // x̂ = fl(ĉ t̂):  |x̂ − c t| ≤ u|x̂|(1 + 2u) + η + |ĉ| δt + δc (|t̂| + δt)
      const double x = ch * t;
      double r = up(up(std::fabs(x) * (unit * (1.0 + 0x1p-51))) + eta);
      r = up(r + up(ach * dt));
      if (dc != 0) r = up(r + up(dc * up(std::fabs(t) + dt)));
      if (!std::isfinite(x) || !std::isfinite(r)) throw input_error("a score overflows binary64");
      S.mid(i, j) = x;
      S.rad(i, j) = r;
    }
  }
  return S;
}

binary64_enclosure enclose_attention_binary64(const binary64_enclosure& S, const mask& M) {
  const Eigen::Index nq = S.mid.rows(), nk = S.mid.cols();
  M.check_shape(nq, nk);
  const bool has_rad = S.rad.size() != 0;
  binary64_enclosure A{matrix<double>::Zero(nq, nk), matrix<double>::Zero(nq, nk)};
  const double gn = gamma_up(static_cast<std::size_t>(nk)), g2 = up(gn * gn);
  if (!(gn < 0x1p-20)) throw input_error("binary64 softmax bound: too many keys");
  const auto n = static_cast<std::size_t>(nk);
  std::vector<double> w(n), rho(n), om(n), dzs(n), zs, zl, eh, el, eb;
  std::vector<std::size_t> idx;
  zs.reserve(n);
  idx.reserve(n);
  for (Eigen::Index i = 0; i < nq; ++i) {
    double m = -inf;
    for (Eigen::Index j = 0; j < nk; ++j)
      if (M.allows(i, j)) m = std::max(m, S.mid(i, j));
    if (m == -inf) throw input_error("row " + std::to_string(i) + " is fully masked: softmax is undefined");
    // weights ŵ_j with |W_j − ŵ_j| ≤ ρ_j ŵ_j + ω_j, W_j = exp(s_ij − m) for the exact score;
    // the exponentials of the row in one batch (number/exp_batch.hpp: exp_with_bound of
    // number/double_double.hpp, bit for bit, four lanes at a time)
    zs.clear();
    idx.clear();
    for (Eigen::Index j = 0; j < nk; ++j) {
      const auto k = static_cast<std::size_t>(j);
      w[k] = rho[k] = om[k] = dzs[k] = 0;
      if (!M.allows(i, j)) continue;  // masked: exactly 0
      const double z = S.mid(i, j) - m;  // ẑ ≤ 0;  δz = δx + u|ẑ|(1 + 2u)
      dzs[k] = up((has_rad ? S.rad(i, j) : 0.0) + up(std::fabs(z) * (unit * (1.0 + 0x1p-51))));
      if (!(dzs[k] <= 0.5)) throw input_error("the scores' enclosure is too wide for the binary64 softmax bound");
      if (z < -708.0) {
        om[k] = 0x1p-1020;  // W ≤ e^{ẑ + δz} < e^{−707.5} < 2^−1020: ŵ = 0 with an absolute allowance
      } else {
        zs.push_back(z);
        idx.push_back(k);
      }
    }
    const std::size_t ne = zs.size();
    zl.assign(ne, 0.0);
    eh.resize(ne);
    el.resize(ne);
    eb.resize(ne);
    exp_batch(zs.data(), zl.data(), ne, eh.data(), el.data(), eb.data());
    for (std::size_t t = 0; t < ne; ++t) {
      const std::size_t k = idx[t];
      const double B = eb[t], dz = dzs[k];
      if (!(B <= 0x1p-40)) throw input_error("binary64 softmax bound: the exponential's bound does not apply");
      // |W − ŵ| ≤ ŵ [ (e^{δz} − 1 + B)(1 + u)/(1 − B) + u ],  e^{δz} − 1 ≤ δz (1 + δz) for δz ≤ 1
      w[k] = eh[t];
      const double g = up(up(dz * up(1.0 + dz)) + B);
      rho[k] = up(up(up(g * (1.0 + 0x1p-52)) / down(1.0 - B)) + unit);
    }
    // Ŝ = RN(s + c) from Sum2 (Ogita–Rump–Oishi): (s, σ) = TwoSum(s, ŵ_j) exactly, c ← c + σ;
    // for ŵ ≥ 0, |Ŝ − Σŵ| ≤ u·Σŵ + γ_{n−1}²·Σŵ ≤ (u + γ_n²)·Ŝ/(1 − u − γ_n²) (TwoSum is exact with
    // subnormals).  err ≥ Σ (ρ_j ŵ_j + ω_j).
    double s_hi = 0, s_lo = 0, err = 0;
    for (Eigen::Index j = 0; j < nk; ++j) {
      const auto k = static_cast<std::size_t>(j);
      if (!M.allows(i, j)) continue;
      const dd t = two_sum(s_hi, w[k]);
      s_hi = t.hi;
      s_lo += t.lo;
      err = up(err + up(up(rho[k] * w[k]) + om[k]));
    }
    const double sum = s_hi + s_lo;
    // |Σ W − Ŝ| ≤ (u + γ_n²)Ŝ/(1 − u − γ_n²) + err = ε_S;  T = Σ W ≥ Ŝ − ε_S > 0 (Ŝ ≈ Σŵ ≥ 1:
    // the maximum's ŵ is 1)
    const double ug = up(unit + g2);
    const double eps = up(up(up(ug * sum) / down(1.0 - ug)) + err);
    const double tlo = down(sum - eps);
    if (!(tlo > 0)) throw input_error("binary64 softmax bound: the row sum is not separated from 0");
    for (Eigen::Index j = 0; j < nk; ++j) {
      const auto k = static_cast<std::size_t>(j);
      if (!M.allows(i, j)) continue;
      // |W/T − ŵ/Ŝ| ≤ (ρŵ + ω)/T + ŵ ε_S /(T Ŝ);  |fl(ŵ/Ŝ) − ŵ/Ŝ| ≤ u·Â(1 + 2u) + η
      const double a = w[k] / sum;
      double r = up(up(up(rho[k] * w[k]) + om[k]) / tlo);
      r = up(r + up(up(w[k] * eps) / down(tlo * sum)));
      r = up(r + up(up(a * (unit * (1.0 + 0x1p-51))) + eta));
      A.mid(i, j) = a;
      A.rad(i, j) = r;
    }
  }
  return A;
}

binary64_enclosure enclose_product_binary64(const binary64_enclosure& A, const matrix<double>& V) {
  if (A.mid.cols() != V.rows()) throw input_error("A·V: inner dimensions differ");
  const bool has_rad = A.rad.size() != 0;
  const std::size_t n = static_cast<std::size_t>(A.mid.cols());
  const double gn = gamma_up(n), neta = up(static_cast<double>(n) * eta);
  // fl(Â V) with |fl − ÂV| ≤ γ_n|Â||V| + nη;  |(Ã − Â)V| ≤ rad·|V|.  Both bounding products are
  // sums of nonnegative terms: the exact one is ≤ fl/(1 − γ_n) + nη.
  binary64_enclosure out{A.mid * V, matrix<double>()};
  const matrix<double> absV = V.cwiseAbs();
  const matrix<double> Z = A.mid.cwiseAbs() * absV;
  const matrix<double> Y = has_rad ? matrix<double>(A.rad * absV) : matrix<double>::Zero(Z.rows(), Z.cols());
  out.rad.resize(Z.rows(), Z.cols());
  const double inv = up(1.0 / down(1.0 - gn));
  for (Eigen::Index i = 0; i < Z.size(); ++i) {
    const double z = up(up(Z.data()[i] * inv) + neta), y = up(up(Y.data()[i] * inv) + neta);
    out.rad.data()[i] = up(up(up(gn * z) + neta) + y);
    if (!std::isfinite(out.mid.data()[i]) || !std::isfinite(out.rad.data()[i]))
      throw input_error("A·V overflows binary64");
  }
  return out;
}

binary64_enclosure enclose_sum_binary64(const matrix<double>& X, const binary64_enclosure& Y) {
  if (X.rows() != Y.mid.rows() || X.cols() != Y.mid.cols()) throw input_error("X + Y: shapes differ");
  const bool has_rad = Y.rad.size() != 0;
  binary64_enclosure out{X + Y.mid, matrix<double>(X.rows(), X.cols())};
  for (Eigen::Index i = 0; i < X.size(); ++i) {
    // |fl(x + ŷ) − (x + ŷ)| ≤ u|fl(x + ŷ)|(1 + 2u) (sums are exact when subnormal)
    const double s = out.mid.data()[i];
    out.rad.data()[i] = up((has_rad ? Y.rad.data()[i] : 0.0) + up(std::fabs(s) * (unit * (1.0 + 0x1p-51))));
    if (!std::isfinite(s) || !std::isfinite(out.rad.data()[i])) throw input_error("X + A·V overflows binary64");
  }
  return out;
}

matrix<mpfi_float> enclose_scores_mpfi(const matrix<double>& Q, const matrix<double>& K, const score_scale& c, const mask& M,
                                       unsigned threads) {
  const Eigen::Index nq = Q.rows(), nk = K.rows(), d = Q.cols();
  if (K.cols() != d) throw input_error("Q has " + std::to_string(d) + " columns but K has " + std::to_string(K.cols()));
  for (const matrix<double>* X : {&Q, &K})
    for (Eigen::Index i = 0; i < X->size(); ++i)
      if (!std::isfinite(X->data()[i])) throw input_error("scores: an input entry is not finite");
  M.check_shape(nq, nk);
  mpfi_float scale;
  if (c.rational) mpfi_set_q(scale.backend().data(), c.rational->backend().data());
  else if (c.inv_sqrt_d) {
    mpfi_set_si(scale.backend().data(), static_cast<long>(d));
    mpfi_sqrt(scale.backend().data(), scale.backend().data());
    mpfi_inv(scale.backend().data(), scale.backend().data());
  } else {
    mpfi_set_si(scale.backend().data(), 1);
  }
  // The products q_il·k_jl, exact in 106 bits (two 53-bit significands), summed by mpfr_sum,
  // which rounds the exact sum once in the direction asked.  One row per task (parallel_for).
  matrix<mpfi_float> S(nq, nk);
  parallel_for(static_cast<std::size_t>(nq), threads, [&](std::size_t row) {
    const Eigen::Index i = static_cast<Eigen::Index>(row);
    std::vector<mpfr_float> terms(static_cast<std::size_t>(d));
    std::vector<mpfr_ptr> ptrs(terms.size());
    for (std::size_t l = 0; l < terms.size(); ++l) {
      mpfr_set_prec(terms[l].backend().data(), 106);  // 106 bits (Boost's precision() takes digits)
      ptrs[l] = terms[l].backend().data();
    }
    mpfr_float lo, hi;
    check_deadline();  // the command's budget and interruption: one poll per row
    for (Eigen::Index j = 0; j < nk; ++j) {
      mpfi_ptr s = S(i, j).backend().data();
      if (!M.allows(i, j)) {
        mpfi_set_si(s, 0);
        continue;
      }
      for (Eigen::Index l = 0; l < d; ++l) {
        mpfr_set_d(ptrs[static_cast<std::size_t>(l)], Q(i, l), MPFR_RNDN);                        // exact
        mpfr_mul_d(ptrs[static_cast<std::size_t>(l)], ptrs[static_cast<std::size_t>(l)], K(j, l), MPFR_RNDN);  // exact
      }
      mpfr_sum(lo.backend().data(), ptrs.data(), static_cast<unsigned long>(d), MPFR_RNDD);
      mpfr_sum(hi.backend().data(), ptrs.data(), static_cast<unsigned long>(d), MPFR_RNDU);
      mpfi_interv_fr(s, lo.backend().data(), hi.backend().data());
      mpfi_mul(s, s, scale.backend().data());
    }
  }, 16);  // 16 rows a task: the rows of S interleave in memory (column-major)
  return S;
}

}  // namespace attncert
