// Tests of attncert/linalg/exact.hpp: exact rank and determinant over ℚ, interval
// determinants and certified rank lower bounds.
//
// Ground truth comes from construction, not from the code under test:
//  * A = U·[I_r; X]·[I_r, Y]·W with U, W unimodular (products of integer elementary row
//    operations) has rank exactly r; B·C with B m×r, C r×n has rank at most r;
//  * determinants are compared between two independent algorithms (Gaussian elimination and
//    Laplace expansion) and with hand values (triangular, permutations);
//  * enclosure checks compare interval ends with the exact rational (mpfr_get_q), never
//    through a floating-point approximation.
// Random inputs come from std::mt19937_64 seeded with ATTNCERT_SEED if set; the seed is
// printed.
#define BOOST_TEST_MODULE linalg_exact
#include <boost/test/unit_test.hpp>

#include "../random_matrices.hpp"
#include "../support.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <new>
#include <random>
#include <vector>

#include "attncert/error.hpp"
#include "attncert/linalg/exact.hpp"
#include "attncert/linalg/matrix.hpp"
#include "attncert/memory.hpp"

#include <flint/nmod_mat.h>
#include "attncert/number/interval.hpp"
#include "attncert/number/precision_guard.hpp"

using namespace attncert;
using Q = mpq_rational;

namespace {

Q to_q(const mpfr_float& x) {
  Q q;
  mpfr_get_q(q.backend().data(), x.backend().data());
  return q;
}

// Does the interval contain the rational q?  (Exact comparison of the ends.)
bool encloses(const mpfi_float& x, const Q& q) { return to_q(lower_of(x)) <= q && q <= to_q(upper_of(x)); }


matrix<Q> mul(const matrix<Q>& a, const matrix<Q>& b) { return multiply(a, b); }

// A random unimodular n×n integer matrix: identity followed by random elementary operations
// row_j += k·row_i (determinant 1).
matrix<Q> random_unimodular(std::mt19937_64& rng, Eigen::Index n) {
  matrix<Q> U = matrix<Q>::Identity(n, n);
  if (n < 2) return U;
  std::uniform_int_distribution<Eigen::Index> idx(0, n - 1);
  std::uniform_int_distribution<int> k(-2, 2);
  for (int step = 0; step < 3 * n; ++step) {
    const Eigen::Index i = idx(rng), j = idx(rng);
    if (i == j) continue;
    const Q f(k(rng));
    for (Eigen::Index c = 0; c < n; ++c) U(j, c) += f * U(i, c);
  }
  return U;
}

// U·[I_r; X]·[I_r, Y]·W: rank exactly r (U, W invertible; the middle factors have full
// column / row rank r).
matrix<Q> matrix_of_rank(std::mt19937_64& rng, Eigen::Index m, Eigen::Index n, Eigen::Index r, bool rational = false) {
  matrix<Q> L = matrix<Q>::Zero(m, r), R = matrix<Q>::Zero(r, n);
  const matrix<Q> X = rational ? random_rational(rng, m, r) : random_int(rng, m, r, 2);
  const matrix<Q> Y = rational ? random_rational(rng, r, n) : random_int(rng, r, n, 2);
  for (Eigen::Index i = 0; i < m; ++i)
    for (Eigen::Index j = 0; j < r; ++j) L(i, j) = i < r ? Q(i == j ? 1 : 0) : X(i, j);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < n; ++j) R(i, j) = j < r ? Q(i == j ? 1 : 0) : Y(i, j);
  return mul(mul(random_unimodular(rng, m), mul(L, R)), random_unimodular(rng, n));
}

matrix<mpfi_float> to_interval(const matrix<Q>& A) { return from_rational_matrix<mpfi_float>(A); }

}  // namespace

// =====================================================================================
// exact rank
// =====================================================================================

// Rank exactly r by construction, for every shape and every r <= min(m, n).
BOOST_AUTO_TEST_CASE(rank_of_constructed_matrices_is_exact) {
  auto rng = make_rng(1);
  for (Eigen::Index m = 1; m <= 6; ++m)
    for (Eigen::Index n = 1; n <= 6; ++n)
      for (Eigen::Index r = 0; r <= std::min(m, n); ++r) {
        const matrix<Q> A = matrix_of_rank(rng, m, n, r);
        BOOST_TEST(rank(A) == static_cast<std::size_t>(r), m << "x" << n << " of rank " << r);
        BOOST_TEST(rank(transpose(A)) == static_cast<std::size_t>(r));
      }
}

// SOUNDNESS: a product B·C through an inner dimension r never has rank above r (random
// integer factors, which may themselves be rank-deficient).  GENERICITY: with random
// factors the rank is r almost always; we require it in at least 90 % of the trials.
BOOST_AUTO_TEST_CASE(rank_of_random_products) {
  auto rng = make_rng(2);
  int trials = 0, generic = 0;
  for (int t = 0; t < 150; ++t) {
    const Eigen::Index m = 2 + t % 5, n = 2 + (t / 5) % 5, r = 1 + t % std::min(m, n);
    const matrix<Q> A = mul(random_int(rng, m, r), random_int(rng, r, n));
    const std::size_t k = rank(A);
    BOOST_TEST(k <= static_cast<std::size_t>(r), "trial " << t << ": rank " << k << " > " << r);
    ++trials;
    generic += k == static_cast<std::size_t>(r);
  }
  BOOST_TEST(generic >= trials * 9 / 10, generic << " of " << trials << " products had full inner rank");
}

BOOST_AUTO_TEST_CASE(rank_special_cases) {
  BOOST_TEST(rank(matrix<Q>(0, 0)) == 0u);
  BOOST_TEST(rank(matrix<Q>(3, 0)) == 0u);
  BOOST_TEST(rank(matrix<Q>(matrix<Q>::Zero(3, 4))) == 0u);
  BOOST_TEST(rank(matrix<Q>(matrix<Q>::Identity(5, 5))) == 5u);
  // A zero first column and a pivot that needs a row exchange.
  matrix<Q> A(3, 3);
  A << 0, 1, 2,
       0, 2, 4,
       0, 0, 1;
  BOOST_TEST(rank(A) == 2u);
  // Rank decided by a tiny rational difference (no tolerance anywhere).
  matrix<Q> B(2, 2);
  B << 1, 1, 1, Q(1) + Q(1, 1000000007);
  BOOST_TEST(rank(B) == 2u);
  B(1, 1) = 1;
  BOOST_TEST(rank(B) == 1u);
}

// =====================================================================================
// exact determinant
// =====================================================================================

// Gaussian elimination against Laplace expansion, both exact.
BOOST_AUTO_TEST_CASE(determinant_matches_cofactor_expansion) {
  auto rng = make_rng(3);
  for (int n = 1; n <= 7; ++n)
    for (int t = 0; t < (n < 7 ? 6 : 1); ++t) {
      const matrix<Q> A = random_rational(rng, n, n);
      BOOST_TEST(determinant(A) == cofactor_determinant(A), "n = " << n);
    }
  // Singular by construction: both give exactly 0.
  for (int n = 2; n <= 6; ++n) {
    const matrix<Q> A = matrix_of_rank(rng, n, n, n - 1, true);
    BOOST_TEST(determinant(A) == 0);
    BOOST_TEST(cofactor_determinant(A) == 0);
  }
  // Unimodular: determinant 1.
  BOOST_TEST(determinant(random_unimodular(rng, 6)) == 1);
}

BOOST_AUTO_TEST_CASE(determinant_by_hand) {
  matrix<Q> T(3, 3);
  T << Q(2, 3), 5, -7,
       0, Q(-3, 4), 11,
       0, 0, Q(9, 2);
  BOOST_TEST(determinant(T) == Q(-9, 4));  // 2/3 · (-3/4) · 9/2
  BOOST_TEST(cofactor_determinant(T) == Q(-9, 4));
  matrix<Q> cyc = matrix<Q>::Zero(3, 3), rev = matrix<Q>::Zero(3, 3);
  cyc(0, 1) = cyc(1, 2) = cyc(2, 0) = 1;  // even permutation
  rev(0, 2) = rev(1, 1) = rev(2, 0) = 1;  // one transposition
  BOOST_TEST(determinant(cyc) == 1);
  BOOST_TEST(determinant(rev) == -1);
  BOOST_TEST(cofactor_determinant(cyc) == 1);
  BOOST_TEST(cofactor_determinant(rev) == -1);
  matrix<Q> S(2, 2);  // needs a row exchange: det [[0, 2], [3, 1]] = -6
  S << 0, 2, 3, 1;
  BOOST_TEST(determinant(S) == -6);
  BOOST_TEST(determinant(matrix<Q>(0, 0)) == 1);
  BOOST_TEST(cofactor_determinant(matrix<Q>(0, 0)) == 1);
}

BOOST_AUTO_TEST_CASE(determinant_errors) {
  BOOST_CHECK_THROW(determinant(matrix<Q>(matrix<Q>::Zero(2, 3))), input_error);
  BOOST_CHECK_THROW(cofactor_determinant(matrix<Q>(matrix<Q>::Zero(3, 2))), input_error);
  BOOST_CHECK_THROW(cofactor_determinant(matrix<Q>(matrix<Q>::Identity(9, 9))), input_error);
  precision_guard g(53);
  BOOST_CHECK_THROW(determinant(to_interval(matrix<Q>(matrix<Q>::Identity(9, 9)))), input_error);
}

// =====================================================================================
// interval determinant
// =====================================================================================

// SOUNDNESS: for random dyadic matrices (exact as thin intervals) evaluated at 30 bits, where
// the products do not fit and every operation rounds outward, the enclosure contains the
// exact rational determinant.
BOOST_AUTO_TEST_CASE(interval_determinant_encloses_exact_determinant) {
  auto rng = make_rng(4);
  std::uniform_int_distribution<int> k(-4096, 4096);
  precision_guard g(30);
  int nontrivial = 0;
  for (int t = 0; t < 60; ++t) {
    const Eigen::Index n = 1 + t % 6;
    matrix<Q> A(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) A(i, j) = Q(k(rng), 256);
    const mpfi_float d = determinant(to_interval(A));
    const Q exact = determinant(A);
    BOOST_TEST(encloses(d, exact), "trial " << t << ": " << number_traits<mpfi_float>::to_string(d, 12) << " misses " << exact);
    nontrivial += lower_of(d) != upper_of(d);
  }
  BOOST_TEST(nontrivial > 20);  // the premise: rounding happened, the enclosures are not points
}

// SOUNDNESS for thick intervals: A ± 2^-20 entrywise encloses det(M) for every M inside —
// the centre and random points of the box.
BOOST_AUTO_TEST_CASE(interval_determinant_encloses_every_point_of_a_box) {
  auto rng = make_rng(5);
  std::uniform_int_distribution<int> k(-64, 64), off(-1024, 1024);
  precision_guard g(64);
  const Q radius(1, 1 << 20);
  for (int t = 0; t < 20; ++t) {
    const Eigen::Index n = 2 + t % 4;
    matrix<Q> C(n, n);
    matrix<mpfi_float> box(n, n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j) {
        C(i, j) = Q(k(rng), 16);
        box(i, j) = hull_of(from_rational<mpfi_float>(C(i, j) - radius), from_rational<mpfi_float>(C(i, j) + radius));
      }
    const mpfi_float d = determinant(box);
    BOOST_TEST(encloses(d, determinant(C)));
    for (int p = 0; p < 5; ++p) {
      matrix<Q> M = C;
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < n; ++j) M(i, j) += radius * Q(off(rng), 1024);
      BOOST_TEST(encloses(d, determinant(M)), "trial " << t << " point " << p);
    }
  }
}

// COMPLETENESS: raising the precision makes the enclosure of a dyadic determinant exact
// (13-bit entries, n = 5: every intermediate fits in 200 bits).
BOOST_AUTO_TEST_CASE(interval_determinant_tightens_with_precision) {
  auto rng = make_rng(6);
  std::uniform_int_distribution<int> k(-4096, 4096);
  matrix<Q> A(5, 5);
  for (Eigen::Index i = 0; i < 5; ++i)
    for (Eigen::Index j = 0; j < 5; ++j) A(i, j) = Q(k(rng), 256);
  const Q exact = determinant(A);
  Q width30, width200;
  {
    precision_guard g(30);
    const mpfi_float d = determinant(to_interval(A));
    width30 = to_q(upper_of(d)) - to_q(lower_of(d));
  }
  {
    precision_guard g(200);
    const mpfi_float d = determinant(to_interval(A));
    width200 = to_q(upper_of(d)) - to_q(lower_of(d));
    BOOST_TEST(encloses(d, exact));
  }
  BOOST_TEST(width30 > 0);
  BOOST_TEST(width200 == 0);
}

// =====================================================================================
// certified rank lower bound
// =====================================================================================

// SOUNDNESS: a matrix singular over ℚ is never certified full rank; more precisely the
// certified lower bound never exceeds the exact rank, and its witness minor is really
// nonzero over ℚ and enclosed by the reported interval.  The entries have denominators 3,
// 5, 7, so their enclosures are thick and every minor that is exactly 0 has an enclosure
// straddling 0 — the test checks that such minors are never taken as witnesses.
BOOST_AUTO_TEST_CASE(certified_rank_never_exceeds_exact_rank) {
  auto rng = make_rng(7);
  int full_rank_claims = 0, trials64 = 0, tight64 = 0;
  for (int t = 0; t < 120; ++t) {
    const Eigen::Index m = 2 + t % 4, n = 2 + (t / 4) % 4;
    const Eigen::Index r = t % std::min(m, n);  // 0 .. min(m, n) - 1: rank-deficient
    const matrix<Q> A = matrix_of_rank(rng, m, n, r, true);
    const std::size_t exact = rank(A);
    BOOST_TEST_REQUIRE(exact == static_cast<std::size_t>(r));
    precision_guard g(t % 2 == 0 ? 24 : 64);
    const rank_lower_bound lb = certified_rank_lower_bound(to_interval(A));
    BOOST_TEST(lb.rank <= exact, "trial " << t << " (" << m << "x" << n << ", rank " << r << "): certified " << lb.rank);
    full_rank_claims += lb.rank == static_cast<std::size_t>(std::min(m, n));
    if (t % 2 == 1) {
      ++trials64;
      tight64 += lb.rank == exact;
    }
    BOOST_TEST_REQUIRE(lb.rows.size() == lb.rank);
    BOOST_TEST_REQUIRE(lb.cols.size() == lb.rank);
    if (lb.rank > 0) {
      matrix<Q> W(lb.rank, lb.rank);
      for (std::size_t i = 0; i < lb.rank; ++i)
        for (std::size_t j = 0; j < lb.rank; ++j) W(i, j) = A(lb.rows[i], lb.cols[j]);
      const Q wd = determinant(W);
      BOOST_TEST(wd != 0);
      BOOST_TEST(encloses(lb.minor, wd));
      BOOST_TEST(!contains_zero(lb.minor));
    }
  }
  BOOST_TEST(full_rank_claims == 0);
  // The bound is not vacuous: at 64 bits it reaches the exact rank (all these matrices have
  // a nonzero r×r minor of moderate size).
  BOOST_TEST(tight64 == trials64, tight64 << " of " << trials64 << " bounds at 64 bits reached the exact rank");
}

// COMPLETENESS: random full-rank rational matrices are certified full rank at 64 bits, with
// a correct witness.
BOOST_AUTO_TEST_CASE(certified_rank_finds_full_rank) {
  auto rng = make_rng(8);
  precision_guard g(64);
  for (int t = 0; t < 40; ++t) {
    const Eigen::Index m = 1 + t % 5, n = 1 + (t / 5) % 5;
    const Eigen::Index r = std::min(m, n);
    const matrix<Q> A = matrix_of_rank(rng, m, n, r, true);
    const rank_lower_bound lb = certified_rank_lower_bound(to_interval(A));
    BOOST_TEST(lb.rank == static_cast<std::size_t>(r), "trial " << t << " (" << m << "x" << n << ")");
    if (lb.rank == static_cast<std::size_t>(r) && r > 0) {
      matrix<Q> W(r, r);
      for (Eigen::Index i = 0; i < r; ++i)
        for (Eigen::Index j = 0; j < r; ++j) W(i, j) = A(lb.rows[static_cast<std::size_t>(i)], lb.cols[static_cast<std::size_t>(j)]);
      BOOST_TEST(encloses(lb.minor, determinant(W)));
    }
  }
}

// COMPLETENESS by escalation: [[1, 1], [1, 1 + 2^-40]] is nonsingular (det 2^-40), but at 30
// bits 1 + 2^-40 is not representable, its enclosure contains 1 and the 2×2 minor cannot be
// certified: the bound is 1.  At 64 bits the entry is exact and the rank 2 is certified.
BOOST_AUTO_TEST_CASE(certified_rank_escalates_with_precision) {
  matrix<Q> A(2, 2);
  A << 1, 1, 1, Q(1) + Q(1) / Q(boost::multiprecision::mpz_int(1) << 40);
  BOOST_TEST_REQUIRE(rank(A) == 2u);
  {
    precision_guard g(30);
    BOOST_TEST(certified_rank_lower_bound(to_interval(A)).rank == 1u);
  }
  {
    precision_guard g(64);
    const rank_lower_bound lb = certified_rank_lower_bound(to_interval(A));
    BOOST_TEST(lb.rank == 2u);
    BOOST_TEST(encloses(lb.minor, Q(1) / Q(boost::multiprecision::mpz_int(1) << 40)));
  }
}

BOOST_AUTO_TEST_CASE(certified_rank_of_zero_matrix_is_zero) {
  precision_guard g(53);
  const rank_lower_bound lb = certified_rank_lower_bound(to_interval(matrix<Q>(matrix<Q>::Zero(3, 4))));
  BOOST_TEST(lb.rank == 0u);
  BOOST_TEST(lb.rows.empty());
  BOOST_TEST(lb.cols.empty());
}

// An allocation FLINT cannot satisfy throws std::bad_alloc (attncert/memory.hpp) instead of
// printing on stdout and aborting the process (issue 28, item 2).  32 TiB cannot be allocated
// here (nor under ASan, whose tests run with allocator_may_return_null=1).
BOOST_AUTO_TEST_CASE(flint_allocation_failure_is_bad_alloc) {
  attncert::install_allocation_failure_handlers();
  nmod_mat_t A;
  BOOST_CHECK_THROW(nmod_mat_init(A, slong(1) << 21, slong(1) << 21, 7), std::bad_alloc);
  // FLINT still works afterwards.
  nmod_mat_t B;
  nmod_mat_init(B, 3, 3, 7);
  nmod_mat_one(B);
  BOOST_TEST(nmod_mat_rank(B) == 3);
  nmod_mat_clear(B);
}
