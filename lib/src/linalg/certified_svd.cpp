// Certified singular values (enclosure tier): the bodies of linalg/certified_svd.hpp, compiled once.
// The derivation, with every bound below, is at the top of the header (Rump 2011).
#include "attncert/linalg/certified_svd.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "attncert/deadline.hpp"
#include "attncert/linalg/spectra.hpp"
#include "attncert/number/ziv.hpp"

namespace attncert {

bool approx_svd_factors(const matrix<mpfr_float>& A, matrix<mpfr_float>& U, matrix<mpfr_float>& V) {
  std::vector<mpfr_float> sigma;
  if (!approx_jacobi_svd(A, sigma, &U, &V)) return false;
  for (const auto* M : {&U, &V})
    for (Eigen::Index i = 0; i < M->size(); ++i)
      if (!mpfr_number_p((*M)(i).backend().data())) return false;
  return true;
}

namespace detail::csvd {

mpfr_float orthogonality_defect(const matrix<mpfr_float>& Q) {
  const Eigen::Index k = Q.cols();
  frobenius_upper f;
  mpfr_float lo, hi;
  for (Eigen::Index i = 0; i < k; ++i)
    for (Eigen::Index j = i; j < k; ++j) {
      if (j == i) check_deadline();  // the command's budget and interruption: one poll per row
      mpfr_set_si(lo.backend().data(), i == j ? -1 : 0, MPFR_RNDN);  // exact
      mpfr_set_si(hi.backend().data(), i == j ? -1 : 0, MPFR_RNDN);
      for (Eigen::Index r = 0; r < Q.rows(); ++r) {
        mpfr_srcptr a = Q(r, i).backend().data(), b = Q(r, j).backend().data();
        mpfr_fma(lo.backend().data(), a, b, lo.backend().data(), MPFR_RNDD);
        mpfr_fma(hi.backend().data(), a, b, hi.backend().data(), MPFR_RNDU);
      }
      f.add(lo.backend().data(), hi.backend().data());
      if (i != j) f.add(lo.backend().data(), hi.backend().data());
    }
  return f.value();
}

matrix<mpfi_float> point_transpose_times(const matrix<mpfr_float>& X, const matrix<mpfi_float>& Y) {
  matrix<mpfi_float> C(X.cols(), Y.cols());
  mpfi_float t, s;
  for (Eigen::Index i = 0; i < X.cols(); ++i)
    for (Eigen::Index j = 0; j < Y.cols(); ++j) {
      if (j == 0) check_deadline();
      mpfi_set_si(s.backend().data(), 0);
      for (Eigen::Index r = 0; r < X.rows(); ++r) {
        mpfi_mul_fr(t.backend().data(), Y(r, j).backend().data(), X(r, i).backend().data());
        mpfi_add(s.backend().data(), s.backend().data(), t.backend().data());
      }
      mpfi_set(C(i, j).backend().data(), s.backend().data());
    }
  return C;
}

matrix<mpfi_float> times_point(const matrix<mpfi_float>& Y, const matrix<mpfr_float>& X) {
  matrix<mpfi_float> C(Y.rows(), X.cols());
  mpfi_float t, s;
  for (Eigen::Index i = 0; i < Y.rows(); ++i)
    for (Eigen::Index j = 0; j < X.cols(); ++j) {
      if (j == 0) check_deadline();
      mpfi_set_si(s.backend().data(), 0);
      for (Eigen::Index r = 0; r < Y.cols(); ++r) {
        mpfi_mul_fr(t.backend().data(), Y(i, r).backend().data(), X(r, j).backend().data());
        mpfi_add(s.backend().data(), s.backend().data(), t.backend().data());
      }
      mpfi_set(C(i, j).backend().data(), s.backend().data());
    }
  return C;
}

mpfr_float plus_infinity() {
  mpfr_float r;
  mpfr_set_inf(r.backend().data(), 1);
  return r;
}

mpfi_float nonnegative_half_line() {
  mpfi_float r;
  mpfr_float zero(0), inf = plus_infinity();
  mpfi_interv_fr(r.backend().data(), zero.backend().data(), inf.backend().data());
  return r;
}

singular_value_enclosures no_claim(std::size_t k) {
  singular_value_enclosures out;
  out.bits = current_mpfr_bits();
  out.sigma.assign(k, nonnegative_half_line());
  out.residual_bound = plus_infinity();
  out.orthogonality_defect_u = plus_infinity();
  out.orthogonality_defect_v = plus_infinity();
  return out;
}

}  // namespace detail::csvd

singular_value_enclosures certified_singular_values_with(const matrix<mpfi_float>& A, const matrix<mpfr_float>& U,
                                                         const matrix<mpfr_float>& V) {
  const Eigen::Index m = A.rows(), n = A.cols(), k = std::min(m, n);
  if (U.rows() != m || U.cols() != m || V.rows() != n || V.cols() != n)
    throw input_error("certified_singular_values_with: factors must be " + std::to_string(m) + "x" +
                      std::to_string(m) + " and " + std::to_string(n) + "x" + std::to_string(n));
  singular_value_enclosures out = detail::csvd::no_claim(static_cast<std::size_t>(k));
  for (Eigen::Index i = 0; i < A.size(); ++i)
    if (!mpfi_bounded_p(A(i).backend().data())) return out;  // also catches NaN ends
  for (const auto* Q : {&U, &V})
    for (Eigen::Index i = 0; i < Q->size(); ++i)
      if (!mpfr_number_p((*Q)(i).backend().data())) return out;

  // (2) orthogonality defects; require α, β < 1.
  const mpfr_float alpha = detail::csvd::orthogonality_defect(U);
  const mpfr_float beta = detail::csvd::orthogonality_defect(V);
  out.orthogonality_defect_u = alpha;
  out.orthogonality_defect_v = beta;
  if (!(alpha < 1) || !(beta < 1)) return out;  // point comparisons (mpfr), never intervals

  // (1) B = Uᵀ (A V) in interval arithmetic.
  const matrix<mpfi_float> B = detail::csvd::point_transpose_times(U, detail::csvd::times_point(A, V));

  // (2) ε_E from the off-diagonal part, (6) ends of |d_j|.
  detail::csvd::frobenius_upper fe;
  std::vector<mpfr_float> dlo, dhi;
  dlo.reserve(static_cast<std::size_t>(k));
  dhi.reserve(static_cast<std::size_t>(k));
  mpfi_float absd;
  for (Eigen::Index j = 0; j < n; ++j)
    for (Eigen::Index i = 0; i < m; ++i) {
      if (i == j) {
        mpfi_abs(absd.backend().data(), B(i, j).backend().data());
        dlo.push_back(lower_of(absd));
        dhi.push_back(upper_of(absd));
      } else {
        fe.add(B(i, j));
      }
    }
  const mpfr_float eps = fe.value();
  out.residual_bound = eps;
  std::sort(dlo.begin(), dlo.end(), std::greater<mpfr_float>());  // points: exact order
  std::sort(dhi.begin(), dhi.end(), std::greater<mpfr_float>());

  // (3)–(5) in MPFI: the multiplicative factors and the final ends, rounded outward.
  const mpfi_float one(1), E = thin(eps), a = thin(alpha), b = thin(beta);
  const mpfi_float grow = sqrt(mpfi_float((one + a) * (one + b)));    // ≥ ‖U‖‖V‖
  const mpfi_float shrink = sqrt(mpfi_float((one - a) * (one - b)));  // ≤ 1/(‖U⁻¹‖‖V⁻¹‖), > 0
  const mpfr_float zero(0);
  out.certified_positive = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(k); ++i) {
    mpfr_float lo = zero;
    const mpfi_float num_lo = thin(dlo[i]) - E;
    if (lower_of(num_lo) > 0) lo = lower_of(mpfi_float(num_lo / grow));
    const mpfr_float hi = upper_of(mpfi_float((thin(dhi[i]) + E) / shrink));
    mpfi_interv_fr(out.sigma[i].backend().data(), lo.backend().data(), hi.backend().data());
    if (lower_of(out.sigma[i]) > 0) ++out.certified_positive;
  }
  return out;
}

singular_value_enclosures certified_singular_values(const matrix<mpfi_float>& A) {
  const Eigen::Index m = A.rows(), n = A.cols(), k = std::min(m, n);
  if (k == 0) return detail::csvd::no_claim(0);
  matrix<mpfr_float> mid(m, n);
  for (Eigen::Index i = 0; i < A.size(); ++i) {
    if (!mpfi_bounded_p(A(i).backend().data())) return detail::csvd::no_claim(static_cast<std::size_t>(k));
    mpfi_mid(mid(i).backend().data(), A(i).backend().data());  // rounded to the current precision
  }
  matrix<mpfr_float> U, V;
  if (!approx_svd_factors(mid, U, V)) return detail::csvd::no_claim(static_cast<std::size_t>(k));
  return certified_singular_values_with(A, U, V);
}

singular_value_enclosures certified_singular_values(const matrix<mpq_rational>& A, unsigned start_bits, unsigned cap_bits,
                                                    std::size_t stop_at_positive) {
  if (start_bits > cap_bits)
    throw input_error("certified_singular_values: start precision " + std::to_string(start_bits) +
                      " exceeds the cap " + std::to_string(cap_bits));
  return ziv_escalate(precision_schedule{start_bits, cap_bits}, [&](unsigned bits) {
           singular_value_enclosures r;
           {
             precision_guard g(bits);
             r = certified_singular_values(from_rational_matrix<mpfi_float>(A));
             r.bits = g.bits();
           }
           const bool enough = r.certified_positive >= stop_at_positive;
           return ziv_step<singular_value_enclosures>{std::move(r), enough};
         })
      .value;
}

}  // namespace attncert
