// Tests of attncert/linalg/fast_svd.hpp: certified singular values at binary64 speed
// (LAPACK's SVD, then the residual bound of proofs/P16).
//
// Ground truth never comes from the code under test:
//  * an independent reference: Eigen's JacobiSVD in mpfr_float at 4 × 53 = 212 bits of the exact
//    binary64 matrix (its error, ~k·2⁻²¹²·σ₁, is far below any binary64 enclosure's width);
//  * the exact identity Σσᵢ² = ‖A‖_F² (a rational for a binary64 matrix) inside the interval sum;
//  * the exact rank over ℚ (FLINT): never more singular values certified positive.
// Matrices: random normal, graded singular values down to 1e-300, near rank-deficient (rank k
// plus a 1e-12 perturbation), duplicated rows (exactly singular), tiny entries (products in the
// subnormal range), wide and tall shapes, and midpoint-radius enclosures (every corner inside).
// Seeds are printed and can be overridden with ATTNCERT_SEED.  The seeded campaign
// (`campaign`, disabled by default) runs with ctest -C campaign -L campaign.
#define BOOST_TEST_MODULE linalg_fast_svd
#include <boost/test/unit_test.hpp>

#include <Eigen/QR>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "../support.hpp"
#include "attncert/linalg/exact.hpp"
#include "attncert/linalg/fast_svd.hpp"
#include "attncert/linalg/spectra.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/number/precision_guard.hpp"

using namespace attncert;
using Q = mpq_rational;

namespace {

matrix<Q> exact_of(const matrix<double>& A) {
  matrix<Q> E(A.rows(), A.cols());
  for (Eigen::Index i = 0; i < A.size(); ++i) E.data()[i] = Q(A.data()[i]);  // exact: a binary64 number
  return E;
}

matrix<double> randn(std::mt19937_64& rng, Eigen::Index m, Eigen::Index n) {
  std::normal_distribution<double> N(0, 1);
  matrix<double> A(m, n);
  for (Eigen::Index i = 0; i < A.size(); ++i) A.data()[i] = N(rng);
  return A;
}

// A random orthogonal-ish factor (QR of a normal matrix, in binary64: only nearly orthogonal,
// which does not matter — the exact matrix is whatever binary64 matrix results).
matrix<double> random_orthogonal(std::mt19937_64& rng, Eigen::Index n) {
  Eigen::HouseholderQR<matrix<double>> qr(randn(rng, n, n));
  return qr.householderQ() * matrix<double>::Identity(n, n);
}

// U·diag(10^(e_i))·Vᵀ with exponents from 0 down to `lowest` (graded singular values).
matrix<double> graded(std::mt19937_64& rng, Eigen::Index n, double lowest) {
  matrix<double> D = matrix<double>::Zero(n, n);
  for (Eigen::Index i = 0; i < n; ++i) D(i, i) = std::pow(10.0, lowest * static_cast<double>(i) / static_cast<double>(n - 1));
  return random_orthogonal(rng, n) * D * random_orthogonal(rng, n).transpose();
}

// The reference singular values of the exact matrix A at 212 bits (approx tier, decreasing).
std::vector<mpfr_float> reference(const matrix<double>& A) {
  precision_guard g(212);
  matrix<mpfr_float> M(A.rows(), A.cols());
  for (Eigen::Index i = 0; i < A.size(); ++i) M.data()[i] = A.data()[i];
  return approx_singular_values(M);
}

// Every check of the enclosures r of the singular values of the exact binary64 matrix A.
void check_sound(const matrix<double>& A, const singular_value_enclosures& r, const std::string& what) {
  const std::size_t k = static_cast<std::size_t>(std::min(A.rows(), A.cols()));
  BOOST_TEST_REQUIRE(r.sigma.size() == k, what);
  const matrix<Q> E = exact_of(A);
  const std::size_t rk = rank(E);
  BOOST_TEST(r.certified_positive <= rk, what << ": " << r.certified_positive << " certified > 0, exact rank " << rk);
  const std::vector<mpfr_float> ref = reference(A);
  precision_guard g(212);
  // the reference within its own error: 64·k·2^-212·σ₁ (far below the binary64 widths ~2^-53·σ₁,
  // so a missing term of the bound is still caught)
  const mpfr_float tol = ldexp(ref.empty() ? mpfr_float(0) : ref[0], -212) * (64 * static_cast<long>(k));
  mpfi_float sum(0);
  std::size_t positive = 0, misses = 0;
  for (std::size_t i = 0; i < k; ++i) {
    const mpfr_float lo = lower_of(r.sigma[i]), hi = upper_of(r.sigma[i]);
    const bool in = lo <= ref[i] + tol && ref[i] - tol <= hi;
    if (!in && misses++ < 5)
      BOOST_ERROR(what << ": sigma[" << i << "] = [" << lo.str(20) << ", " << hi.str(20) << "] misses " << ref[i].str(25));
    if (i >= rk) BOOST_TEST(lo == 0, what << ": sigma[" << i << "] beyond the exact rank has lower end " << lo.str(10));
    BOOST_TEST(lo >= 0);
    positive += lo > 0;
    sum += r.sigma[i] * r.sigma[i];
  }
  BOOST_TEST(misses == 0u, what << ": " << misses << " enclosures miss the reference");
  BOOST_TEST(positive == r.certified_positive, what);
  Q f(0);
  for (Eigen::Index i = 0; i < E.size(); ++i) f += E.data()[i] * E.data()[i];
  BOOST_TEST((mpfr_cmp_q(lower_of(sum).backend().data(), f.backend().data()) <= 0 &&
              mpfr_cmp_q(upper_of(sum).backend().data(), f.backend().data()) >= 0),
             what << ": the sum of squares excludes ||A||_F^2");
}

// The enclosures of A, then those whose residual bound comes from split products (P16 part B′):
// both must hold, and the second never wider.
void check_point(const matrix<double>& A, const std::string& what) {
  binary64_svd_factors F;
  const binary64_enclosure in{A, matrix<double>()};
  const singular_value_enclosures r = certified_singular_values_binary64(in, F);
  check_sound(A, r, what);
  singular_value_enclosures t = r;
  if (tighten_residual_split(in, F, t)) {
    check_sound(A, t, what + " (split residual)");
    for (std::size_t i = 0; i < t.sigma.size(); ++i)
      BOOST_TEST((lower_of(t.sigma[i]) >= lower_of(r.sigma[i]) && upper_of(t.sigma[i]) <= upper_of(r.sigma[i])), what << ": sigma[" << i << "] wider after the split residual");
  }
}

// One round of every family of matrices (the quick suite runs one round, the campaign many).
void one_round(std::mt19937_64& rng, const std::string& tag) {
  std::uniform_int_distribution<int> size(2, 24);
  const Eigen::Index m = size(rng), n = size(rng);
  check_point(randn(rng, m, n), tag + " random " + std::to_string(m) + "x" + std::to_string(n));
  const Eigen::Index g = std::max<Eigen::Index>(3, std::min(m, n));
  check_point(graded(rng, g, -300), tag + " graded to 1e-300, n = " + std::to_string(g));
  check_point(graded(rng, g, -15), tag + " graded to 1e-15, n = " + std::to_string(g));
  // near rank-deficient: rank 2 plus a 1e-12 perturbation
  matrix<double> L = randn(rng, m, 2) * randn(rng, 2, n) + 1e-12 * randn(rng, m, n);
  check_point(L, tag + " rank 2 + 1e-12");
  // exactly singular: duplicated rows
  matrix<double> D = randn(rng, std::max<Eigen::Index>(m, 3), n);
  D.row(1) = D.row(0);
  D.row(2) = D.row(0) * 0.5;
  check_point(D, tag + " duplicated rows");
  // tiny entries: every product is subnormal or underflows
  check_point(randn(rng, m, n) * 0x1p-540, tag + " entries ~2^-540");
  check_point(randn(rng, m, n) * 0x1p-1030, tag + " subnormal entries");
  // a midpoint-radius enclosure: the midpoint and a corner are inside, both enclosed
  const matrix<double> mid = randn(rng, m, n);
  matrix<double> rad(m, n), corner(m, n);
  std::uniform_real_distribution<double> U(0, 1e-9);
  for (Eigen::Index i = 0; i < mid.size(); ++i) {
    rad.data()[i] = U(rng);
    corner.data()[i] = mid.data()[i] + ((i % 3) ? rad.data()[i] : -rad.data()[i]);
  }
  binary64_svd_factors F;
  auto r = certified_singular_values_binary64({mid, rad}, F);
  check_sound(mid, r, tag + " enclosure: midpoint");
  if (std::uniform_int_distribution<int>(0, 1)(rng)) {  // half the rounds: the split residual, radius included
    const double before = F.rho;
    if (tighten_residual_split({mid, rad}, F, r)) BOOST_TEST(F.rho < before);
    check_sound(mid, r, tag + " enclosure, split residual: midpoint");
  }
  // the corner is a binary64 matrix inside only if mid ± rad rounded stays inside: use the exact sum
  // when it is representable (it is, for these magnitudes, unless rounding moved it out: skip those)
  bool inside = true;
  for (Eigen::Index i = 0; i < mid.size(); ++i)
    inside = inside && std::fabs(corner.data()[i] - mid.data()[i]) <= rad.data()[i];
  if (inside) check_sound(corner, r, tag + " enclosure: corner");
}

}  // namespace

BOOST_AUTO_TEST_CASE(enclosures_contain_the_212_bit_reference) {
  auto rng = make_rng(1);
  one_round(rng, "quick");
}

BOOST_AUTO_TEST_CASE(well_conditioned_matrices_are_certified_tightly) {
  auto rng = make_rng(2);
  const matrix<double> A = randn(rng, 40, 30);
  const auto r = certified_singular_values_binary64({A, matrix<double>()});
  BOOST_TEST(r.certified_positive == 30u);
  for (const auto& s : r.sigma) {
    const double lo = mpfr_get_d(lower_of(s).backend().data(), MPFR_RNDD), hi = mpfr_get_d(upper_of(s).backend().data(), MPFR_RNDU);
    BOOST_TEST((hi - lo) / lo < 1e-11, "relative width " << (hi - lo) / lo);
  }
  BOOST_TEST(r.orthogonality_defect_u < 1e-12);
  BOOST_TEST(r.orthogonality_defect_v < 1e-12);
  // the transposed matrix: the same singular values, enclosed too
  const auto t = certified_singular_values_binary64({matrix<double>(A.transpose()), matrix<double>()});
  BOOST_TEST(t.certified_positive == 30u);
  check_sound(A.transpose(), t, "transposed");
}

BOOST_AUTO_TEST_CASE(lapack_values_agree_with_the_reference) {
  auto rng = make_rng(3);
  const matrix<double> A = randn(rng, 17, 11);
  const auto s = approx_singular_values_lapack(A);
  const auto ref = reference(A);
  BOOST_TEST_REQUIRE(s.size() == ref.size());
  for (std::size_t i = 0; i < s.size(); ++i) BOOST_TEST(std::fabs(s[i] - ref[i].convert_to<double>()) <= 1e-13 * s[0]);
  const auto f = approx_singular_values_lapack(matrix<float>(A.cast<float>()));
  for (std::size_t i = 0; i < s.size(); ++i) BOOST_TEST(std::fabs(f[i] - s[i]) <= 1e-4 * s[0]);
  // a non-finite matrix has NaN singular values (as an SVD in the format would), no exception
  matrix<double> B = A;
  B(2, 3) = std::numeric_limits<double>::infinity();
  for (double x : approx_singular_values_lapack(B)) BOOST_TEST(std::isnan(x));
}

// The split residual (P16 part B′) drops BLAS's γ_n‖|A||V|‖_F: at n = 64 it is well below the
// first bound (the gap grows as n: 55x at n = 160), and the enclosures hold (the 212-bit reference).
BOOST_AUTO_TEST_CASE(split_residual_is_far_below_the_blas_bound) {
  auto rng = make_rng(4);
  for (const bool tall : {false, true}) {
    const matrix<double> A = graded(rng, 64, -20);
    const matrix<double> M = tall ? matrix<double>(A.transpose().topRows(48)) : A;  // 48 x 64: transposed inside
    binary64_svd_factors F;
    const binary64_enclosure in{M, matrix<double>()};
    singular_value_enclosures r = certified_singular_values_binary64(in, F);
    const double blas = F.rho;
    BOOST_TEST_REQUIRE(tighten_residual_split(in, F, r));
    BOOST_TEST_MESSAGE("rho: BLAS " << blas << ", split " << F.rho);
    BOOST_TEST(F.rho < blas / 8);
    BOOST_TEST(mpfr_get_d(r.residual_bound.backend().data(), MPFR_RNDU) == F.rho);
    check_sound(M, r, tall ? "graded 48x64, split residual" : "graded 64x64, split residual");
  }
  // factors of another matrix: refused
  binary64_svd_factors F;
  singular_value_enclosures r = certified_singular_values_binary64({randn(rng, 5, 5), matrix<double>()}, F);
  BOOST_CHECK_THROW(tighten_residual_split({randn(rng, 6, 6), matrix<double>()}, F, r), std::invalid_argument);
}

// ---- the determinant's lower bounds (P16 part E) ----

namespace {

// sv with point upper ends hi[i] (decreasing) and lower ends 0.
singular_value_enclosures upper_ends(const std::vector<double>& hi) {
  singular_value_enclosures sv;
  sv.sigma.resize(hi.size());
  for (std::size_t i = 0; i < hi.size(); ++i) mpfi_interv_d(sv.sigma[i].backend().data(), 0.0, hi[i]);
  return sv;
}

}  // namespace

// With exact upper ends the bound of σ_i is the geometric mean of σ_i … σ_{n−1} (exactly what
// |det| / Π_{l<i} σ_l leaves), to 64-bit rounding; for σ_{n−1} it is σ_{n−1} itself.
BOOST_AUTO_TEST_CASE(determinant_bounds_are_the_trailing_geometric_means) {
  const std::vector<double> s = {8.0, 2.0, 0.5, 1e-3, 1e-40, 1e-200};
  mpfr_float d;
  mpfr_set_prec(d.backend().data(), 64);
  mpfr_set_ui(d.backend().data(), 1, MPFR_RNDN);
  for (double x : s) mpfr_mul_d(d.backend().data(), d.backend().data(), x, MPFR_RNDD);
  singular_value_enclosures sv = upper_ends(s);
  const std::size_t raised = raise_lower_ends_by_determinant(d, sv);
  BOOST_TEST(raised == s.size());
  BOOST_TEST(sv.certified_positive == s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    long double logmean = 0;
    for (std::size_t l = i; l < s.size(); ++l) logmean += std::log(static_cast<long double>(s[l]));
    const double mean = static_cast<double>(std::exp(logmean / static_cast<long double>(s.size() - i)));
    const double lo = mpfr_get_d(lower_of(sv.sigma[i]).backend().data(), MPFR_RNDN);
    BOOST_TEST(lo <= mean * (1 + 1e-15), "sigma[" << i << "]: " << lo << " above the geometric mean " << mean);
    BOOST_TEST(lo >= mean * (1 - 1e-12), "sigma[" << i << "]: " << lo << " far below the geometric mean " << mean);
    BOOST_TEST(mpfr_get_d(upper_of(sv.sigma[i]).backend().data(), MPFR_RNDN) == s[i]);  // upper ends kept exactly
  }
  // a lower end already higher is kept; d = 0 changes nothing
  singular_value_enclosures kept = upper_ends(s);
  mpfi_interv_d(kept.sigma[5].backend().data(), 0.9e-200, 1e-200);
  raise_lower_ends_by_determinant(d, kept);
  BOOST_TEST(mpfr_get_d(lower_of(kept.sigma[5]).backend().data(), MPFR_RNDN) >= 0.9e-200);
  singular_value_enclosures none = upper_ends(s);
  mpfr_float zero;
  mpfr_set_ui(zero.backend().data(), 0, MPFR_RNDN);
  BOOST_TEST(raise_lower_ends_by_determinant(zero, none) == 0u);
  BOOST_TEST(none.certified_positive == 0u);
  // an infinite upper end stops the bounds below it
  singular_value_enclosures inf_end = upper_ends(s);
  mpfi_interv_d(inf_end.sigma[2].backend().data(), 0.0, std::numeric_limits<double>::infinity());
  raise_lower_ends_by_determinant(d, inf_end);
  BOOST_TEST(lower_of(inf_end.sigma[3]) == 0);
  BOOST_TEST(lower_of(inf_end.sigma[1]) > 0);
  // upper ends that a true determinant contradicts: an internal error, not a silent enclosure
  singular_value_enclosures wrong = upper_ends({8.0, 2.0, 0.5, 1e-3, 1e-40, 1e-210});
  BOOST_CHECK_THROW(raise_lower_ends_by_determinant(d, wrong), std::logic_error);
}

BOOST_AUTO_TEST_CASE(triangular_determinant_lower_bound_of_enclosures) {
  auto rng = make_rng(5);
  const Eigen::Index n = 12;
  matrix<double> L = randn(rng, n, n);
  for (Eigen::Index j = 0; j < n; ++j)
    for (Eigen::Index i = 0; i < j; ++i) L(i, j) = 0;
  // exact |det| = Π|L_ii| in ℚ; the bound is below it and within 2^-60 relative
  Q det(1);
  for (Eigen::Index i = 0; i < n; ++i) det *= Q(std::fabs(L(i, i)));
  const mpfr_float d = triangular_determinant_lower_bound({L, matrix<double>()});
  BOOST_TEST(mpfr_cmp_q(d.backend().data(), det.backend().data()) <= 0);
  mpfr_float r;
  mpfr_set_prec(r.backend().data(), 128);
  mpfr_set_q(r.backend().data(), det.backend().data(), MPFR_RNDN);
  mpfr_sub(r.backend().data(), r.backend().data(), d.backend().data(), MPFR_RNDU);
  mpfr_div_q(r.backend().data(), r.backend().data(), det.backend().data(), MPFR_RNDU);
  BOOST_TEST(mpfr_get_d(r.backend().data(), MPFR_RNDU) < 0x1p-58);
  // the upper triangle (transposed) gives the same; a radius lowers each factor to |mid| − rad
  const mpfr_float dt = triangular_determinant_lower_bound({matrix<double>(L.transpose()), matrix<double>()});
  BOOST_TEST(mpfr_equal_p(dt.backend().data(), d.backend().data()));
  const matrix<double> rad = matrix<double>::Identity(n, n) * 1e-3;
  Q det_r(1);
  bool straddles = false;
  for (Eigen::Index i = 0; i < n; ++i) {
    const Q f = Q(std::fabs(L(i, i))) - Q(1e-3);
    straddles = straddles || f <= 0;
    det_r *= f;
  }
  const mpfr_float dr = triangular_determinant_lower_bound({L, rad});
  if (straddles) BOOST_TEST(mpfr_zero_p(dr.backend().data()));
  else BOOST_TEST((mpfr_cmp_q(dr.backend().data(), det_r.backend().data()) <= 0 && mpfr_sgn(dr.backend().data()) > 0));
  // not triangular, a nonzero radius above the diagonal, a diagonal interval holding 0, not square: 0
  matrix<double> F = L;
  F(0, n - 1) = 1e-300;
  BOOST_TEST(mpfr_zero_p(triangular_determinant_lower_bound({F, matrix<double>()}).backend().data()));
  matrix<double> R = matrix<double>::Zero(n, n);
  R(2, 5) = 1e-300;
  BOOST_TEST(mpfr_zero_p(triangular_determinant_lower_bound({L, R}).backend().data()));
  matrix<double> Z = L, ZR = matrix<double>::Zero(n, n);
  ZR(3, 3) = std::fabs(Z(3, 3));
  BOOST_TEST(mpfr_zero_p(triangular_determinant_lower_bound({Z, ZR}).backend().data()));
  BOOST_TEST(mpfr_zero_p(triangular_determinant_lower_bound({randn(rng, 3, 4), matrix<double>()}).backend().data()));
}

// End to end: a unit lower triangular matrix with entries −1 below the diagonal (σ_min ~ 2^-n)
// and 2^-30 perturbations: binary64 leaves its trailing σ at 0, the determinant raises them above
// 0, and every enclosure holds (the 212-bit reference).
BOOST_AUTO_TEST_CASE(determinant_decides_the_trailing_values_of_a_triangular_matrix) {
  auto rng = make_rng(6);
  const Eigen::Index n = 90;
  matrix<double> L = matrix<double>::Zero(n, n);
  std::uniform_real_distribution<double> U(-0x1p-30, 0x1p-30);
  for (Eigen::Index i = 0; i < n; ++i) {
    L(i, i) = 1 + U(rng);
    for (Eigen::Index j = 0; j < i; ++j) L(i, j) = -1 + U(rng);
  }
  singular_value_enclosures r = certified_singular_values_binary64({L, matrix<double>()});
  BOOST_TEST_REQUIRE(r.certified_positive < static_cast<std::size_t>(n));
  const mpfr_float d = triangular_determinant_lower_bound({L, matrix<double>()});
  BOOST_TEST_REQUIRE(d > 0);
  raise_lower_ends_by_determinant(d, r);
  BOOST_TEST(r.certified_positive == static_cast<std::size_t>(n));
  check_sound(L, r, "unit lower triangular, -1 below, raised by the determinant");
}

BOOST_AUTO_TEST_CASE(bad_input) {
  matrix<double> A = matrix<double>::Ones(3, 3);
  A(1, 1) = std::nan("");
  BOOST_TEST(!input_error_of([&] { certified_singular_values_binary64({A, matrix<double>()}); }).empty());
  BOOST_TEST(!input_error_of([&] { certified_singular_values_binary64({matrix<double>::Ones(3, 3), matrix<double>::Ones(2, 3)}); }).empty());
  const auto e = certified_singular_values_binary64({matrix<double>(0, 4), matrix<double>()});
  BOOST_TEST(e.sigma.empty());
}

// The seeded campaign: ATTNCERT_FAST_SVD_ROUNDS rounds (default 200) of every family.
BOOST_AUTO_TEST_CASE(campaign, *boost::unit_test::disabled()) {
  const char* env = std::getenv("ATTNCERT_FAST_SVD_ROUNDS");
  const int rounds = env ? std::atoi(env) : 200;
  auto rng = make_rng(100);
  for (int k = 0; k < rounds; ++k) one_round(rng, "round " + std::to_string(k));
}
