// Tests of attncert/attention/bounds.hpp: the output-error bound
//   ‖((Â − A)V)_i‖₂ ≤ ‖Â_i − A_i‖₁ · max_j ‖v_j‖₂ ≤ n_k · max_j |Â_ij − A_ij| · max_j ‖v_j‖₂.
//
// Soundness is checked on random instances with Â arbitrary (not stochastic, entries of both
// signs) in binary64 and exactly in rationals; tightness on the equality witness (all value
// rows equal to one vector, all differences of one sign); and the test of a deliberately
// wrong bound (‖v_j‖_∞ instead of ‖v_j‖₂) shows an instance that such a bug could not pass.
// Random inputs come from std::mt19937_64 seeded with ATTNCERT_SEED if set; the seed is
// printed.
#define BOOST_TEST_MODULE attention_bounds
#include <boost/test/unit_test.hpp>

#include "../support.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>

#include "attncert/attention/bounds.hpp"
#include "attncert/error.hpp"
#include "attncert/linalg/matrix.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/number/precision_guard.hpp"

using namespace attncert;
using Q = mpq_rational;

namespace {

matrix<double> random_real(std::mt19937_64& rng, Eigen::Index r, Eigen::Index c, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  matrix<double> m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = d(rng);
  return m;
}

// Random rationals p/q, |p| <= 20, 1 <= q <= 9.
matrix<Q> random_rational(std::mt19937_64& rng, Eigen::Index r, Eigen::Index c) {
  std::uniform_int_distribution<int> num(-20, 20), den(1, 9);
  matrix<Q> m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = Q(num(rng), den(rng));
  return m;
}

// The left side ‖((Â − A)V)_i‖₂² and the three norms of the bound, computed directly here
// (independent of the header) in rationals.
struct exact_sides {
  Q lhs2, l1, linf, vmax2, vmax_inf;
};
exact_sides exact_row(const matrix<Q>& Ah, const matrix<Q>& A, const matrix<Q>& V, Eigen::Index i) {
  exact_sides s{Q(0), Q(0), Q(0), Q(0), Q(0)};
  for (Eigen::Index k = 0; k < V.cols(); ++k) {
    Q t(0);
    for (Eigen::Index j = 0; j < A.cols(); ++j) t += (Ah(i, j) - A(i, j)) * V(j, k);
    s.lhs2 += t * t;
  }
  for (Eigen::Index j = 0; j < A.cols(); ++j) {
    const Q d = abs(Q(Ah(i, j) - A(i, j)));
    s.l1 += d;
    if (d > s.linf) s.linf = d;
  }
  for (Eigen::Index j = 0; j < V.rows(); ++j) {
    Q n2(0);
    for (Eigen::Index k = 0; k < V.cols(); ++k) {
      n2 += V(j, k) * V(j, k);
      if (abs(V(j, k)) > s.vmax_inf) s.vmax_inf = abs(V(j, k));
    }
    if (n2 > s.vmax2) s.vmax2 = n2;
  }
  return s;
}

// The exact rational value of a floating-point number.
Q to_q(const mpfr_float& x) {
  Q q;
  mpfr_get_q(q.backend().data(), x.backend().data());
  return q;
}

}  // namespace

// SOUNDNESS in rationals, decided exactly: lhs² ≤ rhs_l1² ≤ rhs_max² on random instances
// with Â arbitrary; and every returned quantity equals the independent computation.
BOOST_AUTO_TEST_CASE(bound_holds_exactly_on_random_rational_instances) {
  auto rng = make_rng(1);
  for (int trial = 0; trial < 40; ++trial) {
    const Eigen::Index nq = 1 + trial % 4, nk = 1 + trial % 5, dv = 1 + trial % 3;
    const matrix<Q> A = random_rational(rng, nq, nk), Ah = random_rational(rng, nq, nk), V = random_rational(rng, nk, dv);
    const auto rows = output_bound_rows_squared(Ah, A, V);
    BOOST_TEST_REQUIRE(rows.size() == static_cast<std::size_t>(nq));
    for (Eigen::Index i = 0; i < nq; ++i) {
      const auto& r = rows[static_cast<std::size_t>(i)];
      const exact_sides e = exact_row(Ah, A, V, i);
      const Q n(static_cast<int>(nk));
      BOOST_TEST(r.lhs == e.lhs2);
      BOOST_TEST(r.row_l1 == e.l1);
      BOOST_TEST(r.rhs_l1 == e.l1 * e.l1 * e.vmax2);
      BOOST_TEST(r.rhs_max == n * n * e.linf * e.linf * e.vmax2);
      BOOST_TEST(r.lhs <= r.rhs_l1, "trial " << trial << " row " << i << ": " << r.lhs << " > " << r.rhs_l1);
      BOOST_TEST(r.rhs_l1 <= r.rhs_max);
    }
  }
}

// SOUNDNESS in binary64 on random instances (Â with entries of both signs, rows not summing
// to 1).  Rounding: every side carries a relative error of a few n·2^-53; the random
// instances are far from equality, and the comparison allows a relative 1e-12.
BOOST_AUTO_TEST_CASE(bound_holds_in_binary64_on_random_instances) {
  auto rng = make_rng(2);
  for (int trial = 0; trial < 50; ++trial) {
    const Eigen::Index nq = 1 + trial % 5, nk = 1 + trial % 7, dv = 1 + trial % 4;
    const matrix<double> A = random_real(rng, nq, nk, 0, 1), Ah = random_real(rng, nq, nk, -2, 2);
    const matrix<double> V = random_real(rng, nk, dv, -10, 10);
    const auto rows = output_bound_rows(Ah, A, V);
    BOOST_TEST_REQUIRE(rows.size() == static_cast<std::size_t>(nq));
    double vmax = 0;
    for (Eigen::Index j = 0; j < nk; ++j) vmax = std::max(vmax, V.row(j).norm());
    for (Eigen::Index i = 0; i < nq; ++i) {
      const auto& r = rows[static_cast<std::size_t>(i)];
      const double lhs = ((Ah - A).row(i) * V).norm();
      const double l1 = (Ah - A).row(i).lpNorm<1>();
      const double linf = (Ah - A).row(i).lpNorm<Eigen::Infinity>();
      BOOST_TEST(std::abs(r.lhs - lhs) <= 1e-12 * (1 + lhs));
      BOOST_TEST(std::abs(r.row_l1 - l1) <= 1e-12 * l1);
      BOOST_TEST(std::abs(r.rhs_l1 - l1 * vmax) <= 1e-12 * l1 * vmax);
      BOOST_TEST(std::abs(r.rhs_max - static_cast<double>(nk) * linf * vmax) <= 1e-12 * nk * linf * vmax);
      BOOST_TEST(r.lhs <= r.rhs_l1 * (1 + 1e-12));
      BOOST_TEST(r.rhs_l1 <= r.rhs_max * (1 + 1e-12));
    }
  }
}

// SOUNDNESS in the enclosure tier: with dyadic inputs (exact as thin intervals) the interval
// lhs², rhs_l1² contain the exact rational values, and the bound is certainly satisfied on
// random (non-tight) instances.
BOOST_AUTO_TEST_CASE(interval_sides_enclose_exact_values) {
  auto rng = make_rng(3);
  precision_guard g(128);
  std::uniform_int_distribution<int> d(-64, 64);
  for (int trial = 0; trial < 10; ++trial) {
    matrix<double> A(3, 4), Ah(3, 4), V(4, 2);
    for (auto* m : {&A, &Ah, &V})
      for (Eigen::Index i = 0; i < m->rows(); ++i)
        for (Eigen::Index j = 0; j < m->cols(); ++j) (*m)(i, j) = std::ldexp(d(rng), -4);
    const auto rows = output_bound_rows(from_double_matrix<mpfi_float>(Ah), from_double_matrix<mpfi_float>(A),
                                        from_double_matrix<mpfi_float>(V));
    const matrix<Q> Aq = from_double_matrix<Q>(A), Ahq = from_double_matrix<Q>(Ah), Vq = from_double_matrix<Q>(V);
    for (Eigen::Index i = 0; i < 3; ++i) {
      const auto& r = rows[static_cast<std::size_t>(i)];
      const exact_sides e = exact_row(Ahq, Aq, Vq, i);
      // lhs² and rhs_l1² as intervals, ends compared exactly with the rationals.
      const mpfi_float lhs2 = r.lhs * r.lhs, rhs2 = r.rhs_l1 * r.rhs_l1;
      BOOST_TEST(to_q(lower_of(lhs2)) <= e.lhs2);
      BOOST_TEST(e.lhs2 <= to_q(upper_of(lhs2)));
      BOOST_TEST(to_q(lower_of(rhs2)) <= e.l1 * e.l1 * e.vmax2);
      BOOST_TEST(e.l1 * e.l1 * e.vmax2 <= to_q(upper_of(rhs2)));
      BOOST_TEST(to_q(lower_of(r.row_l1)) <= e.l1);
      BOOST_TEST(e.l1 <= to_q(upper_of(r.row_l1)));
      if (e.lhs2 < e.l1 * e.l1 * e.vmax2)
        BOOST_TEST((certainly_le(r.lhs, r.rhs_l1) == truth::certainly_true), "trial " << trial << " row " << i);
    }
  }
}

// TIGHTNESS: every value row equal to v = (3, 4) (‖v‖₂ = 5) and all differences of one sign
// make the triangle inequality an equality: lhs = ‖d‖₁ · 5 exactly.  When moreover all |d_j|
// are equal, the entrywise-max form is attained too.
BOOST_AUTO_TEST_CASE(equality_witness_attains_the_bound_exactly) {
  matrix<Q> A(2, 3), Ah(2, 3), V(3, 2);
  A << Q(1, 3), Q(1, 3), Q(1, 3), Q(1, 2), Q(1, 4), Q(1, 4);
  Ah << Q(1, 2), Q(1, 2), Q(1, 2), Q(1, 2), Q(1, 2), Q(1, 2);  // not stochastic
  V << 3, 4, 3, 4, 3, 4;
  const auto rows = output_bound_rows_squared(Ah, A, V);
  // Row 0: d = (1/6, 1/6, 1/6): ‖d‖₁ = 1/2, lhs = 5/2, all three sides equal: 25/4.
  BOOST_TEST(rows[0].lhs == Q(25, 4));
  BOOST_TEST(rows[0].rhs_l1 == Q(25, 4));
  BOOST_TEST(rows[0].rhs_max == Q(25, 4));
  BOOST_TEST(rows[0].row_l1 == Q(1, 2));
  // Row 1: d = (0, 1/4, 1/4): lhs = rhs_l1 = (1/2 · 5)² = 25/4; rhs_max = (3 · 1/4 · 5)² = 225/16.
  BOOST_TEST(rows[1].lhs == Q(25, 4));
  BOOST_TEST(rows[1].rhs_l1 == Q(25, 4));
  BOOST_TEST(rows[1].rhs_max == Q(225, 16));

  // The same witness with value rows of opposite signs matched to the signs of d:
  // d = (1/6, -1/6, 1/6) against v_j = sign(d_j) (3, 4) is again an equality.
  matrix<Q> Ah2 = Ah;
  Ah2(0, 1) = Q(1, 6);
  matrix<Q> V2 = V;
  V2(1, 0) = -3;
  V2(1, 1) = -4;
  const auto rows2 = output_bound_rows_squared(Ah2, A, V2);
  BOOST_TEST(rows2[0].lhs == rows2[0].rhs_l1);
  BOOST_TEST(rows2[0].lhs == Q(25, 4));
}

// A deliberately wrong bound — ‖Â_i − A_i‖₁ · max_j ‖v_j‖_∞ (largest entry instead of the
// Euclidean row norm) — is violated on this instance: d = (1), v = (1, 1) gives lhs² = 2
// but the wrong right side squared is 1.  The library's right side must be the 2-norm one
// (= 2) and satisfy the bound; a library with the ∞-norm would fail both checks.
BOOST_AUTO_TEST_CASE(instance_that_catches_an_infinity_norm_bound) {
  matrix<Q> A(1, 1), Ah(1, 1), V(1, 2);
  A << 0;
  Ah << 1;
  V << 1, 1;
  const exact_sides e = exact_row(Ah, A, V, 0);
  const Q wrong2 = e.l1 * e.l1 * e.vmax_inf * e.vmax_inf;
  BOOST_TEST(e.lhs2 == Q(2));
  BOOST_TEST(wrong2 == Q(1));
  BOOST_TEST(e.lhs2 > wrong2);  // the instance discriminates: the wrong bound is violated

  const auto rows = output_bound_rows_squared(Ah, A, V);
  BOOST_TEST(rows[0].rhs_l1 == Q(2));
  BOOST_TEST(rows[0].lhs <= rows[0].rhs_l1);

  // The same in binary64 (exact here): rhs_l1 = sqrt(2), and lhs ≤ rhs_l1.
  const auto rd = output_bound_rows(from_rational_matrix<double>(Ah), from_rational_matrix<double>(A),
                                    from_rational_matrix<double>(V));
  BOOST_TEST(rd[0].rhs_l1 == std::sqrt(2.0));
  BOOST_TEST(rd[0].lhs <= rd[0].rhs_l1);
  BOOST_TEST(rd[0].lhs > 1.0);  // > the wrong bound 1
}

// A bound that used a single value row (say the first) instead of the maximum over rows is
// also caught: here the largest value row is the last one.
BOOST_AUTO_TEST_CASE(maximum_is_over_all_value_rows) {
  matrix<Q> A(1, 3), Ah(1, 3), V(3, 2);
  A << 0, 0, 0;
  Ah << 0, 0, 1;
  V << 1, 0, 0, 1, 6, 8;  // norms 1, 1, 10
  const auto rows = output_bound_rows_squared(Ah, A, V);
  BOOST_TEST(rows[0].lhs == Q(100));
  BOOST_TEST(rows[0].rhs_l1 == Q(100));
  BOOST_TEST(rows[0].rhs_max == Q(900));
  const auto rd = output_bound_rows(from_rational_matrix<double>(Ah), from_rational_matrix<double>(A),
                                    from_rational_matrix<double>(V));
  BOOST_TEST(rd[0].lhs == 10.0);
  BOOST_TEST(rd[0].rhs_l1 == 10.0);
  BOOST_TEST(rd[0].rhs_max == 30.0);
}

BOOST_AUTO_TEST_CASE(shape_mismatch_is_input_error) {
  const matrix<double> A = matrix<double>::Ones(2, 3);
  BOOST_CHECK_THROW(output_bound_rows(matrix<double>(matrix<double>::Ones(2, 2)), A, matrix<double>(matrix<double>::Ones(3, 1))),
                    input_error);
  BOOST_CHECK_THROW(output_bound_rows(A, A, matrix<double>(matrix<double>::Ones(2, 1))), input_error);
  const matrix<Q> Aq = from_double_matrix<Q>(A);
  BOOST_CHECK_THROW(output_bound_rows_squared(from_double_matrix<Q>(matrix<double>::Ones(3, 3)), Aq,
                                              from_double_matrix<Q>(matrix<double>::Ones(3, 1))),
                    input_error);
  BOOST_CHECK_THROW(output_bound_rows_squared(Aq, Aq, from_double_matrix<Q>(matrix<double>::Ones(4, 1))), input_error);
}
