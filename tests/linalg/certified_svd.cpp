// Tests of attncert/linalg/certified_svd.hpp: certified enclosures of singular values
// (Rump, BIT 51 (2011) 367–384).
//
// Ground truth never comes from the code under test:
//  * exact identities of the exact input: Σσᵢ² = ‖A‖_F² (rational) and, for square A,
//    Πσᵢ = |det A| (rational); the interval sum/product of the enclosures must contain them;
//  * an independent reference: Eigen's JacobiSVD in mpfr_float at 4× the precision, whose
//    error (a few ulps at 4p bits of σ₁) is far below the enclosure widths at p bits;
//  * constructions with known spectra: H₁·diag(s)·H₂ with rational Householder reflections
//    H = I − 2vvᵀ/vᵀv, R·diag(1, 10⁻⁶⁰) with the rational rotation R = (3/5, 4/5), and the
//    two-token attention matrix [[p, 1−p], [1−p, p]] with σ = {1, tanh a};
//  * exact rank (attncert::rank over ℚ): never more certified positive singular values.
// Interval ends are compared with rationals exactly (mpfr_cmp_q), never through doubles.
// Random inputs come from std::mt19937_64 seeded with ATTNCERT_SEED if set; the seed is
// printed.
#define BOOST_TEST_MODULE linalg_certified_svd
#include <boost/test/unit_test.hpp>

#include "../random_matrices.hpp"
#include "../support.hpp"

#include <Eigen/SVD>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attncert/attention/softmax.hpp"
#include "attncert/error.hpp"
#include "attncert/linalg/certified_svd.hpp"
#include "attncert/linalg/exact.hpp"
#include "attncert/linalg/matrix.hpp"
#include "attncert/linalg/spectra.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/number/precision_guard.hpp"

using namespace attncert;
using Q = mpq_rational;

namespace {

std::string show(const mpfi_float& x) { return number_traits<mpfi_float>::to_string(x, 12); }

// Does the interval contain the rational q?  (Exact comparison of the ends.)
bool encloses(const mpfi_float& x, const Q& q) {
  return mpfr_cmp_q(lower_of(x).backend().data(), q.backend().data()) <= 0 &&
         mpfr_cmp_q(upper_of(x).backend().data(), q.backend().data()) >= 0;
}

// Width upper − lower, rounded up.
mpfr_float width(const mpfi_float& x) {
  mpfr_float w;
  mpfr_sub(w.backend().data(), upper_of(x).backend().data(), lower_of(x).backend().data(), MPFR_RNDU);
  return w;
}

mpfr_float pow2(int e) { return ldexp(mpfr_float(1), e); }

// [lower − tol, upper + tol], rounded outward (at the current precision).
mpfi_float widen(const mpfi_float& x, const mpfr_float& tol) {
  mpfi_float t;
  const mpfr_float neg = -tol;
  mpfi_interv_fr(t.backend().data(), neg.backend().data(), tol.backend().data());
  return x + t;
}


// Householder reflection I − 2vvᵀ/vᵀv (rational and exactly orthogonal); v = 0 gives I.
matrix<Q> householder(const std::vector<int>& v) {
  const Eigen::Index n = static_cast<Eigen::Index>(v.size());
  Q vv(0);
  for (int x : v) vv += Q(x) * Q(x);
  matrix<Q> H = matrix<Q>::Identity(n, n);
  if (vv == 0) return H;
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) H(i, j) -= Q(2) * Q(v[i]) * Q(v[j]) / vv;
  return H;
}

// H₁ (m×m) · diag(s) (m×n) · H₂ (n×n): singular values exactly |s| (s has min(m, n) entries).
matrix<Q> with_singular_values(std::mt19937_64& rng, Eigen::Index m, Eigen::Index n, const std::vector<Q>& s) {
  std::uniform_int_distribution<int> d(-3, 3);
  std::vector<int> v1(m), v2(n);
  for (int& x : v1) x = d(rng);
  for (int& x : v2) x = d(rng);
  matrix<Q> S = matrix<Q>::Zero(m, n);
  for (std::size_t i = 0; i < s.size(); ++i) S(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(i)) = s[i];
  return multiply(multiply(householder(v1), S), householder(v2));
}

Q frobenius2(const matrix<Q>& A) {
  Q f(0);
  for (Eigen::Index i = 0; i < A.size(); ++i) f += A(i) * A(i);
  return f;
}

// Reference singular values (approx tier, decreasing) of the exact A at `bits`.
std::vector<mpfr_float> reference_singular_values(const matrix<Q>& A, unsigned bits) {
  precision_guard g(bits);
  return approx_singular_values(from_rational_matrix<mpfr_float>(A));
}

// Every check that needs no trust in the code under test, for an exact input A and the
// enclosures r of its singular values.  `ref_bits` = precision of the JacobiSVD reference.
void check_sound(const matrix<Q>& A, const singular_value_enclosures& r, unsigned ref_bits, const std::string& what) {
  const std::size_t k = static_cast<std::size_t>(std::min(A.rows(), A.cols()));
  BOOST_TEST_REQUIRE(r.sigma.size() == k, what);
  const std::size_t rk = rank(A);
  BOOST_TEST(r.certified_positive <= rk, what << ": " << r.certified_positive << " certified positive, exact rank " << rk);
  // Σσᵢ² = ‖A‖_F² and, when square, Πσᵢ = |det A|: exact rationals inside interval results.
  precision_guard g(r.bits);
  mpfi_float sum(0), prod(1);
  for (const mpfi_float& s : r.sigma) {
    sum += s * s;
    prod *= s;
  }
  BOOST_TEST(encloses(sum, frobenius2(A)), what << ": sum of squares " << show(sum));
  if (A.rows() == A.cols()) {
    const Q det = determinant(A);
    BOOST_TEST(encloses(prod, det < 0 ? Q(-det) : det), what << ": product " << show(prod) << " vs |det| " << det);
  }
  // The reference point lies in every enclosure widened by the reference's own error (a
  // backward-stable SVD at 4p bits is within ~k·2^(−4p)·σ₁ of the exact values; we allow
  // 64·k·2^(−ref_bits)·σ₁, far below the width ~2^(−p)·σ₁ of an enclosure at p bits, so a
  // missing correction term of order 2^(−p) is still caught).  Without the widening an exact
  // enclosure [0, 0] of a zero singular value would "miss" a reference of 1e-617.  Enclosures
  // lie in [0, ∞) and are decreasing at both ends; beyond the exact rank they contain 0.
  const std::vector<mpfr_float> ref = reference_singular_values(A, ref_bits);
  precision_guard wide(ref_bits);  // widen() rounds at the current precision: at r.bits it would add an ulp of σᵢ, not tol
  const mpfr_float tol = k == 0 ? mpfr_float(0)
                                : mpfr_float(64 * static_cast<long>(k) * ldexp(ref[0], -static_cast<int>(ref_bits)));
  for (std::size_t i = 0; i < k; ++i) {
    BOOST_TEST(contains(widen(r.sigma[i], tol), ref[i]),
               what << ": sigma[" << i << "] = " << show(r.sigma[i]) << " misses " << ref[i].str(20));
    if (i >= rk) BOOST_TEST(encloses(r.sigma[i], Q(0)), what << ": sigma[" << i << "] beyond the rank excludes 0");
    BOOST_TEST(lower_of(r.sigma[i]) >= 0);
    if (i > 0) BOOST_TEST((lower_of(r.sigma[i]) <= lower_of(r.sigma[i - 1]) && upper_of(r.sigma[i]) <= upper_of(r.sigma[i - 1])));
    // certified_positive counts exactly the enclosures bounded away from 0.
    BOOST_TEST((lower_of(r.sigma[i]) > 0) == (i < r.certified_positive));
  }
}

// The bound of the header, re-implemented here from the formula (Weyl + multiplicative
// factors) with α and β as PARAMETERS, so that the mutation "α = β = 0" can be evaluated.
// Products via attncert::multiply on intervals (thin U, V).
std::vector<mpfi_float> local_bound(const matrix<mpfi_float>& A, const matrix<mpfr_float>& U, const matrix<mpfr_float>& V,
                                    const mpfr_float& alpha, const mpfr_float& beta) {
  matrix<mpfi_float> Ui(U.rows(), U.cols()), Vi(V.rows(), V.cols());
  for (Eigen::Index i = 0; i < U.size(); ++i) Ui(i) = thin(U(i));
  for (Eigen::Index i = 0; i < V.size(); ++i) Vi(i) = thin(V(i));
  const matrix<mpfi_float> B = multiply(multiply(transpose(Ui), A), Vi);
  const Eigen::Index k = std::min(B.rows(), B.cols());
  mpfi_float f2(0);
  std::vector<mpfr_float> lo, hi;
  for (Eigen::Index i = 0; i < B.rows(); ++i)
    for (Eigen::Index j = 0; j < B.cols(); ++j) {
      if (i == j) {
        const mpfi_float d = abs(B(i, j));
        lo.push_back(lower_of(d));
        hi.push_back(upper_of(d));
      } else {
        f2 += B(i, j) * B(i, j);
      }
    }
  std::sort(lo.rbegin(), lo.rend());
  std::sort(hi.rbegin(), hi.rend());
  const mpfi_float eps = thin(upper_of(sqrt(f2))), a = thin(alpha), b = thin(beta), one(1);
  std::vector<mpfi_float> out;
  for (Eigen::Index i = 0; i < k; ++i) {
    const mpfi_float l = (thin(lo[i]) - eps) / sqrt(mpfi_float((one + a) * (one + b)));
    const mpfi_float h = (thin(hi[i]) + eps) / sqrt(mpfi_float((one - a) * (one - b)));
    mpfr_float lend = lower_of(l) > 0 ? lower_of(l) : mpfr_float(0), hend = upper_of(h);
    mpfi_float r;
    mpfi_interv_fr(r.backend().data(), lend.backend().data(), hend.backend().data());
    out.push_back(r);
  }
  return out;
}

// q rounded to nearest at exactly `bits` bits, returned as an mpfr_float at the current
// precision (exact when that is >= bits).
mpfr_float round_to_bits(const Q& q, mpfr_prec_t bits) {
  mpfr_t t;
  mpfr_init2(t, bits);
  mpfr_set_q(t, q.backend().data(), MPFR_RNDN);
  mpfr_float r;
  mpfr_set(r.backend().data(), t, MPFR_RNDN);
  mpfr_clear(t);
  return r;
}

}  // namespace

// =====================================================================================
// soundness
// =====================================================================================

// Random rational matrices of every small shape, at 64 and 128 bits, checked against the
// exact identities and a 4×-precision reference; and products X·Y of thin integer factors
// (inner dimension r, including r = 0): never more than rank(A) ≤ r certified positive.
BOOST_AUTO_TEST_CASE(soundness_random_rational) {
  auto rng = make_rng(1);
  std::uniform_int_distribution<int> dim(1, 6);
  for (int t = 0; t < 80; ++t) {
    const Eigen::Index m = dim(rng), n = dim(rng);
    const unsigned bits = t % 2 == 0 ? 64 : 128;
    const matrix<Q> A = random_rational(rng, m, n);
    singular_value_enclosures r;
    {
      precision_guard g(bits);
      r = certified_singular_values(from_rational_matrix<mpfi_float>(A));
      r.bits = g.bits();
    }
    check_sound(A, r, 4 * bits, "random " + std::to_string(m) + "x" + std::to_string(n) + " trial " + std::to_string(t));
  }
}

BOOST_AUTO_TEST_CASE(soundness_thin_products) {
  auto rng = make_rng(2);
  std::uniform_int_distribution<int> dim(1, 7);
  for (int t = 0; t < 80; ++t) {
    const Eigen::Index m = dim(rng), n = dim(rng), r = t % (std::min(m, n) + 1);
    const matrix<Q> A = multiply(random_int(rng, m, r, 3), random_int(rng, r, n, 3));
    const std::string what = "product " + std::to_string(m) + "x" + std::to_string(r) + "x" + std::to_string(n) +
                             " trial " + std::to_string(t);
    // Escalation asked to certify ALL values: for r < min(m, n) it must run to the cap and
    // still certify at most rank(A) ≤ r of them.
    const std::size_t k = static_cast<std::size_t>(std::min(m, n));
    const singular_value_enclosures e = certified_singular_values(A, 64, 256, k);
    check_sound(A, e, 1024, what);
    BOOST_TEST(e.certified_positive <= static_cast<std::size_t>(r), what);
    if (rank(A) < k) BOOST_TEST(e.bits >= 256u, what << ": stopped at " << e.bits << " bits without deciding");
  }
}

// An interval matrix that contains both singular and nonsingular matrices:
// [[1, 1], [1, [1 − 2⁻²⁰, 1 + 2⁻²⁰]]].  σ₂ must contain 0 (the singular member), σ₁ is
// certified, and the enclosures contain the singular values of sampled members.
BOOST_AUTO_TEST_CASE(interval_matrix_with_singular_members) {
  precision_guard g(128);
  const Q d = Q(1, 1 << 20);
  matrix<mpfi_float> A(2, 2);
  A(0, 0) = A(0, 1) = A(1, 0) = mpfi_float(1);
  mpfi_interv_q(A(1, 1).backend().data(), Q(1 - d).backend().data(), Q(1 + d).backend().data());
  const singular_value_enclosures r = certified_singular_values(A);
  BOOST_TEST_REQUIRE(r.sigma.size() == 2u);
  BOOST_TEST(r.certified_positive == 1u);
  BOOST_TEST(contains_zero(r.sigma[1]), show(r.sigma[1]));
  for (const Q& x : {Q(1 - d), Q(1 - d / 3), Q(1), Q(1 + d / 7), Q(1 + d)}) {
    matrix<Q> M(2, 2);
    M << 1, 1, 1, x;
    const std::vector<mpfr_float> ref = reference_singular_values(M, 512);
    for (int i = 0; i < 2; ++i) BOOST_TEST(contains(r.sigma[i], ref[i]), "member x = " << x << ", sigma " << i);
  }
  // σ₂ of the member x = 1 + 2⁻²⁰ is about 2⁻²¹: the enclosure must reach it, i.e. it is
  // wide because the INPUT is wide, not because of rounding.
  BOOST_TEST(upper_of(r.sigma[1]) >= pow2(-22));
}

// Unbounded or NaN inputs and hopeless factors: nothing is claimed.
BOOST_AUTO_TEST_CASE(no_claim_cases) {
  precision_guard g(64);
  matrix<mpfi_float> A = matrix<mpfi_float>::Identity(2, 3);
  mpfr_float inf;
  mpfr_set_inf(inf.backend().data(), 1);
  A(0, 2) = thin(inf);
  singular_value_enclosures r = certified_singular_values(A);
  BOOST_TEST_REQUIRE(r.sigma.size() == 2u);
  BOOST_TEST(r.certified_positive == 0u);
  for (const auto& s : r.sigma) BOOST_TEST((lower_of(s) == 0 && boost::multiprecision::isinf(upper_of(s))));
  // Factors far from orthogonal (U = 2I: α ≥ 3): [0, +∞), never a claim.
  const matrix<mpfi_float> I3 = matrix<mpfi_float>::Identity(3, 3);
  const matrix<mpfr_float> U = mpfr_float(2) * matrix<mpfr_float>::Identity(3, 3), V = matrix<mpfr_float>::Identity(3, 3);
  r = certified_singular_values_with(I3, U, V);
  BOOST_TEST(r.certified_positive == 0u);
  BOOST_TEST(r.orthogonality_defect_u >= 3);
  for (const auto& s : r.sigma) BOOST_TEST(boost::multiprecision::isinf(upper_of(s)));
  BOOST_CHECK_THROW(certified_singular_values_with(I3, matrix<mpfr_float>::Identity(2, 2), V), input_error);
}

// =====================================================================================
// completeness
// =====================================================================================

// Full rank with separated singular values {5, 3, 2, 1, 1/2, 1/3}: all certified at 128
// bits, each enclosure contains the exact value and is narrow.
BOOST_AUTO_TEST_CASE(completeness_separated_full_rank) {
  auto rng = make_rng(3);
  const std::vector<Q> all = {Q(5), Q(3), Q(2), Q(1), Q(1, 2), Q(1, 3)};
  for (auto [m, n] : {std::pair<int, int>{4, 4}, {3, 5}, {5, 3}, {6, 6}, {1, 4}, {6, 2}}) {
    const std::size_t k = static_cast<std::size_t>(std::min(m, n));
    const std::vector<Q> s(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k));
    const matrix<Q> A = with_singular_values(rng, m, n, s);
    const std::string what = std::to_string(m) + "x" + std::to_string(n);
    precision_guard g(128);
    const singular_value_enclosures r = certified_singular_values(from_rational_matrix<mpfi_float>(A));
    BOOST_TEST(r.certified_positive == k, what);
    BOOST_TEST(r.bits == g.bits());
    for (std::size_t i = 0; i < k; ++i) {
      BOOST_TEST(encloses(r.sigma[i], s[i]), what << ": sigma[" << i << "] = " << show(r.sigma[i]) << " misses " << s[i]);
      BOOST_TEST(width(r.sigma[i]) < pow2(-110), what << ": width " << width(r.sigma[i]).str(3));
    }
  }
}

// R·diag(1, 10⁻⁶⁰) with R = [[3/5, −4/5], [4/5, 3/5]]: σ = {1, 10⁻⁶⁰}.  Undecided at 64 bits
// (the absolute error ~2⁻⁶⁴ swamps 10⁻⁶⁰); escalation decides it, and the precision guard
// is restored afterwards.
BOOST_AUTO_TEST_CASE(completeness_ill_conditioned_escalates) {
  const Q tiny = Q(1) / boost::multiprecision::pow(boost::multiprecision::mpz_int(10), 60);
  matrix<Q> A(2, 2);
  A << Q(3, 5), Q(-4, 5) * tiny, Q(4, 5), Q(3, 5) * tiny;
  const unsigned before = current_mpfr_bits();
  const singular_value_enclosures low = certified_singular_values(A, 64, 64, 2);
  BOOST_TEST(low.certified_positive < 2u);
  BOOST_TEST(low.certified_positive == 1u);
  BOOST_TEST(encloses(low.sigma[1], tiny));
  BOOST_TEST(encloses(low.sigma[1], Q(0)));
  const singular_value_enclosures r = certified_singular_values(A, 64, 1024, 2);
  BOOST_TEST(r.certified_positive == 2u);
  BOOST_TEST(r.bits > 128u);
  BOOST_TEST(r.bits <= working_bits_for(1024));
  BOOST_TEST_MESSAGE("decided at " << r.bits << " bits: sigma[1] = " << show(r.sigma[1]));
  BOOST_TEST(encloses(r.sigma[0], Q(1)));
  BOOST_TEST(encloses(r.sigma[1], tiny));
  BOOST_TEST(current_mpfr_bits() == before);
  check_sound(A, r, 4 * r.bits, "R diag(1, 1e-60)");
  BOOST_CHECK_THROW(certified_singular_values(A, 128, 64, 2), input_error);
}

// =====================================================================================
// known values
// =====================================================================================

// Two-token attention [[p, 1−p], [1−p, p]] = softmax(a·[[1, −1], [−1, 1]]) at a = 1/2,
// built in MPFI by the library's masked_softmax: σ = {1, tanh(1/2)}.
BOOST_AUTO_TEST_CASE(two_token_known_values) {
  mpfr_float t;
  {
    precision_guard g(512);
    t = tanh(mpfr_float(1) / 2);
  }
  precision_guard g(128);
  const mpfi_float a = mpfi_float(1) / 2;
  matrix<mpfi_float> S(2, 2);
  S << a, -a, -a, a;
  const singular_value_enclosures r = certified_singular_values(masked_softmax(S));
  BOOST_TEST_REQUIRE(r.sigma.size() == 2u);
  BOOST_TEST(r.certified_positive == 2u);
  BOOST_TEST(contains(r.sigma[0], mpfr_float(1)), show(r.sigma[0]));
  BOOST_TEST(contains(r.sigma[1], t), show(r.sigma[1]) << " vs tanh(1/2) = " << t.str(40));
  for (const auto& s : r.sigma) BOOST_TEST(width(s) < pow2(-100), "width " << width(s).str(3));
}

// =====================================================================================
// shapes
// =====================================================================================

BOOST_AUTO_TEST_CASE(shapes_and_zero) {
  precision_guard g(128);
  // 1×1: σ = |a|.
  matrix<Q> one(1, 1);
  one << Q(-3, 7);
  singular_value_enclosures r = certified_singular_values(from_rational_matrix<mpfi_float>(one));
  BOOST_TEST_REQUIRE(r.sigma.size() == 1u);
  BOOST_TEST(encloses(r.sigma[0], Q(3, 7)));
  BOOST_TEST(r.certified_positive == 1u);
  one(0, 0) = 0;
  r = certified_singular_values(from_rational_matrix<mpfi_float>(one));
  BOOST_TEST(encloses(r.sigma[0], Q(0)));
  BOOST_TEST(r.certified_positive == 0u);
  // Zero matrices of every orientation: all σ contain 0, none certified.
  for (auto [m, n] : {std::pair<int, int>{4, 6}, {6, 4}, {3, 3}}) {
    r = certified_singular_values(matrix<mpfi_float>(matrix<mpfi_float>::Zero(m, n)));
    BOOST_TEST(r.sigma.size() == static_cast<std::size_t>(std::min(m, n)));
    BOOST_TEST(r.certified_positive == 0u);
    for (const auto& s : r.sigma) BOOST_TEST((contains_zero(s) && upper_of(s) <= pow2(-100)), show(s));
  }
  // Empty: no singular values.
  BOOST_TEST(certified_singular_values(matrix<mpfi_float>(0, 3)).sigma.empty());
  BOOST_TEST(certified_singular_values(matrix<Q>(3, 0), 64, 128, 0).sigma.empty());
  // 3×5 and 5×3 (A and Aᵀ have the same singular values): enclosures overlap pairwise,
  // and both are sound.
  auto rng = make_rng(4);
  const matrix<Q> A = random_rational(rng, 3, 5);
  const singular_value_enclosures ra = certified_singular_values(from_rational_matrix<mpfi_float>(A));
  const singular_value_enclosures rt = certified_singular_values(from_rational_matrix<mpfi_float>(transpose(A)));
  BOOST_TEST_REQUIRE(ra.sigma.size() == 3u);
  BOOST_TEST_REQUIRE(rt.sigma.size() == 3u);
  for (int i = 0; i < 3; ++i)
    BOOST_TEST((lower_of(ra.sigma[i]) <= upper_of(rt.sigma[i]) && lower_of(rt.sigma[i]) <= upper_of(ra.sigma[i])));
  check_sound(A, ra, 512, "3x5");
  check_sound(transpose(A), rt, 512, "5x3");
}

// =====================================================================================
// mutation: the orthogonality correction is necessary
// =====================================================================================

// A = R·diag(3, 1), R = [[3/5, −4/5], [4/5, 3/5]].  Factors "from a 24-bit SVD": U = R
// rounded to nearest at 24 bits (fl(3/5) = 3/5 + 0.4·2⁻²⁴, fl(4/5) = 4/5 + 0.2·2⁻²⁴: the
// exact singular vectors as a binary32 SVD would return them), V = I.  Evaluated at 128
// bits, UᵀAV = [[3(1 + 0.4ε), −0.2ε], [0.6ε, 1 + 0.4ε]] with ε = 2⁻²⁴, so ‖E‖_F ≈ 0.632ε and
// WITHOUT the correction (α = β = 0) the "enclosure" of σ₁ = 3 starts at 3 + 0.568ε > 3.
// With α = ‖UᵀU − I‖_F = 0.8·√2·ε it contains 3.  The local copy of the formula shows the
// mutant misses; the library function must agree with the correct formula.
BOOST_AUTO_TEST_CASE(mutation_dropping_orthogonality_correction_is_caught) {
  matrix<Q> R(2, 2), A(2, 2);
  R << Q(3, 5), Q(-4, 5), Q(4, 5), Q(3, 5);
  A << Q(9, 5), Q(-4, 5), Q(12, 5), Q(3, 5);  // R·diag(3, 1)
  matrix<Q> D = matrix<Q>::Zero(2, 2);
  D(0, 0) = 3;
  D(1, 1) = 1;
  BOOST_TEST_REQUIRE(bool(multiply(R, D) == A));
  precision_guard g(128);
  const matrix<mpfr_float> V = matrix<mpfr_float>::Identity(2, 2);
  matrix<mpfr_float> U(2, 2);
  for (Eigen::Index i = 0; i < 4; ++i) U(i) = round_to_bits(R(i), 24);
  const matrix<mpfi_float> Ai = from_rational_matrix<mpfi_float>(A);

  const std::vector<mpfi_float> mutant = local_bound(Ai, U, V, mpfr_float(0), mpfr_float(0));
  BOOST_TEST(!encloses(mutant[0], Q(3)), "mutant (alpha = beta = 0) sigma[0] = " << show(mutant[0]) << " should miss 3");
  BOOST_TEST(lower_of(mutant[0]) > 3);

  const singular_value_enclosures lib = certified_singular_values_with(Ai, U, V);
  BOOST_TEST(lib.orthogonality_defect_u > pow2(-25));
  BOOST_TEST(lib.orthogonality_defect_v == 0);
  const std::vector<mpfi_float> fixed = local_bound(Ai, U, V, lib.orthogonality_defect_u, lib.orthogonality_defect_v);
  for (int i = 0; i < 2; ++i) {
    const Q exact = i == 0 ? Q(3) : Q(1);
    BOOST_TEST(encloses(fixed[i], exact), "local formula sigma[" << i << "] = " << show(fixed[i]));
    BOOST_TEST(encloses(lib.sigma[i], exact), "library sigma[" << i << "] = " << show(lib.sigma[i]));
  }
  BOOST_TEST(lib.certified_positive == 2u);

  // The same with factors from an actual 24-bit SVD (Eigen's JacobiSVD in binary32),
  // evaluated at 128 bits: the library bound stays sound whatever the factors are.  (Whether
  // the mutant misses here depends on Eigen's rounding; it is reported, not asserted.)
  Eigen::JacobiSVD<Eigen::MatrixXf> svd32(from_rational_matrix<float>(A), Eigen::ComputeFullU | Eigen::ComputeFullV);
  matrix<mpfr_float> Uh(2, 2), Vh(2, 2);
  for (Eigen::Index i = 0; i < 4; ++i) {
    Uh(i) = mpfr_float(static_cast<double>(svd32.matrixU()(i)));  // exact: float ⊂ double ⊂ 128 bits
    Vh(i) = mpfr_float(static_cast<double>(svd32.matrixV()(i)));
  }
  const singular_value_enclosures r24 = certified_singular_values_with(Ai, Uh, Vh);
  BOOST_TEST(encloses(r24.sigma[0], Q(3)), show(r24.sigma[0]));
  BOOST_TEST(encloses(r24.sigma[1], Q(1)), show(r24.sigma[1]));
  const std::vector<mpfi_float> mutant24 = local_bound(Ai, Uh, Vh, mpfr_float(0), mpfr_float(0));
  BOOST_TEST_MESSAGE("24-bit JacobiSVD factors, alpha = " << r24.orthogonality_defect_u.str(3) << ", beta = "
                     << r24.orthogonality_defect_v.str(3) << "; mutant sigma = " << show(mutant24[0]) << ", "
                     << show(mutant24[1]) << "; contains 3: " << encloses(mutant24[0], Q(3))
                     << ", contains 1: " << encloses(mutant24[1], Q(1)));
}
