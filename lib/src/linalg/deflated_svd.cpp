// The k smallest singular values escalated on a deflated subspace: refinement at p bits (approx
// tier), then the bound of proofs/P16-fast-singular-values.md, part D (enclosure tier).  Every
// bound below names its step there.
#include "attncert/linalg/deflated_svd.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attncert/error.hpp"
#include "attncert/deadline.hpp"
#include "attncert/linalg/lapack.hpp"
#include "attncert/linalg/spectra.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/number/outward.hpp"
#include "attncert/number/parallel.hpp"

namespace attncert {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double eta = 0x1p-1074;

// Threads for the n×n×k products below (parallel_for: one column per task, each column's
// operations the same on any thread, so the results are those of one thread).  Set for the
// duration of one deflated_trailing_singular_values call on its thread.
thread_local unsigned product_threads = 1;

mpfr_ptr raw(mpfr_float& x) { return x.backend().data(); }
mpfr_srcptr raw(const mpfr_float& x) { return x.backend().data(); }

// A as midpoint (p bits, mpfi_mid) plus radius: |Ã − mid| ≤ 2^-p·rad_scaled for every Ã inside A
// (rad_scaled rounded up in binary64), and abs_mid ≥ |mid| (binary64, rounded up).
struct mid_rad {
  matrix<mpfr_float> mid;
  matrix<double> abs_mid, rad_scaled;
  long p = 0;
};

mid_rad split_mid_rad(const matrix<mpfi_float>& A) {
  mid_rad m;
  m.p = static_cast<long>(current_mpfr_bits());
  m.mid.resize(A.rows(), A.cols());
  m.abs_mid.resize(A.rows(), A.cols());
  m.rad_scaled.resize(A.rows(), A.cols());
  mpfr_t t;
  mpfr_init2(t, 64);
  for (Eigen::Index i = 0; i < A.size(); ++i) {
    mpfi_srcptr a = A(i).backend().data();
    mpfr_ptr c = raw(m.mid(i));
    mpfi_mid(c, a);
    m.abs_mid(i) = std::fabs(mpfr_get_d(c, mpfr_sgn(c) >= 0 ? MPFR_RNDU : MPFR_RNDD));
    // rad = max(mid − lo, hi − mid), rounded up, times 2^p (exact).
    mpfr_sub(t, c, &a->left, MPFR_RNDU);
    double r = mpfr_get_d(t, MPFR_RNDU);
    mpfr_sub(t, &a->right, c, MPFR_RNDU);
    r = std::max(r, mpfr_get_d(t, MPFR_RNDU));
    m.rad_scaled(i) = std::ldexp(r, static_cast<int>(m.p));  // ≥ 0; +∞ on overflow (no claim then)
  }
  mpfr_clear(t);
  return m;
}

// fl_p(op(A)·X): each entry a sum of n products in index order, each product and each partial sum
// rounded to nearest at p bits — the recursive sum of part D, step 1 (|error| ≤ γ_n^(p)|op(A)||X|).
// op(A) = Aᵀ when `tr`.
matrix<mpfr_float> approx_times(const matrix<mpfr_float>& A, const matrix<mpfr_float>& X, bool tr) {
  const Eigen::Index n = A.rows();
  matrix<mpfr_float> Y(n, X.cols());
  parallel_for(static_cast<std::size_t>(X.cols()), product_threads, [&](std::size_t jj) {
    const Eigen::Index j = static_cast<Eigen::Index>(jj);
    check_deadline();  // n² MPFR operations per column: the command's budget and interruption
    mpfr_float t;
    for (Eigen::Index i = 0; i < n; ++i) mpfr_set_ui(raw(Y(i, j)), 0, MPFR_RNDN);
    if (tr) {
      for (Eigen::Index i = 0; i < n; ++i) {
        mpfr_ptr y = raw(Y(i, j));
        for (Eigen::Index l = 0; l < n; ++l) {
          if (mpfr_zero_p(raw(A(l, i)))) continue;  // a masked entry: the term is an exact 0
          mpfr_mul(raw(t), raw(A(l, i)), raw(X(l, j)), MPFR_RNDN);
          mpfr_add(y, y, raw(t), MPFR_RNDN);
        }
      }
    } else {
      for (Eigen::Index l = 0; l < n; ++l) {
        mpfr_srcptr x = raw(X(l, j));
        for (Eigen::Index i = 0; i < n; ++i) {
          if (mpfr_zero_p(raw(A(i, l)))) continue;
          mpfr_mul(raw(t), raw(A(i, l)), x, MPFR_RNDN);
          mpfr_add(raw(Y(i, j)), raw(Y(i, j)), raw(t), MPFR_RNDN);
        }
      }
    }
  });
  return Y;
}

// op(Ã)·X enclosed for every Ã inside A (part D, step 1): mid = fl_p(op(mid)·X) and
// rad = γ_n^(p)·|mid||X| + 2^-p·rad_scaled·|X|, the two nonnegative products bounded from BLAS by
// fl/(1 − γ_n) + nη and the radius accumulated in MPFR rounded up.
matrix<mpfi_float> enclose_times(const mid_rad& A, const matrix<mpfr_float>& X, bool tr) {
  const Eigen::Index n = A.mid.rows(), k = X.cols();
  const matrix<mpfr_float> mid = approx_times(A.mid, X, tr);
  matrix<double> ax(n, k);
  for (Eigen::Index i = 0; i < X.size(); ++i) ax(i) = std::fabs(mpfr_get_d(raw(X(i)), mpfr_sgn(raw(X(i))) >= 0 ? MPFR_RNDU : MPFR_RNDD));
  const matrix<double> c1 = approx_product_blas(A.abs_mid, ax, tr), c2 = approx_product_blas(A.rad_scaled, ax, tr);
  const double gn = gamma_up(static_cast<std::size_t>(n)), shrink = next_down(1.0 - gn), floor = next_up(static_cast<double>(n) * eta);
  mpfr_t gp, r, t;
  mpfr_inits2(64, gp, r, t, static_cast<mpfr_ptr>(nullptr));
  // γ_n^(p) = n·2^-p / (1 − n·2^-p), rounded up.
  mpfr_set_ui(gp, static_cast<unsigned long>(n), MPFR_RNDU);
  mpfr_mul_2si(gp, gp, -A.p, MPFR_RNDU);
  mpfr_ui_sub(t, 1, gp, MPFR_RNDD);
  mpfr_div(gp, gp, t, MPFR_RNDU);
  matrix<mpfi_float> Y(n, k);
  for (Eigen::Index i = 0; i < Y.size(); ++i) {
    const double b1 = next_up(next_up(c1(i) / shrink) + floor), b2 = next_up(next_up(c2(i) / shrink) + floor);
    mpfr_set_d(r, b1, MPFR_RNDU);
    mpfr_mul(r, r, gp, MPFR_RNDU);
    mpfr_set_d(t, b2, MPFR_RNDU);
    mpfr_mul_2si(t, t, -A.p, MPFR_RNDU);
    mpfr_add(r, r, t, MPFR_RNDU);
    mpfi_ptr y = Y(i).backend().data();
    mpfi_interv_fr(y, r, r);
    mpfi_neg(y, y);
    mpfi_put_fr(y, r);  // [−r, r]
    mpfi_add_fr(y, y, raw(mid(i)));
  }
  mpfr_clears(gp, r, t, static_cast<mpfr_ptr>(nullptr));
  return Y;
}

// Modified Gram–Schmidt, twice: Q (n×k) with orthonormal columns to working precision and R (k×k)
// with X ≈ Q·R (approx tier).
void approx_qr(const matrix<mpfr_float>& X, matrix<mpfr_float>& Q, matrix<mpfr_float>& R) {
  const Eigen::Index n = X.rows(), k = X.cols();
  Q = X;
  R = matrix<mpfr_float>::Zero(k, k);
  for (int pass = 0; pass < 2; ++pass)
    for (Eigen::Index j = 0; j < k; ++j) {
      for (Eigen::Index i = 0; i < j; ++i) {
        mpfr_float c(0);
        for (Eigen::Index r = 0; r < n; ++r) c += Q(r, i) * Q(r, j);
        for (Eigen::Index r = 0; r < n; ++r) Q(r, j) -= c * Q(r, i);
        R(i, j) += pass == 0 ? c : mpfr_float(c * R(j, j));
      }
      mpfr_float s(0);
      for (Eigen::Index r = 0; r < n; ++r) s += Q(r, j) * Q(r, j);
      s = sqrt(s);
      if (pass == 0) R(j, j) = s;
      else R(j, j) *= s;
      if (s > 0)
        for (Eigen::Index r = 0; r < n; ++r) Q(r, j) /= s;
    }
}

// Rounds X·2^e to binary64 with e chosen so that the largest entry is near 1 (powers of two are
// exact); returns e.
long scaled_to_double(const matrix<mpfr_float>& X, matrix<double>& out) {
  long e = std::numeric_limits<long>::min();
  for (Eigen::Index i = 0; i < X.size(); ++i)
    if (mpfr_regular_p(raw(X(i)))) e = std::max<long>(e, mpfr_get_exp(raw(X(i))));
  e = e == std::numeric_limits<long>::min() ? 0 : -e;
  out.resize(X.rows(), X.cols());
  mpfr_t t;
  mpfr_init2(t, mpfr_get_default_prec());
  for (Eigen::Index i = 0; i < X.size(); ++i) {
    mpfr_mul_2si(t, raw(X(i)), e, MPFR_RNDN);
    out(i) = mpfr_get_d(t, MPFR_RNDN);
  }
  mpfr_clear(t);
  return e;
}

// The trailing triple (U₂, Σ₂, V₂) refined at the current precision (approx tier; part D, step 0).
struct trailing_triple {
  matrix<mpfr_float> U2, V2;
  std::vector<mpfr_float> s2;
  double residual = inf;  // ‖AᵀU₂ − V₂Σ₂‖_F (approx)
};

// Rayleigh–Ritz on span(V₂): V₂ orthonormalized, AV₂ = Q_y R_y, R_y = U_r Σ V_rᵀ;
// U₂ = Q_y U_r, V₂ ← V₂ V_r.  Returns false when the small SVD fails.
bool rayleigh_ritz(const matrix<mpfr_float>& Amid, trailing_triple& t) {
  matrix<mpfr_float> Q, R;
  approx_qr(t.V2, Q, R);
  t.V2 = Q;
  approx_qr(approx_times(Amid, t.V2, false), Q, R);
  matrix<mpfr_float> Ur, Vr;
  if (!approx_jacobi_svd(R, t.s2, &Ur, &Vr)) return false;
  t.U2 = Q * Ur;
  t.V2 = t.V2 * Vr;
  return true;
}

// The residual R_l = AᵀU₂ − V₂Σ₂ at p bits (approx) and its Frobenius norm as a double.
matrix<mpfr_float> left_residual(const matrix<mpfr_float>& Amid, trailing_triple& t) {
  matrix<mpfr_float> Rl = approx_times(Amid, t.U2, true);
  mpfr_float f(0);
  for (Eigen::Index j = 0; j < Rl.cols(); ++j)
    for (Eigen::Index i = 0; i < Rl.rows(); ++i) {
      Rl(i, j) -= t.V2(i, j) * t.s2[static_cast<std::size_t>(j)];
      f += Rl(i, j) * Rl(i, j);
    }
  t.residual = static_cast<double>(sqrt(f));
  return Rl;
}

// One correction step (part D, step 0): V₂ += V₁P with P_ij = −b_ij s_j / (ŝ_i² − s_j²),
// B = V₁ᵀR_l in binary64 on the scaled residual.  Returns log₂ of ‖P‖_F (−∞ for P = 0).
double correct(const binary64_svd_factors& F, Eigen::Index k, const matrix<mpfr_float>& Rl, trailing_triple& t) {
  const Eigen::Index n = F.V.cols(), m = n - k;
  matrix<double> rl;
  const long e = scaled_to_double(Rl, rl);
  const matrix<double> V1 = F.V.leftCols(m);
  matrix<double> P = approx_product_blas(V1, rl, true);
  for (Eigen::Index j = 0; j < k; ++j) {
    const double sj = static_cast<double>(t.s2[static_cast<std::size_t>(j)]);
    for (Eigen::Index i = 0; i < m; ++i) {
      const double si = F.s[static_cast<std::size_t>(i)];
      P(i, j) = -P(i, j) * sj / ((si - sj) * (si + sj));
    }
  }
  const matrix<double> D = approx_product_blas(V1, P);
  mpfr_t d;
  mpfr_init2(d, mpfr_get_default_prec());
  for (Eigen::Index i = 0; i < D.size(); ++i) {
    mpfr_set_d(d, D(i), MPFR_RNDN);
    mpfr_mul_2si(d, d, -e, MPFR_RNDN);
    mpfr_add(raw(t.V2(i)), raw(t.V2(i)), d, MPFR_RNDN);
  }
  mpfr_clear(d);
  const double norm = P.norm();
  return norm > 0 ? std::log2(norm) - static_cast<double>(e) : -inf;
}

// Rayleigh–Ritz and correction in turn until the correction is below 2^(4−p) (converged) or
// stops shrinking by half (stalled), then one last Rayleigh–Ritz: the triple returned is the one
// whose residual was measured.
trailing_triple refine(const mid_rad& A, const binary64_svd_factors& F, Eigen::Index k, const matrix<mpfr_float>& start,
                       int max_steps, int& steps) {
  trailing_triple t;
  t.V2 = start;
  steps = 0;
  double previous = inf;
  bool last = false;
  for (int it = 0; it < max_steps; ++it) {
    check_deadline();
    if (!rayleigh_ritz(A.mid, t)) return trailing_triple{};
    const matrix<mpfr_float> Rl = left_residual(A.mid, t);
    ++steps;
    if (last || it + 1 == max_steps || !std::isfinite(t.residual)) break;
    const double size = correct(F, k, Rl, t);
    last = size < 4.0 - static_cast<double>(A.p) || size > previous - 1.0;
    previous = size;
  }
  return t;
}

// ‖X‖_F rounded up, of a point matrix (MPFR, then binary64 rounded up).
mpfr_float frobenius_up(const matrix<mpfr_float>& X) {
  detail::csvd::frobenius_upper f;
  for (Eigen::Index i = 0; i < X.size(); ++i) f.add(raw(X(i)), raw(X(i)));
  return f.value();
}

// ‖Q₁ᵀQ₂‖₂ for Q₁ binary64 (n×m) and Q₂ at p bits (n×k), rounded up (part D, step 2):
// ‖fl(Q₁ᵀQ̂₂)‖_F + γ_n‖Q₁‖_F‖Q̂₂‖_F + √(mk)·nη + √(1 + a)·‖Q₂ − Q̂₂‖_F, Q̂₂ = Q₂ rounded to binary64,
// a ≥ ‖Q₁ᵀQ₁ − I‖₂ (so ‖Q₁‖₂ ≤ √(1 + a)).
mpfr_float cross_defect_up(const matrix<double>& Q1, const matrix<mpfr_float>& Q2, double a) {
  matrix<double> q2(Q2.rows(), Q2.cols());
  matrix<mpfr_float> diff(Q2.rows(), Q2.cols());
  for (Eigen::Index i = 0; i < Q2.size(); ++i) {
    q2(i) = mpfr_get_d(raw(Q2(i)), MPFR_RNDN);
    mpfr_sub_d(raw(diff(i)), raw(Q2(i)), q2(i), MPFR_RNDN);  // exact: the part below binary64
  }
  const matrix<double> G = approx_product_blas(Q1, q2, true);
  auto fro = [](const matrix<double>& M) {
    double s = 0;
    for (Eigen::Index i = 0; i < M.size(); ++i) s = next_up(s + next_up(M(i) * M(i)));
    return next_up(std::sqrt(s));
  };
  const double n = static_cast<double>(Q1.rows()), mk = static_cast<double>(Q1.cols()) * static_cast<double>(Q2.cols());
  double b = next_up(fro(G) + next_up(gamma_up(static_cast<std::size_t>(Q1.rows())) * next_up(fro(Q1) * fro(q2))));
  b = next_up(b + next_up(next_up(std::sqrt(mk) + 1) * next_up(n * eta)));
  const mpfi_float r = thin(mpfr_float(b)) + sqrt(mpfi_float(1) + thin(mpfr_float(a))) * thin(frobenius_up(diff));
  return upper_of(r);
}

// X = fl_p(Q₂ᵀQ₁) (k×m, one rounded product and one rounded sum per term, round to nearest) for Q₁
// binary64 (n×m) and Q₂ at p bits (n×k); `err` ≥ ‖Q₂ᵀQ₁ − X‖_F = γ_{n+1}^(p)·‖Q₂‖_F‖Q₁‖_F rounded up
// and `norm` ≥ ‖X‖_F (part D, step 2′).  The basis [Q₁ − Q₂X, Q₂] is then orthogonal across its
// blocks to p bits rather than to binary64's.
struct projection {
  matrix<mpfr_float> X;
  mpfr_float err, norm;
};

projection project_out(const matrix<double>& Q1, const matrix<mpfr_float>& Q2) {
  projection pr;
  const Eigen::Index n = Q1.rows(), m = Q1.cols(), k = Q2.cols();
  pr.X.resize(k, m);
  parallel_for(static_cast<std::size_t>(m), product_threads, [&](std::size_t jj) {
    const Eigen::Index j = static_cast<Eigen::Index>(jj);
    mpfr_float t;
    for (Eigen::Index i = 0; i < k; ++i) {
      mpfr_ptr x = raw(pr.X(i, j));
      mpfr_set_ui(x, 0, MPFR_RNDN);
      for (Eigen::Index l = 0; l < n; ++l) {
        mpfr_mul_d(raw(t), raw(Q2(l, i)), Q1(l, j), MPFR_RNDN);
        mpfr_add(x, x, raw(t), MPFR_RNDN);
      }
    }
  });
  mpfr_float q1(0);
  for (Eigen::Index i = 0; i < Q1.size(); ++i) mpfr_fma(raw(q1), mpfr_float(Q1(i)).backend().data(), mpfr_float(Q1(i)).backend().data(), raw(q1), MPFR_RNDU);
  mpfr_sqrt(raw(q1), raw(q1), MPFR_RNDU);
  mpfi_float g = thin(mpfr_float(static_cast<double>(n + 1)));
  g = g * thin(mpfr_float(pow(mpfr_float(2), -static_cast<long>(current_mpfr_bits()))));
  g = g / (mpfi_float(1) - g);
  pr.err = upper_of(g * thin(frobenius_up(Q2)) * thin(q1));
  pr.norm = frobenius_up(pr.X);
  return pr;
}

std::vector<mpfi_float> no_claim(std::size_t k, deflation_report& rep, std::string why) {
  rep.why_not = std::move(why);
  return std::vector<mpfi_float>(k, detail::csvd::nonnegative_half_line());
}

matrix<double> U1_of(const binary64_svd_factors& F, Eigen::Index k) { return F.U.leftCols(F.U.cols() - k); }

void orthogonalize_once(const matrix<double>& U1, matrix<mpfr_float>& U2) {
  const Eigen::Index n = U1.rows(), m = U1.cols(), k = U2.cols();
  matrix<mpfr_float> C(m, k);
  parallel_for(static_cast<std::size_t>(k), product_threads, [&](std::size_t jj) {  // column j of C, then of U₂
    const Eigen::Index j = static_cast<Eigen::Index>(jj);
    mpfr_float t;
    for (Eigen::Index i = 0; i < m; ++i) {
      mpfr_ptr c = raw(C(i, j));
      mpfr_set_ui(c, 0, MPFR_RNDN);
      for (Eigen::Index l = 0; l < n; ++l) {
        mpfr_mul_d(raw(t), raw(U2(l, j)), U1(l, i), MPFR_RNDN);
        mpfr_add(c, c, raw(t), MPFR_RNDN);
      }
    }
    for (Eigen::Index i = 0; i < m; ++i) {
      mpfr_srcptr c = raw(C(i, j));
      for (Eigen::Index l = 0; l < n; ++l) {
        mpfr_mul_d(raw(t), c, U1(l, i), MPFR_RNDN);
        mpfr_sub(raw(U2(l, j)), raw(U2(l, j)), raw(t), MPFR_RNDN);
      }
    }
  });
  matrix<mpfr_float> Q, R;
  approx_qr(U2, Q, R);
  U2 = Q;
}

// U₂ ← U₂ − U₁(U₁ᵀU₂) at p bits, then orthonormalized (modified Gram–Schmidt twice); the whole
// done twice, since normalizing a column that was nearly inside span(U₁) amplifies what the first
// round left of U₁ ("twice is enough").  Approx tier.
void orthogonalize_against(const matrix<double>& U1, matrix<mpfr_float>& U2) {
  for (int round = 0; round < 2; ++round) orthogonalize_once(U1, U2);
}

// Step 1 of part D: r_r ≥ ‖ÃV₂ − U₂Σ₂‖_F, r_l ≥ ‖ÃᵀU₂ − V₂Σ₂‖_F, s_max = max |Σ₂| and M₂₂ ∋ U₂ᵀÃV₂,
// for every Ã inside A.
struct step_one {
  mpfr_float rr, rl, smax;
  matrix<mpfi_float> M22;
};

step_one residuals_and_block(const mid_rad& Am, const trailing_triple& t) {
  const Eigen::Index n = Am.mid.rows(), k = t.V2.cols();
  const matrix<mpfi_float> Y = enclose_times(Am, t.V2, false), Z = enclose_times(Am, t.U2, true);
  detail::csvd::frobenius_upper fr, fl;
  mpfi_float x;
  step_one out;
  out.smax = 0;
  for (Eigen::Index j = 0; j < k; ++j) {
    const mpfr_float& sj = t.s2[static_cast<std::size_t>(j)];
    out.smax = std::max(out.smax, mpfr_float(abs(sj)));
    for (Eigen::Index i = 0; i < n; ++i) {
      mpfi_set_fr(x.backend().data(), raw(t.U2(i, j)));
      mpfi_mul_fr(x.backend().data(), x.backend().data(), raw(sj));
      mpfi_sub(x.backend().data(), Y(i, j).backend().data(), x.backend().data());
      fr.add(x);
      mpfi_set_fr(x.backend().data(), raw(t.V2(i, j)));
      mpfi_mul_fr(x.backend().data(), x.backend().data(), raw(sj));
      mpfi_sub(x.backend().data(), Z(i, j).backend().data(), x.backend().data());
      fl.add(x);
    }
  }
  out.rr = fr.value();
  out.rl = fl.value();
  out.M22 = detail::csvd::point_transpose_times(t.U2, Y);
  return out;
}

// Steps 1–5 of part D for the triple t: enclosures of the k smallest singular values, or no claim
// (rep.why_not says why).
std::vector<mpfi_float> certify_triple(const mid_rad& Am, const binary64_svd_factors& F, const trailing_triple& t,
                                       deflation_report& rep) {
  const Eigen::Index n = Am.mid.rows(), k = t.V2.cols(), m = n - k;
  const std::size_t kk = static_cast<std::size_t>(k);
  // Step 1: Y = AV₂ and Z = AᵀU₂ enclosed; R_r = Y − U₂Σ₂, R_l = Z − V₂Σ₂; M₂₂ = U₂ᵀY.
  const step_one p1 = residuals_and_block(Am, t);
  const matrix<mpfi_float>& M22 = p1.M22;
  const mpfr_float& smax = p1.smax;
  if (mpfr_underflow_p()) return no_claim(kk, rep, "MPFR underflow");

  // Step 2: the binary64 blocks' cross defects ‖U₁ᵀU₂‖ ≤ b_u, ‖V₁ᵀV₂‖ ≤ b_v, and the couplings in
  // the basis [U₁ U₂], [V₁ V₂]: ‖M₁₂‖ ≤ e₁₂, ‖M₂₁‖ ≤ e₂₁.
  const matrix<double> U1 = F.U.leftCols(m), V1 = F.V.leftCols(m);
  const mpfr_float bu = cross_defect_up(U1, t.U2, F.alpha), bv = cross_defect_up(V1, t.V2, F.beta);
  const mpfi_float a0 = thin(mpfr_float(F.alpha)), b0 = thin(mpfr_float(F.beta)), one(1);
  const mpfi_float gu = thin(detail::csvd::orthogonality_defect(t.U2)), gv = thin(detail::csvd::orthogonality_defect(t.V2));
  const mpfi_float rr = thin(p1.rr), rl = thin(p1.rl), sm = thin(smax);
  const mpfi_float e12 = thin(bu) * sm + sqrt(mpfi_float(one + a0)) * rr;
  const mpfi_float e21 = thin(bv) * sm + sqrt(mpfi_float(one + b0)) * rl;

  // Step 2′: the projected bases U₁′ = U₁ − U₂X, V₁′ = V₁ − V₂Y: their defects and couplings.
  const projection px = project_out(U1, t.U2), py = project_out(V1, t.V2);
  const mpfi_float xn = thin(px.norm), yn = thin(py.norm);
  const mpfi_float a11 = a0 + 2 * thin(bu) * xn + xn * xn * (one + gu), a12 = thin(px.err) + gu * xn;
  const mpfi_float b11 = b0 + 2 * thin(bv) * yn + yn * yn * (one + gv), b12 = thin(py.err) + gv * yn;
  const mpfr_float alpha = upper_of(sqrt(mpfi_float(a11 * a11 + 2 * a12 * a12 + gu * gu)));
  const mpfr_float beta = upper_of(sqrt(mpfi_float(b11 * b11 + 2 * b12 * b12 + gv * gv)));
  if (!(alpha < 1) || !(beta < 1))
    return no_claim(kk, rep, "the refined bases are too far from orthogonal: alpha' " + alpha.str(3) + ", beta' " + beta.str(3));
  const mpfr_float eps = std::max(upper_of(mpfi_float(a12 * sm + sqrt(mpfi_float(one + a11)) * rr)),
                                  upper_of(mpfi_float(b12 * sm + sqrt(mpfi_float(one + b11)) * rl)));
  rep.epsilon = mpfr_get_d(raw(eps), MPFR_RNDU);
  const singular_value_enclosures small = certified_singular_values(M22);
  const mpfi_float h1 = thin(upper_of(small.sigma[0]));

  // Step 3: σ_min(M₁₁′) ≥ (1 − α)·ŝ_{n−k} − √(1 + α)·ρ − (‖X‖e₂₁ + e₁₂‖Y‖ + ‖X‖‖Y‖h₁) (Weyl twice;
  // σ_min(U₁ᵀU₁ diag ŝ₁) ≥ λ_min(U₁ᵀU₁)·ŝ_{n−k} ≥ (1 − α)·ŝ_{n−k}).
  const mpfr_float s_low = lower_of((one - a0) * thin(mpfr_float(F.s[static_cast<std::size_t>(m - 1)])) -
                                    sqrt(mpfi_float(one + a0)) * thin(mpfr_float(F.rho)) - (xn * e21 + e12 * yn + xn * yn * h1));

  // Step 4: the gap η and the shift δ (Li and Li).
  const mpfr_float gap = lower_of(thin(s_low) - h1);
  rep.gap = mpfr_get_d(raw(gap), MPFR_RNDD);
  if (!(gap > 0))
    return no_claim(kk, rep, "no gap between the kept and the escalated singular values: sigma_min(M11) >= " + s_low.str(3) +
                                 ", sigma_max(M22) <= " + upper_of(h1).str(3));
  const mpfi_float E = thin(eps), G = thin(gap);
  const mpfr_float li = upper_of(mpfi_float(2 * E * E / (G + sqrt(mpfi_float(G * G + 4 * E * E)))));
  const mpfr_float delta = std::min(eps, li);

  // Step 5: back to A through U and V.
  const mpfi_float grow = sqrt(mpfi_float((one + thin(alpha)) * (one + thin(beta))));
  const mpfi_float shrink = sqrt(mpfi_float((one - thin(alpha)) * (one - thin(beta))));
  std::vector<mpfi_float> out(kk);
  for (std::size_t j = 0; j < kk; ++j) {
    mpfr_float lo(0);
    const mpfi_float num = thin(lower_of(small.sigma[j])) - thin(delta);
    if (lower_of(num) > 0) lo = lower_of(mpfi_float(num / grow));
    const mpfr_float hi = upper_of(mpfi_float((thin(upper_of(small.sigma[j])) + thin(delta)) / shrink));
    if (!mpfr_number_p(raw(hi))) return no_claim(kk, rep, "a bound is not finite");
    mpfi_interv_fr(out[j].backend().data(), raw(lo), raw(hi));
  }
  return out;
}

}  // namespace

std::size_t deflation_split(const std::vector<mpfi_float>& sigma, std::size_t k_min, std::size_t k_max) {
  const std::size_t n = sigma.size();
  for (std::size_t k = std::max<std::size_t>(k_min, 1); k <= k_max && k < n; ++k)
    if (lower_of(sigma[n - k - 1]) >= 2 * upper_of(sigma[n - k])) return k;
  return 0;
}

std::vector<mpfi_float> deflated_trailing_singular_values(const matrix<mpfi_float>& A, const binary64_svd_factors& F,
                                                          std::size_t kk, deflation_vectors& vectors,
                                                          deflation_report& rep, int max_steps, unsigned threads) {
  const Eigen::Index n = A.rows(), k = static_cast<Eigen::Index>(kk);
  struct threads_scope {
    unsigned saved = product_threads;
    explicit threads_scope(unsigned t) { product_threads = std::max(1u, t); }
    ~threads_scope() { product_threads = saved; }
  } scope(threads);
  if (A.cols() != n || !F.valid || F.transposed || F.V.rows() != n || F.V.cols() != n || F.U.rows() != n ||
      F.U.cols() != n || static_cast<Eigen::Index>(F.s.size()) != n || k <= 0 || k >= n)
    throw input_error("deflated singular values: need a square matrix, its binary64 factors and 0 < k < n");
  rep = deflation_report{};
  rep.k = kk;
  rep.bits = current_mpfr_bits();
  for (Eigen::Index i = 0; i < A.size(); ++i)
    if (!mpfi_bounded_p(A(i).backend().data())) return no_claim(kk, rep, "an entry of the matrix is not bounded");
  mpfr_clear_underflow();
  const mid_rad Am = split_mid_rad(A);

  // Step 0 (approx): refine the trailing vectors at p bits.
  matrix<mpfr_float> start = vectors.V2;
  if (start.rows() != n || start.cols() != k) start = from_double_matrix<mpfr_float>(F.V.rightCols(k));
  else
    for (Eigen::Index i = 0; i < start.size(); ++i) start(i).precision(rep.bits);
  const trailing_triple t = refine(Am, F, k, start, max_steps, rep.refinement_steps);
  rep.residual = t.residual;
  if (t.U2.size() == 0) return no_claim(kk, rep, "the refinement's small SVD failed");
  vectors.V2 = t.V2;

  std::vector<mpfi_float> out = certify_triple(Am, F, t, rep);
  if (rep.why_not.empty()) return out;
  // Columns whose σ lies below what p bits resolve are noise, far from orthogonal to U₁ and V₁:
  // orthogonalize U₂ against U₁ and V₂ against V₁ once and orthonormalize them (any bases serve;
  // part D, step 0′), then bound again.
  trailing_triple o = t;
  orthogonalize_against(U1_of(F, k), o.U2);
  orthogonalize_against(F.V.leftCols(F.V.cols() - k), o.V2);
  deflation_report again = rep;
  again.why_not.clear();
  std::vector<mpfi_float> second = certify_triple(Am, F, o, again);
  if (!again.why_not.empty()) {
    rep.why_not += "; with U2, V2 orthogonalized: " + again.why_not;
    return out;
  }
  again.orthogonalized = true;
  rep = again;
  return second;
}

}  // namespace attncert
