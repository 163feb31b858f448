// Singular values at binary64 speed: LAPACK (approx) and Rump's residual enclosure (enclosure
// tier).  The derivation, with every bound below, is proofs/P16-fast-singular-values.md.
#include "attncert/linalg/fast_svd.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "attncert/error.hpp"
#include "attncert/number/outward.hpp"
#include "attncert/linalg/lapack.hpp"
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
  // (4) the enclosures, every end rounded outward.
  std::vector<double> a(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) a[i] = std::fabs(s[i]);
  std::sort(a.begin(), a.end(), [](double x, double y) { return y < x; });
  const double lo_u = down(std::sqrt(down(1.0 - alpha))), hi_u = up(std::sqrt(up(1.0 + alpha)));
  const double lo_v = up(std::sqrt(up(1.0 + beta))), hi_v = down(std::sqrt(down(1.0 - beta)));
  out.certified_positive = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    double lo = down(down(a[i] * lo_u) - rho);
    lo = lo > 0 ? down(lo / lo_v) : 0.0;
    const double hi = up(up(up(a[i] * hi_u) + rho) / hi_v);
    mpfi_interv_d(out.sigma[i].backend().data(), lo, hi);
    if (lo > 0) ++out.certified_positive;
  }
  keep.U = std::move(U);
  keep.V = std::move(V);
  keep.s = std::move(s);
  return out;
}

}  // namespace attncert
