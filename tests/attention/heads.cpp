// Tests of attncert/attention/heads.hpp: A·V, single- and multi-head attention, residual.
//
// The instances are chosen so that the expected values are known in closed form:
//  * zero query weights give all-zero scores, hence uniform attention 1/n, which is exact in
//    binary64 for n a power of two (exp(0) = 1, z = n): each head output is then the exact
//    column mean of X·Wv, so concatenation order and W_O can be checked bit for bit;
//  * two tokens give a two-entry softmax 1 / (1 + e^-d), computed independently here.
// Random inputs come from std::mt19937_64 seeded with ATTNCERT_SEED if set; the seed is
// printed.
#define BOOST_TEST_MODULE attention_heads
#include <boost/test/unit_test.hpp>

#include "../support.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>
#include <vector>

#include "attncert/attention/heads.hpp"
#include "attncert/error.hpp"
#include "attncert/linalg/matrix.hpp"
#include "attncert/number/precision_guard.hpp"

using namespace attncert;

namespace {

// Small random integers in [-k, k] (exact in every type, products exact in binary64).
matrix<double> random_int(std::mt19937_64& rng, Eigen::Index r, Eigen::Index c, int k = 3) {
  std::uniform_int_distribution<int> d(-k, k);
  matrix<double> m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = d(rng);
  return m;
}

matrix<double> random_real(std::mt19937_64& rng, Eigen::Index r, Eigen::Index c) {
  std::uniform_real_distribution<double> d(-1, 1);
  matrix<double> m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = d(rng);
  return m;
}

// A head whose attention is uniform (Wq = 0), with the given value projection.
head_weights<double> uniform_head(Eigen::Index d_model, Eigen::Index d_k, const matrix<double>& Wv) {
  return head_weights<double>{matrix<double>::Zero(d_model, d_k), matrix<double>::Ones(d_model, d_k), Wv, std::nullopt};
}

// Column means of Y (n a power of two: exact for small integers).
matrix<double> column_means_rows(const matrix<double>& Y) {
  matrix<double> r(Y.rows(), Y.cols());
  for (Eigen::Index j = 0; j < Y.cols(); ++j) {
    double s = 0;
    for (Eigen::Index i = 0; i < Y.rows(); ++i) s += Y(i, j);
    for (Eigen::Index i = 0; i < Y.rows(); ++i) r(i, j) = s / static_cast<double>(Y.rows());
  }
  return r;
}

}  // namespace

// attention_output = softmax(s QK^T) V on two tokens: each output row is p v_0 + (1 - p) v_1
// with p the two-entry softmax of the row's scores, computed here from the closed form.
BOOST_AUTO_TEST_CASE(attention_output_two_tokens_closed_form) {
  const matrix<double> Q = (matrix<double>(2, 2) << 1, 0, 0, 2).finished();
  const matrix<double> K = (matrix<double>(2, 2) << 3, 1, -1, 1).finished();
  const matrix<double> V = (matrix<double>(2, 3) << 1, 0, 2, -1, 4, 0).finished();
  const double scale = 0.5;
  const matrix<double> O = attention_output(Q, K, V, scale);
  BOOST_TEST_REQUIRE(O.rows() == 2);
  BOOST_TEST_REQUIRE(O.cols() == 3);
  // Scores: row 0: 0.5 (3, -1); row 1: 0.5 (2, 2).
  const double p0 = 1 / (1 + std::exp(0.5 * (-1 - 3)));
  const double p1 = 0.5;
  for (Eigen::Index k = 0; k < 3; ++k) {
    BOOST_TEST(std::abs(O(0, k) - (p0 * V(0, k) + (1 - p0) * V(1, k))) <= 1e-15);
    BOOST_TEST(std::abs(O(1, k) - (p1 * V(0, k) + (1 - p1) * V(1, k))) <= 1e-15);
  }
}

// Under a causal mask the first query sees only key 0: its output is v_0 exactly.
BOOST_AUTO_TEST_CASE(attention_output_causal_first_row_is_first_value) {
  auto rng = make_rng(1);
  const matrix<double> Q = random_real(rng, 4, 3), K = random_real(rng, 4, 3), V = random_real(rng, 4, 5);
  const matrix<double> O = attention_output(Q, K, V, 0.7, mask::causal());
  for (Eigen::Index k = 0; k < 5; ++k) BOOST_TEST(O(0, k) == V(0, k));
  // The last row attends to every key with the unmasked weights.
  const matrix<double> Ofull = attention_output(Q, K, V, 0.7);
  for (Eigen::Index k = 0; k < 5; ++k) BOOST_TEST(std::abs(O(3, k) - Ofull(3, k)) <= 1e-15);
  BOOST_TEST(std::abs(O(1, 0) - Ofull(1, 0)) > 1e-6);  // earlier rows differ: the mask acts
}

// The output is a convex combination of the value rows: interval outputs contain the exact
// output when all values are equal (A·V = v for every stochastic A).
BOOST_AUTO_TEST_CASE(attention_output_identical_values_interval) {
  precision_guard g(100);
  matrix<double> Vd(3, 2);
  Vd << 0.75, -2, 0.75, -2, 0.75, -2;
  auto rng = make_rng(2);
  const matrix<mpfi_float> Q = from_double_matrix<mpfi_float>(random_real(rng, 3, 2));
  const matrix<mpfi_float> K = from_double_matrix<mpfi_float>(random_real(rng, 3, 2));
  const matrix<mpfi_float> O = attention_output(Q, K, from_double_matrix<mpfi_float>(Vd), mpfi_float(1));
  for (Eigen::Index i = 0; i < 3; ++i) {
    BOOST_TEST(contains(O(i, 0), mpfr_float(0.75)));
    BOOST_TEST(contains(O(i, 1), mpfr_float(-2)));
    BOOST_TEST(mpfr_float(upper_of(O(i, 0)) - lower_of(O(i, 0))) < ldexp(mpfr_float(1), -90));
  }
}

BOOST_AUTO_TEST_CASE(attention_output_shape_errors) {
  const matrix<double> Q = matrix<double>::Ones(2, 3), K = matrix<double>::Ones(4, 3);
  BOOST_CHECK_THROW(attention_output(Q, K, matrix<double>(matrix<double>::Ones(3, 2)), 1.0), input_error);
  BOOST_CHECK_THROW(attention_output(Q, matrix<double>(matrix<double>::Ones(4, 2)), matrix<double>(matrix<double>::Ones(4, 2)), 1.0),
                    input_error);
  BOOST_CHECK_NO_THROW(attention_output(Q, K, matrix<double>(matrix<double>::Ones(4, 2)), 1.0));
}

// multi_head = [H_1, H_2, H_3] in head order, then · W_O.  With uniform attention every head
// output is the exact column mean of X·Wv_h, and the heads have different widths (2, 1, 3)
// so a wrong offset or order is visible.
BOOST_AUTO_TEST_CASE(multi_head_concatenation_order_and_output_projection) {
  auto rng = make_rng(3);
  const Eigen::Index n = 4, d_model = 3;
  const matrix<double> X = random_int(rng, n, d_model);
  const std::vector<matrix<double>> Wv = {random_int(rng, d_model, 2), random_int(rng, d_model, 1),
                                          random_int(rng, d_model, 3)};
  std::vector<head_weights<double>> heads;
  for (const auto& w : Wv) heads.push_back(uniform_head(d_model, 2, w));

  const matrix<double> C = multi_head(X, heads);
  BOOST_TEST_REQUIRE(C.rows() == n);
  BOOST_TEST_REQUIRE(C.cols() == 6);
  Eigen::Index at = 0;
  for (std::size_t h = 0; h < Wv.size(); ++h) {
    const matrix<double> expected = column_means_rows(X * Wv[h]);
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < expected.cols(); ++j)
        BOOST_TEST(C(i, at + j) == expected(i, j), "head " << h << " entry (" << i << ", " << j << ")");
    at += expected.cols();
  }

  const matrix<double> W_O = random_int(rng, 6, 2);
  const matrix<double> Y = multi_head(X, heads, std::optional<matrix<double>>(W_O));
  BOOST_TEST_REQUIRE(Y.rows() == n);
  BOOST_TEST_REQUIRE(Y.cols() == 2);
  const matrix<double> expected = C * W_O;  // small dyadic values: exact
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < 2; ++j) BOOST_TEST(Y(i, j) == expected(i, j));
}

// head_outputs computes each head independently: the h-th output equals attention_output
// with that head's projections, and the default scale is 1/sqrt(d_k) with d_k = Wq.cols()
// (here d_k = 4 -> 1/2, while d_model = 3 would give 1/sqrt(3)).
BOOST_AUTO_TEST_CASE(head_outputs_match_single_heads_and_default_scale) {
  auto rng = make_rng(4);
  const matrix<double> X = random_real(rng, 5, 3);
  head_weights<double> a{random_real(rng, 3, 4), random_real(rng, 3, 4), random_real(rng, 3, 2), std::nullopt};
  head_weights<double> b{random_real(rng, 3, 4), random_real(rng, 3, 4), random_real(rng, 3, 3), 1.5};
  const auto H = head_outputs(X, std::vector<head_weights<double>>{a, b}, mask::causal());
  BOOST_TEST_REQUIRE(H.size() == 2u);
  const matrix<double> Ha = attention_output(multiply(X, a.Wq), multiply(X, a.Wk), multiply(X, a.Wv), 0.5, mask::causal());
  const matrix<double> Hb = attention_output(multiply(X, b.Wq), multiply(X, b.Wk), multiply(X, b.Wv), 1.5, mask::causal());
  const matrix<double> Hwrong =
      attention_output(multiply(X, a.Wq), multiply(X, a.Wk), multiply(X, a.Wv), 1 / std::sqrt(3.0), mask::causal());
  BOOST_TEST_REQUIRE(H[0].cols() == 2);
  BOOST_TEST_REQUIRE(H[1].cols() == 3);
  double diff_wrong = 0;
  for (Eigen::Index i = 0; i < 5; ++i) {
    for (Eigen::Index j = 0; j < 2; ++j) {
      BOOST_TEST(H[0](i, j) == Ha(i, j));
      diff_wrong = std::max(diff_wrong, std::abs(H[0](i, j) - Hwrong(i, j)));
    }
    for (Eigen::Index j = 0; j < 3; ++j) BOOST_TEST(H[1](i, j) == Hb(i, j));
  }
  BOOST_TEST(diff_wrong > 1e-6);  // the instance distinguishes 1/sqrt(d_k) from 1/sqrt(d_model)
}

// Identical heads give identical blocks of the concatenation (random weights, real softmax).
BOOST_AUTO_TEST_CASE(identical_heads_give_identical_blocks) {
  auto rng = make_rng(5);
  const matrix<double> X = random_real(rng, 6, 4);
  const head_weights<double> h{random_real(rng, 4, 3), random_real(rng, 4, 3), random_real(rng, 4, 2), std::nullopt};
  const matrix<double> C = multi_head(X, std::vector<head_weights<double>>{h, h, h});
  BOOST_TEST_REQUIRE(C.cols() == 6);
  for (Eigen::Index i = 0; i < 6; ++i)
    for (Eigen::Index j = 0; j < 2; ++j) {
      BOOST_TEST(C(i, j) == C(i, j + 2));
      BOOST_TEST(C(i, j) == C(i, j + 4));
    }
  // and the blocks are the single-head output
  const matrix<double> H = multi_head(X, std::vector<head_weights<double>>{h});
  for (Eigen::Index i = 0; i < 6; ++i)
    for (Eigen::Index j = 0; j < 2; ++j) BOOST_TEST(C(i, j) == H(i, j));
}

BOOST_AUTO_TEST_CASE(concat_columns_errors_and_empty) {
  BOOST_CHECK_THROW(concat_columns(std::vector<matrix<double>>{matrix<double>::Ones(2, 1), matrix<double>::Ones(3, 1)}),
                    input_error);
  BOOST_TEST(concat_columns(std::vector<matrix<double>>{}).size() == 0);
}

// residual(X, Y) = X + Y exactly in rationals; shape mismatch is bad input.
BOOST_AUTO_TEST_CASE(residual_is_exact_sum_in_rationals) {
  using Q = mpq_rational;
  matrix<Q> X(2, 3), Y(2, 3);
  X << Q(1, 3), Q(-2), Q(5, 7), Q(0), Q(1, 2), Q(-9, 4);
  Y << Q(1, 6), Q(2), Q(2, 7), Q(-1, 11), Q(1, 3), Q(1, 4);
  const matrix<Q> R = residual(X, Y);
  BOOST_TEST_REQUIRE(R.rows() == 2);
  BOOST_TEST_REQUIRE(R.cols() == 3);
  BOOST_TEST(R(0, 0) == Q(1, 2));
  BOOST_TEST(R(0, 1) == Q(0));
  BOOST_TEST(R(0, 2) == Q(1));
  BOOST_TEST(R(1, 0) == Q(-1, 11));
  BOOST_TEST(R(1, 1) == Q(5, 6));
  BOOST_TEST(R(1, 2) == Q(-2));
}

BOOST_AUTO_TEST_CASE(residual_shape_mismatch_is_input_error) {
  const matrix<double> X = matrix<double>::Ones(3, 2);
  BOOST_CHECK_THROW(residual(X, matrix<double>(matrix<double>::Ones(2, 3))), input_error);
  BOOST_CHECK_THROW(residual(X, matrix<double>(matrix<double>::Ones(3, 3))), input_error);
  BOOST_CHECK_THROW(residual(X, matrix<double>(matrix<double>::Ones(2, 2))), input_error);
  BOOST_CHECK_NO_THROW(residual(X, matrix<double>(matrix<double>::Ones(3, 2))));
}

// Residual of a projected multi-head output: X + concat(H)·W_O, exact for uniform heads.
BOOST_AUTO_TEST_CASE(residual_of_multi_head_output) {
  auto rng = make_rng(6);
  const matrix<double> X = random_int(rng, 4, 3);
  std::vector<head_weights<double>> heads{uniform_head(3, 2, random_int(rng, 3, 2)), uniform_head(3, 2, random_int(rng, 3, 1))};
  const matrix<double> W_O = random_int(rng, 3, 3);
  const matrix<double> R = residual(X, multi_head(X, heads, std::optional<matrix<double>>(W_O)));
  matrix<double> C(4, 3);
  C << column_means_rows(X * heads[0].Wv), column_means_rows(X * heads[1].Wv);
  const matrix<double> expected = X + C * W_O;
  for (Eigen::Index i = 0; i < 4; ++i)
    for (Eigen::Index j = 0; j < 3; ++j) BOOST_TEST(R(i, j) == expected(i, j));
}
