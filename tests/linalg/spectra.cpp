// Tests of attncert/linalg/spectra.hpp: singular values and the statistics derived from them.
//
// Singular values are checked on matrices whose spectrum is known in closed form:
//  * diag(3, -2, 1/2)                           -> {3, 2, 1/2}
//  * H·diag(4, 1, 1/4), H the Householder reflection I - 2vvᵀ/vᵀv, v = (1, 2, 2)
//    (entries k/9: H = [[7, -4, -4], [-4, 1, -8], [-4, -8, 1]] / 9)  -> {4, 1, 1/4}
//  * R(θ)·diag(5/2, 2/5)·R(φ)ᵀ with rotations    -> {5/2, 2/5}
//  * the two-token attention matrix [[p, 1-p], [1-p, p]], p = (1 + tanh a)/2, which is
//    symmetric with eigenvalues 1 and 2p - 1 = tanh a    -> {1, tanh a}  (a > 0)
// Tolerance: forming the matrix in T perturbs each entry by at most one rounding (relative
// u = eps/2), i.e. by a matrix of 2-norm <= u‖A‖_F <= u·√n·σ1; a one- or two-sided Jacobi SVD
// of a 2×2 or 3×3 matrix adds a few more u·σ1 (Demmel–Veselić).  Every σ must therefore lie
// within 8·eps·σ1 of the exact value; for MPFR at 256 bits that is < 1e-75, well below the
// required 1e-70, and for binary16 it is 8·2^-10 ≈ 0.8 % of σ1.
// Random inputs come from std::mt19937_64 seeded with ATTNCERT_SEED if set; the seed is
// printed.
#define BOOST_TEST_MODULE linalg_spectra
#include <boost/test/unit_test.hpp>

#include "../support.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <random>
#include <tuple>
#include <type_traits>
#include <vector>

#include "attncert/error.hpp"
#include "attncert/linalg/exact.hpp"
#include "attncert/linalg/matrix.hpp"
#include "attncert/linalg/spectra.hpp"
#include "attncert/number/precision_guard.hpp"

using namespace attncert;
using Q = mpq_rational;

namespace {

using svd_types = std::tuple<float, double, binary16, bfloat16, mpfr_float>;

// MPFR computes at 256 bits in these tests (`working_precision<T> wp;`); the other types
// need no guard.
struct no_guard {
  explicit no_guard(unsigned) {}
};
template <class T>
struct working_precision : std::conditional_t<std::is_same_v<T, mpfr_float>, precision_guard, no_guard> {
  working_precision() : std::conditional_t<std::is_same_v<T, mpfr_float>, precision_guard, no_guard>(256) {}
};

// |x - y| <= k·eps_T·scale, evaluated in MPFR (the inexact references y have 512 bits; the
// right side is exact), never through y rounded to binary64.
template <class T>
bool close(const T& x, const mpfr_float& y, double k, double scale) {
  if constexpr (std::is_same_v<T, mpfr_float>) {
    const mpfr_float err = abs(mpfr_float(x - y));
    return err <= k * number_traits<T>::epsilon() * scale;
  } else {
    const double eps = number_traits<T>::to_double(number_traits<T>::epsilon());
    precision_guard g(512);  // y rounded to binary64 would be only eps/2-accurate for T = binary64
    const mpfr_float err = abs(mpfr_float(number_traits<T>::to_double(x)) - y);
    return err <= k * eps * scale;
  }
}

// The value of x as an MPFR number (exact: every approx value fits in binary64 or is MPFR).
template <class T>
mpfr_float to_mp(const T& x) {
  if constexpr (std::is_same_v<T, mpfr_float>) return x;
  else return mpfr_float(number_traits<T>::to_double(x));
}

template <class T>
T cos_in(double x) {
  if constexpr (std::is_same_v<T, mpfr_float>) return cos(mpfr_float(x));
  else return T(std::cos(x));
}
template <class T>
T sin_in(double x) {
  if constexpr (std::is_same_v<T, mpfr_float>) return sin(mpfr_float(x));
  else return T(std::sin(x));
}

template <class T>
void check_spectrum(const std::vector<T>& s, const std::vector<mpfr_float>& exact, double k = 8) {
  BOOST_TEST_REQUIRE(s.size() == exact.size());
  const double sigma1 = exact[0].convert_to<double>();
  for (std::size_t i = 0; i < s.size(); ++i)
    BOOST_TEST(close(s[i], exact[i], k, sigma1),
               "sigma_" << i << " = " << number_traits<T>::to_string(s[i], 20) << ", exact "
                        << exact[i].str(20, std::ios_base::scientific));
}

// tanh a to 512 bits (the exact value for every purpose here).
mpfr_float tanh_512(double a) {
  precision_guard g(512);
  return tanh(mpfr_float(a));
}

template <class T>
matrix<T> random_matrix(std::mt19937_64& rng, Eigen::Index r, Eigen::Index c) {
  std::uniform_real_distribution<double> d(-1, 1);
  matrix<double> m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = d(rng);
  return from_double_matrix<T>(m);
}

}  // namespace

// =====================================================================================
// singular values of known matrices
// =====================================================================================

BOOST_AUTO_TEST_CASE_TEMPLATE(singular_values_of_a_diagonal_matrix, T, svd_types) {
  working_precision<T> wp;
  matrix<T> A = matrix<T>::Zero(3, 3);
  A(0, 0) = T(0.5);
  A(1, 1) = T(3);
  A(2, 2) = T(-2);
  check_spectrum(approx_singular_values(A), {mpfr_float(3), mpfr_float(2), mpfr_float(0.5)});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(singular_values_of_householder_times_diagonal, T, svd_types) {
  working_precision<T> wp;
  const int h[3][3] = {{7, -4, -4}, {-4, 1, -8}, {-4, -8, 1}};
  const Q s[3] = {Q(4), Q(1), Q(1, 4)};
  matrix<T> A(3, 3);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) A(i, j) = from_rational<T>(Q(h[i][j], 9) * s[j]);
  check_spectrum(approx_singular_values(A), {mpfr_float(4), mpfr_float(1), mpfr_float(0.25)});
  // and the transpose (more rows than... the same shape, but the other side of the SVD)
  check_spectrum(approx_singular_values(transpose(A)), {mpfr_float(4), mpfr_float(1), mpfr_float(0.25)});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(singular_values_of_rotations_times_diagonal, T, svd_types) {
  working_precision<T> wp;
  const double th = 0.3, ph = 1.1;
  matrix<T> R(2, 2), D = matrix<T>::Zero(2, 2), P(2, 2);
  R << cos_in<T>(th), T(-sin_in<T>(th)), sin_in<T>(th), cos_in<T>(th);
  P << cos_in<T>(ph), sin_in<T>(ph), T(-sin_in<T>(ph)), cos_in<T>(ph);  // R(φ)ᵀ
  D(0, 0) = T(2.5);
  D(1, 1) = from_rational<T>(Q(2, 5));
  const matrix<T> A = multiply(multiply(R, D), P);
  mpfr_float two_fifths;
  {
    precision_guard g(512);
    two_fifths = mpfr_float(2) / 5;
  }
  check_spectrum(approx_singular_values(A), {mpfr_float(2.5), two_fifths});
}

// Two tokens: A = [[p, 1-p], [1-p, p]], p = (1 + tanh a)/2, has singular values {1, tanh a}.
BOOST_AUTO_TEST_CASE_TEMPLATE(singular_values_two_token_closed_form, T, svd_types) {
  working_precision<T> wp;
  for (double a : {0.125, 0.5, 1.0, 2.0}) {
    using std::tanh;
    const T t = tanh(T(a));
    const T p = (T(1) + t) / T(2);
    matrix<T> A(2, 2);
    A << p, T(T(1) - p), T(T(1) - p), p;
    const std::vector<T> s = approx_singular_values(A);
    check_spectrum(s, {mpfr_float(1), tanh_512(a)});
  }
}

// A well-conditioned 2 × 2 matrix whose entries are exact in every format:
// [[1, 2^-5], [2^-5 + 2^-10, 1]].  Exact singular values from the closed form
// σ² = (S ± sqrt(S² − 4 det²))/2, S = ‖A‖_F², at 512 bits: {1.0317..., 0.9682...}.
// Regression: in binary16 the 2 × 2 Jacobi step of the SVD forms u = (a00 + a11)/(a10 − a01)
// = 2048 and 1 + u² overflows binary16 (max 65504), giving a rotation with c = s = 0 and the
// singular values {0, 0} (numerical rank 0 for a matrix of condition number ~1.07).
BOOST_AUTO_TEST_CASE_TEMPLATE(singular_values_nearly_symmetric_2x2, T, svd_types) {
  std::vector<mpfr_float> exact(2);
  {
    precision_guard g(512);
    const mpfr_float a = 1, b = ldexp(mpfr_float(1), -5), c = b + ldexp(mpfr_float(1), -10), d = 1;
    const mpfr_float S = a * a + b * b + c * c + d * d, det = a * d - b * c;
    const mpfr_float root = sqrt(S * S - 4 * det * det);
    exact[0] = sqrt((S + root) / 2);
    exact[1] = sqrt((S - root) / 2);
  }
  working_precision<T> wp;
  matrix<T> A(2, 2);
  A << T(1), T(std::ldexp(1.0, -5)), T(std::ldexp(1.0, -5) + std::ldexp(1.0, -10)), T(1);
  check_spectrum(approx_singular_values(A), exact);
}

// MPFR at 256 bits: the error is far below 1e-70 (the claim users rely on when they quote
// 70 digits).
BOOST_AUTO_TEST_CASE(mpfr_256_two_token_error_below_1e_minus_70) {
  const mpfr_float t_exact = tanh_512(0.75);
  precision_guard g(256);
  const mpfr_float t = tanh(mpfr_float(0.75)), p = (1 + t) / 2;
  matrix<mpfr_float> A(2, 2);
  A << p, mpfr_float(1 - p), mpfr_float(1 - p), p;
  const auto s = approx_singular_values(A);
  BOOST_TEST_REQUIRE(s.size() == 2u);
  BOOST_TEST(mpfr_float(abs(s[0] - 1)) < mpfr_float("1e-70"));
  BOOST_TEST(mpfr_float(abs(s[1] - t_exact)) < mpfr_float("1e-70"));
  // The 256-bit values really carry about 77 digits (not binary64's 16): the error is also
  // below 1e-74, which a computation that lost precision to binary64 could not reach.
  BOOST_TEST(mpfr_float(abs(s[1] - t_exact)) < mpfr_float("1e-74"));
}

// Random matrices: sorted decreasing, non-negative, min(m, n) of them, and Σσ² = ‖A‖_F²
// (every singular value enters; relative error a few n·eps).
BOOST_AUTO_TEST_CASE_TEMPLATE(singular_values_sorted_and_frobenius, T, svd_types) {
  working_precision<T> wp;
  auto rng = make_rng(1);
  const std::pair<int, int> shapes[] = {{5, 4}, {3, 6}, {4, 4}, {1, 3}};
  for (auto [r, c] : shapes) {
    const matrix<T> A = random_matrix<T>(rng, r, c);
    const std::vector<T> s = approx_singular_values(A);
    BOOST_TEST_REQUIRE(s.size() == static_cast<std::size_t>(std::min(r, c)));
    for (std::size_t i = 0; i < s.size(); ++i) {
      BOOST_TEST(!(s[i] < T(0)));
      if (i + 1 < s.size()) BOOST_TEST(!(s[i] < s[i + 1]), "sigma_" << i << " < sigma_" << i + 1);
    }
    mpfr_float fro(0), sum(0);
    for (Eigen::Index i = 0; i < A.rows(); ++i)
      for (Eigen::Index j = 0; j < A.cols(); ++j) fro += to_mp(A(i, j)) * to_mp(A(i, j));
    for (const T& x : s) sum += to_mp(x) * to_mp(x);
    const double eps = number_traits<T>::to_double(number_traits<T>::epsilon());
    BOOST_TEST((abs(mpfr_float(sum - fro)) <= 16 * std::max(r, c) * eps * fro), "sum sigma^2 = " << sum << ", |A|_F^2 = " << fro);
  }
  BOOST_TEST(approx_singular_values(matrix<T>(0, 3)).empty());
}

// =====================================================================================
// determinant
// =====================================================================================

BOOST_AUTO_TEST_CASE_TEMPLATE(determinant_by_hand, T, svd_types) {
  working_precision<T> wp;
  const double eps = number_traits<T>::to_double(number_traits<T>::epsilon());
  matrix<T> A2(2, 2);
  A2 << T(3), T(1), T(4), T(2);
  BOOST_TEST(number_traits<T>::to_double(approx_determinant(A2)) == 2.0);
  // 2(12 - 2) + 1(4 - 0) = 24
  matrix<T> A3(3, 3);
  A3 << T(2), T(-1), T(0), T(1), T(3), T(2), T(0), T(1), T(4);
  BOOST_TEST(std::abs(number_traits<T>::to_double(approx_determinant(A3)) - 24.0) <= 24 * 8 * eps);
  // Permutation matrices: the sign of the row exchanges.
  matrix<T> cyc = matrix<T>::Zero(3, 3), rev = matrix<T>::Zero(3, 3);
  cyc(0, 1) = cyc(1, 2) = cyc(2, 0) = T(1);
  rev(0, 2) = rev(1, 1) = rev(2, 0) = T(1);
  BOOST_TEST(number_traits<T>::to_double(approx_determinant(cyc)) == 1.0);
  BOOST_TEST(number_traits<T>::to_double(approx_determinant(rev)) == -1.0);
  BOOST_TEST(number_traits<T>::to_double(approx_determinant(matrix<T>(0, 0))) == 1.0);
  BOOST_CHECK_THROW(approx_determinant(matrix<T>(matrix<T>::Zero(2, 3))), input_error);
  // det = product of singular values in absolute value
  matrix<T> H(3, 3);
  const int h[3][3] = {{7, -4, -4}, {-4, 1, -8}, {-4, -8, 1}};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) H(i, j) = from_rational<T>(Q(h[i][j], 9) * (j == 0 ? Q(4) : j == 1 ? Q(1) : Q(1, 4)));
  BOOST_TEST(std::abs(std::abs(number_traits<T>::to_double(approx_determinant(H))) - 1.0) <= 16 * eps);
}

// Random matrices against the exact determinant of the same (rounded) entries.
BOOST_AUTO_TEST_CASE(determinant_random_against_exact) {
  auto rng = make_rng(2);
  for (int n = 1; n <= 6; ++n) {
    const matrix<double> A = random_matrix<double>(rng, n, n);
    const double exact = determinant(from_double_matrix<Q>(A)).convert_to<double>();
    // LU backward error: |Δdet| <~ n·u·Π|u_ii|·cond; the random matrices are well conditioned.
    BOOST_TEST(std::abs(approx_determinant(A) - exact) <= 1e-12 * (1 + std::abs(exact)), "n = " << n);
  }
}

// =====================================================================================
// condition number, stable rank, effective rank
// =====================================================================================

BOOST_AUTO_TEST_CASE_TEMPLATE(condition_number, T, svd_types) {
  working_precision<T> wp;
  BOOST_TEST(number_traits<T>::to_double(approx_condition_number(std::vector<T>{T(3), T(1.5)})) == 2.0);
  BOOST_TEST(number_traits<T>::to_double(approx_condition_number(std::vector<T>{T(4), T(2), T(0.5)})) == 8.0);
  BOOST_TEST(number_traits<T>::to_double(approx_condition_number(std::vector<T>{T(1), T(0)})) ==
             std::numeric_limits<double>::infinity());
  BOOST_TEST(number_traits<T>::to_double(approx_condition_number(std::vector<T>{})) == 0.0);
  // From a singular (diagonal) matrix: σ_min is exactly 0.
  matrix<T> S = matrix<T>::Zero(2, 2);
  S(1, 1) = T(3);
  BOOST_TEST(number_traits<T>::to_double(approx_condition_number(approx_singular_values(S))) ==
             std::numeric_limits<double>::infinity());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(stable_rank, T, svd_types) {
  working_precision<T> wp;
  const double eps = number_traits<T>::to_double(number_traits<T>::epsilon());
  for (int n = 1; n <= 5; ++n) {
    const matrix<T> I = matrix<T>::Identity(n, n);
    BOOST_TEST(std::abs(number_traits<T>::to_double(approx_stable_rank(approx_singular_values(I))) - n) <= 4 * n * eps);
  }
  // rank one: u vᵀ with u = (1, 2, 2)/3·... (small integers: exact entries)
  matrix<T> R(3, 4);
  const int u[3] = {1, 2, 2}, v[4] = {2, -1, 0, 1};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) R(i, j) = T(u[i] * v[j]);
  BOOST_TEST(std::abs(number_traits<T>::to_double(approx_stable_rank(approx_singular_values(R))) - 1.0) <= 16 * eps);
  // by hand: (4 + 1)/4
  BOOST_TEST(number_traits<T>::to_double(approx_stable_rank(std::vector<T>{T(2), T(1)})) == 1.25);
  BOOST_TEST(number_traits<T>::to_double(approx_stable_rank(std::vector<T>{T(0), T(0)})) == 0.0);
  BOOST_TEST(number_traits<T>::to_double(approx_stable_rank(std::vector<T>{})) == 0.0);
}

// Effective rank exp(H(σ/Σσ)).  Lists with known values: n equal values -> n; one nonzero
// value -> 1 (zeros contribute nothing and no NaN from 0·log 0); (3, 1) -> exp(H(3/4, 1/4)).
BOOST_AUTO_TEST_CASE_TEMPLATE(effective_rank_of_known_spectra, T, svd_types) {
  working_precision<T> wp;
  const double eps = number_traits<T>::to_double(number_traits<T>::epsilon());
  BOOST_TEST(std::abs(number_traits<T>::to_double(approx_effective_rank(std::vector<T>{T(1), T(1), T(1), T(1)})) - 4) <= 16 * eps);
  BOOST_TEST(std::abs(number_traits<T>::to_double(approx_effective_rank(std::vector<T>{T(5), T(0), T(0)})) - 1) <= 4 * eps);
  const double h = -(0.75 * std::log(0.75) + 0.25 * std::log(0.25));
  BOOST_TEST(std::abs(number_traits<T>::to_double(approx_effective_rank(std::vector<T>{T(3), T(1)})) - std::exp(h)) <=
             16 * std::max(eps, 0x1p-52));
  BOOST_TEST(number_traits<T>::to_double(approx_effective_rank(std::vector<T>{T(0), T(0)})) == 0.0);
  BOOST_TEST(number_traits<T>::to_double(approx_effective_rank(std::vector<T>{})) == 0.0);
}

// From matrices, in binary64 and MPFR: identity n -> n, rank one -> 1.  (A rank-one matrix
// has computed trailing singular values of order eps·σ1, each adding about -p log p ≈
// eps·|log eps| to the entropy; negligible in these precisions.)
BOOST_AUTO_TEST_CASE(effective_rank_of_identity_and_rank_one) {
  for (int n = 1; n <= 5; ++n)
    BOOST_TEST(std::abs(approx_effective_rank(approx_singular_values(matrix<double>(matrix<double>::Identity(n, n)))) - n) <= 1e-13);
  matrix<double> R(3, 3);
  R << 1, 2, 3, 2, 4, 6, -1, -2, -3;
  BOOST_TEST(std::abs(approx_effective_rank(approx_singular_values(R)) - 1.0) <= 1e-12);
  BOOST_TEST(std::abs(approx_stable_rank(approx_singular_values(R)) - 1.0) <= 1e-12);

  precision_guard g(256);
  const matrix<mpfr_float> Rm = from_double_matrix<mpfr_float>(R);
  BOOST_TEST(mpfr_float(abs(approx_effective_rank(approx_singular_values(Rm)) - 1)) < mpfr_float("1e-60"));
  BOOST_TEST(mpfr_float(abs(approx_effective_rank(approx_singular_values(matrix<mpfr_float>(matrix<mpfr_float>::Identity(3, 3)))) - 3)) <
             mpfr_float("1e-70"));
}

// The mpfr path (Householder bidiagonalization + Golub–Kahan tridiagonal QR) against Eigen's two-sided Jacobi SVD at
// 256 bits: every σ within 64·max(m, n)·2⁻²⁵⁰·σ₁ (both backward stable), on tall, wide, square, rank-deficient,
// graded (σ down to 1e-60), zero, 1×1 and 1×n matrices.
BOOST_AUTO_TEST_CASE(mpfr_bidiagonal_singular_values_agree_with_jacobi) {
  precision_guard g(256);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> N(0, 1);
  auto random = [&](Eigen::Index m, Eigen::Index n) {
    matrix<mpfr_float> A(m, n);
    for (Eigen::Index i = 0; i < A.size(); ++i) A(i) = mpfr_float(N(rng)) + mpfr_float(N(rng)) * pow(mpfr_float(2), -60);
    return A;
  };
  std::vector<matrix<mpfr_float>> cases = {random(12, 7), random(7, 12), random(20, 20), random(1, 1), random(1, 6), random(6, 1),
                                           matrix<mpfr_float>::Zero(5, 4)};
  {
    const matrix<mpfr_float> L = random(12, 3), R = random(3, 9);  // rank 3
    cases.push_back(L * R);
    matrix<mpfr_float> G = random(15, 15);  // graded columns: σ from about 1 down to about 1e-60
    for (Eigen::Index j = 0; j < 15; ++j) G.col(j) *= pow(mpfr_float(10), -4 * static_cast<int>(j));
    cases.push_back(G);
  }
  for (const auto& A : cases) {
    const std::vector<mpfr_float> b = detail::approx_singular_values_bidiagonal(A), j = detail::approx_singular_values_jacobi(A);
    BOOST_TEST_REQUIRE(b.size() == static_cast<std::size_t>(std::min(A.rows(), A.cols())));
    BOOST_TEST_REQUIRE(b.size() == j.size());
    const mpfr_float tol = mpfr_float(64 * std::max(A.rows(), A.cols())) * pow(mpfr_float(2), -250) * (j.empty() ? mpfr_float(0) : j[0]);
    for (std::size_t i = 0; i < b.size(); ++i) {
      BOOST_TEST(b[i] >= 0);
      if (i > 0) BOOST_TEST(b[i] <= b[i - 1]);
      BOOST_TEST(abs(b[i] - j[i]) <= tol, A.rows() << "x" << A.cols() << " sigma_" << i + 1 << ": " << b[i] << " vs Jacobi " << j[i]);
    }
  }
}
