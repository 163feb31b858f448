// Singular values at binary64 speed: LAPACK (approx) and Rump's residual enclosure (enclosure
// tier).  The derivation, with every bound below, is proofs/P16-fast-singular-values.md.
#include "attncert/linalg/fast_svd.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "attncert/error.hpp"
#include "attncert/number/outward.hpp"
#include "attncert/linalg/deflated_svd.hpp"
#include "attncert/linalg/lapack.hpp"
#include "attncert/number/parallel.hpp"
#include "attncert/number/precision_guard.hpp"

namespace attncert {

namespace {

constexpr auto up = next_up;
constexpr auto down = next_down;

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double eta = 0x1p-1074;  // the smallest subnormal: underflow's absolute error unit

// Upper bound of sqrt(Σ x²) over the values handed to add().
class frobenius_up {
 public:
  void add(double x) { s_ = up(s_ + up(x * x)); }
  double value() const { return up(std::sqrt(s_)); }

 private:
  double s_ = 0;
};

void require_finite(const matrix<double>& M, const char* what) {
  for (Eigen::Index i = 0; i < M.size(); ++i)
    if (!std::isfinite(M.data()[i])) throw input_error(std::string("singular values: ") + what + " is not finite");
}

// α ≥ ‖QᵀQ − I‖₂ for Q (k×c): ‖Ĝ − I‖_F + γ_k‖Q‖_F² + c·k·η  (P16, step 2), rounded up;
// Ĝ = fl(QᵀQ) by BLAS with |Ĝ − QᵀQ| ≤ γ_k|Q|ᵀ|Q| + kη and ‖|Q|ᵀ|Q|‖_F ≤ ‖Q‖_F².
double orthogonality_defect_up(const matrix<double>& Q) {
  const matrix<double> G = approx_product_blas(Q, Q, true);
  frobenius_up d, q;
  for (Eigen::Index j = 0; j < G.cols(); ++j)
    for (Eigen::Index i = 0; i < G.rows(); ++i) {
      const double x = i == j ? up(std::fabs(G(i, j) - 1.0) * (1.0 + 0x1p-51)) : G(i, j);  // |fl(g − 1) − (g − 1)| ≤ u|g − 1|
      d.add(x);
    }
  for (Eigen::Index i = 0; i < Q.size(); ++i) q.add(Q.data()[i]);
  const double qf = q.value();
  const double k = static_cast<double>(Q.rows()), c = static_cast<double>(Q.cols());
  return up(up(d.value() + up(gamma_up(Q.rows()) * up(qf * qf))) + up(up(c * k) * eta));
}

// (4) the enclosures from the factors' bounds, every end rounded outward (P16, step 4).
void enclosures_from_factors(const std::vector<double>& s, double alpha, double beta, double rho,
                             singular_value_enclosures& out) {
  std::vector<double> a(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) a[i] = std::fabs(s[i]);
  std::sort(a.begin(), a.end(), [](double x, double y) { return y < x; });
  const double lo_u = down(std::sqrt(down(1.0 - alpha))), hi_u = up(std::sqrt(up(1.0 + alpha)));
  const double lo_v = up(std::sqrt(up(1.0 + beta))), hi_v = down(std::sqrt(down(1.0 - beta)));
  out.sigma.resize(a.size());
  out.certified_positive = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    double lo = down(down(a[i] * lo_u) - rho);
    lo = lo > 0 ? down(lo / lo_v) : 0.0;
    const double hi = up(up(up(a[i] * hi_u) + rho) / hi_v);
    mpfi_set_prec(out.sigma[i].backend().data(), 53);
    mpfi_interv_d(out.sigma[i].backend().data(), lo, hi);
    if (lo > 0) ++out.certified_positive;
  }
}

}  // namespace

singular_value_enclosures certified_singular_values_binary64(const binary64_enclosure& in) {
  binary64_svd_factors unused;
  return certified_singular_values_binary64(in, unused);
}

singular_value_enclosures certified_singular_values_binary64(const binary64_enclosure& in, binary64_svd_factors& keep) {
  keep = binary64_svd_factors{};
  const bool has_rad = in.rad.size() != 0;
  if (has_rad && (in.rad.rows() != in.mid.rows() || in.rad.cols() != in.mid.cols()))
    throw input_error("singular values: radius and midpoint differ in shape");
  require_finite(in.mid, "the midpoint");
  if (has_rad) require_finite(in.rad, "the radius");
  // m ≥ n: work with Aᵀ otherwise (the same singular values).
  const bool tr = in.mid.rows() < in.mid.cols();
  const matrix<double> A = tr ? matrix<double>(in.mid.transpose()) : in.mid;
  const Eigen::Index m = A.rows(), n = A.cols();
  precision_guard g(53);
  singular_value_enclosures out;
  out.bits = 53;
  out.sigma.resize(static_cast<std::size_t>(n));
  if (n == 0) return out;

  // (1) approximate factors (approx tier): A ≈ U diag(s) Vᵀ, U m×n, V n×n.
  matrix<double> U, V;
  std::vector<double> s;
  const bool ok = approx_svd_lapack(A, U, s, V);
  auto nothing_claimed = [&] {
    for (auto& x : out.sigma) mpfi_interv_d(x.backend().data(), 0.0, inf);
    out.certified_positive = 0;
    out.residual_bound = inf;
    out.orthogonality_defect_u = inf;
    out.orthogonality_defect_v = inf;
    return out;
  };
  if (!ok) return nothing_claimed();
  for (const matrix<double>* M : {&U, &V})
    for (Eigen::Index i = 0; i < M->size(); ++i)
      if (!std::isfinite(M->data()[i])) return nothing_claimed();

  // (2) α ≥ ‖UᵀU − I‖₂, β ≥ ‖VᵀV − I‖₂.
  const double alpha = orthogonality_defect_up(U), beta = orthogonality_defect_up(V);
  out.orthogonality_defect_u = alpha;
  out.orthogonality_defect_v = beta;
  if (!(alpha < 1.0) || !(beta < 1.0)) return nothing_claimed();

  // (3) ρ ≥ ‖Ã V − U diag(s)‖₂ for every Ã inside the enclosure:
  //   (1 + 2u)‖R̂‖_F + γ_n‖|A||V|‖_F + 2u‖fl(U diag s)‖_F + √(mn)(n + 2)η + ‖rad‖_F √(1 + β),
  // R̂ = fl(fl(AV) − fl(U diag s)) (P16, step 3).
  const matrix<double> P = approx_product_blas(A, V);
  const matrix<double> C = approx_product_blas(A.cwiseAbs(), V.cwiseAbs());
  frobenius_up r, us, c, rd;
  for (Eigen::Index j = 0; j < n; ++j)
    for (Eigen::Index i = 0; i < m; ++i) {
      const double uj = U(i, j) * s[static_cast<std::size_t>(j)];
      r.add(P(i, j) - uj);
      us.add(uj);
      c.add(C(i, j));
    }
  if (has_rad)
    for (Eigen::Index i = 0; i < in.rad.size(); ++i) rd.add(in.rad.data()[i]);
  const double gn = gamma_up(static_cast<std::size_t>(n));
  const double mn = static_cast<double>(m) * static_cast<double>(n);
  const double c_exact = up(up(c.value() / down(1.0 - gn)) + up(up(std::sqrt(mn) + 1.0) * up(static_cast<double>(n) * eta)));
  double rho = up(r.value() * (1.0 + 0x1p-51));
  rho = up(rho + up(gn * c_exact));
  rho = up(rho + up(0x1p-52 * us.value()));
  rho = up(rho + up(up(up(std::sqrt(mn) + 1.0) * static_cast<double>(n + 2)) * eta));
  if (has_rad) rho = up(rho + up(rd.value() * up(std::sqrt(up(1.0 + beta)))));
  out.residual_bound = rho;
  if (!std::isfinite(rho)) return nothing_claimed();

  keep.transposed = tr;
  keep.alpha = alpha;
  keep.beta = beta;
  keep.rho = rho;
  keep.valid = true;
  enclosures_from_factors(s, alpha, beta, rho, out);
  keep.U = std::move(U);
  keep.V = std::move(V);
  keep.s = std::move(s);
  return out;
}

bool tighten_residual_split(const binary64_enclosure& in, binary64_svd_factors& F, singular_value_enclosures& out,
                            unsigned threads) {
  if (!F.valid) return false;
  const bool has_rad = in.rad.size() != 0;
  const matrix<double> A = F.transposed ? matrix<double>(in.mid.transpose()) : in.mid;
  const Eigen::Index m = A.rows(), n = A.cols();
  if (n == 0 || F.U.rows() != m || F.U.cols() != n || F.V.rows() != n || F.V.cols() != n ||
      static_cast<Eigen::Index>(F.s.size()) != n || out.sigma.size() != F.s.size())
    throw std::invalid_argument("tighten_residual_split: the factors are not those of this enclosure");
  // Y = RN_p(A·V), |Y − AV| ≤ 2^-p|Y| + eps entrywise (detail::split::product), p = 128 bits and
  // slices for 64: every slice product exact in binary64 whatever the BLAS does.
  constexpr long p = 128;
  precision_guard g(p);
  const int beta = detail::split::slice_bits(n);
  if (beta < 8) return false;
  const int S = detail::split::slice_count(64, beta);
  mpfr_float eps;
  const matrix<mpfr_float> Y = detail::split::product(detail::split::slice(A, S, beta), false,
                                                      detail::split::slice(F.V, S, beta), n, S, beta, eps, threads);
  // r̂ = RN_p(Y − U·diag s) (U_ij·s_j exact at 128 bits): |r̂ − (Y − U diag s)| ≤ 2^-p|r̂|.
  // ‖ÃV − U diag s‖_F ≤ (1 + 2^-p)‖r̂‖_F + 2^-p‖Y‖_F + √(mn)·eps + ‖rad‖_F·√(1 + β) (P16, part B′).
  std::vector<frobenius_up> r(static_cast<std::size_t>(n)), y(static_cast<std::size_t>(n));
  parallel_for(static_cast<std::size_t>(n), threads, [&](std::size_t jj) {
    const Eigen::Index j = static_cast<Eigen::Index>(jj);
    mpfr_t t, d;
    mpfr_init2(t, p);
    mpfr_init2(d, p);
    for (Eigen::Index i = 0; i < m; ++i) {
      mpfr_set_d(t, F.U(i, j), MPFR_RNDN);
      mpfr_mul_d(t, t, F.s[jj], MPFR_RNDN);  // exact: 106 bits
      mpfr_sub(d, Y(i, j).backend().data(), t, MPFR_RNDN);
      r[jj].add(mpfr_get_d(d, MPFR_RNDA));  // |value| ≥ |d|: rounded away from zero
      y[jj].add(mpfr_get_d(Y(i, j).backend().data(), MPFR_RNDA));
    }
    mpfr_clear(t);
    mpfr_clear(d);
  });
  frobenius_up rr, yy, rd;
  for (std::size_t j = 0; j < r.size(); ++j) {
    const double a = r[j].value(), b = y[j].value();
    rr.add(a);
    yy.add(b);
  }
  if (has_rad)
    for (Eigen::Index i = 0; i < in.rad.size(); ++i) rd.add(in.rad.data()[i]);
  const double mn = static_cast<double>(m) * static_cast<double>(n);
  const double e = mpfr_get_d(eps.backend().data(), MPFR_RNDU);
  double rho = up(rr.value() * (1.0 + 0x1p-52));
  rho = up(rho + up(yy.value() * 0x1p-127));
  rho = up(rho + up(up(std::sqrt(mn) + 1.0) * e));
  if (has_rad) rho = up(rho + up(rd.value() * up(std::sqrt(up(1.0 + F.beta)))));
  if (!std::isfinite(rho) || !(rho < F.rho)) return false;
  F.rho = rho;
  enclosures_from_factors(F.s, F.alpha, F.beta, rho, out);
  out.residual_bound = rho;
  return true;
}

}  // namespace attncert

namespace attncert {

mpfr_float triangular_determinant_lower_bound(const binary64_enclosure& A) {
  mpfr_float d;
  mpfr_set_prec(d.backend().data(), 64);
  mpfr_set_ui(d.backend().data(), 0, MPFR_RNDN);
  const Eigen::Index n = A.mid.rows();
  const bool has_rad = A.rad.size() != 0;
  if (n == 0 || A.mid.cols() != n || (has_rad && (A.rad.rows() != n || A.rad.cols() != n))) return d;
  auto zero = [&](Eigen::Index i, Eigen::Index j) { return A.mid(i, j) == 0 && (!has_rad || A.rad(i, j) == 0); };
  bool lower = true, upper = true;
  for (Eigen::Index j = 0; j < n && (lower || upper); ++j)
    for (Eigen::Index i = 0; i < n && (lower || upper); ++i)
      if (!zero(i, j)) {
        if (j > i) lower = false;
        if (j < i) upper = false;
      }
  if (!lower && !upper) return d;
  mpfr_t x;
  mpfr_init2(x, 64);
  mpfr_set_ui(d.backend().data(), 1, MPFR_RNDN);
  for (Eigen::Index i = 0; i < n; ++i) {
    const double m = A.mid(i, i), r = has_rad ? A.rad(i, i) : 0.0;
    if (!std::isfinite(m) || !(r >= 0) || !std::isfinite(r)) {
      mpfr_set_ui(d.backend().data(), 0, MPFR_RNDN);
      break;
    }
    mpfr_set_d(x, std::fabs(m), MPFR_RNDD);  // exact: 64 ≥ 53 bits
    mpfr_sub_d(x, x, r, MPFR_RNDD);           // ≤ |mid| − rad ≤ |Ã_ii|
    if (mpfr_sgn(x) <= 0) {
      mpfr_set_ui(d.backend().data(), 0, MPFR_RNDN);
      break;
    }
    mpfr_mul(d.backend().data(), d.backend().data(), x, MPFR_RNDD);
  }
  mpfr_clear(x);
  return d;
}

std::size_t raise_lower_ends_by_determinant(const mpfr_float& d, singular_value_enclosures& sv) {
  const std::size_t n = sv.sigma.size();
  if (n == 0 || !(mpfr_sgn(d.backend().data()) > 0) || !mpfr_number_p(d.backend().data())) return 0;
  std::size_t raised = 0;
  mpfr_t prefix, q, b, lo, hi;  // prefix ≥ Π_{l<i} hi_l (rounded up), b ≤ the bound (rounded down)
  for (mpfr_ptr v : {prefix, q, b, lo, hi}) mpfr_init2(v, 64);
  mpfr_set_ui(prefix, 1, MPFR_RNDN);
  for (std::size_t i = 0; i < n; ++i) {
    mpfi_ptr s = sv.sigma[i].backend().data();
    mpfr_div(q, d.backend().data(), prefix, MPFR_RNDD);
    mpfr_rootn_ui(b, q, static_cast<unsigned long>(n - i), MPFR_RNDD);
    // the ends at their own precision: a raised lower end keeps the upper end exactly
    mpfr_set_prec(lo, mpfi_get_prec(s));
    mpfr_set_prec(hi, mpfi_get_prec(s));
    mpfi_get_left(lo, s);
    mpfi_get_right(hi, s);
    if (mpfr_sgn(b) > 0 && mpfr_cmp(b, lo) > 0) {
      if (mpfr_cmp(b, hi) > 0) {
        for (mpfr_ptr v : {prefix, q, b, lo, hi}) mpfr_clear(v);
        throw std::logic_error("singular values: the determinant's lower bound passes an upper end (a bound is wrong)");
      }
      mpfr_prec_t pr = std::max(mpfi_get_prec(s), mpfr_get_prec(b));
      mpfi_set_prec(s, pr);  // clears s: set both ends again
      mpfi_interv_fr(s, b, hi);
      ++raised;
    }
    if (!mpfr_number_p(hi) || mpfr_sgn(hi) <= 0) break;  // the prefix is no longer finite and positive: no bound below
    mpfr_mul(prefix, prefix, hi, MPFR_RNDU);
  }
  for (mpfr_ptr v : {prefix, q, b, lo, hi}) mpfr_clear(v);
  sv.certified_positive = 0;
  for (const auto& x : sv.sigma) sv.certified_positive += lower_of(x) > 0;
  return raised;
}

}  // namespace attncert
