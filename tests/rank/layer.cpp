// tests/rank/layer.cpp — the layer model (rank/layer.hpp): its one validation, its one lcm,
// the row-normalized exponents, and M(u) for attention, output and residual, checked against
// hand-computed polynomials and, on random layers, against evaluating softmax-free E(u) at a
// rational u in exact arithmetic.
#define BOOST_TEST_MODULE rank_layer
#include <boost/test/unit_test.hpp>

#include "../support.hpp"
#include "attncert/rank/layer.hpp"

using namespace attncert;
using Q = mpq_rational;

namespace {


Q evaluate(const sparse_poly& p, const Q& u) {
  Q s = 0;
  for (const auto& [k, c] : p) {
    Q power = 1;
    for (mpz_int i = 0; i < k; ++i) power *= u;
    s += Q(c) * power;
  }
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(validation_names_each_defect) {
  matrix<Q> B(2, 3);
  B << 1, 2, 3, 4, 5, 6;
  layer_model layer{B, mask::none(), layer_object::output, std::nullopt, std::nullopt};
  BOOST_TEST(input_error_of([&] { layer.validate(); }) == "the output rank needs values V");
  layer.V = matrix<Q>(2, 2);
  BOOST_TEST(input_error_of([&] { layer.validate(); }) == "V has 2 rows but there are 3 keys");
  layer.V = matrix<Q>::Zero(3, 2);
  BOOST_TEST(input_error_of([&] { layer.validate(); }).empty());
  layer.object = layer_object::residual;
  BOOST_TEST(input_error_of([&] { layer.validate(); }) == "the residual rank needs X");
  layer.X = matrix<Q>::Zero(2, 3);
  BOOST_TEST(input_error_of([&] { layer.validate(); }) == "X must have shape (2, 2)");
  Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic> allowed(2, 3);
  allowed << true, false, false, false, false, false;
  layer = layer_model{B, mask::from_matrix(allowed), layer_object::attention, std::nullopt, std::nullopt};
  BOOST_TEST(input_error_of([&] { layer.validate(); }) == "row 1 is fully masked: softmax is undefined");
  layer.M = mask::from_matrix(Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic>::Constant(3, 3, true));
  BOOST_TEST(input_error_of([&] { layer.validate(); }).find("mask shape (3, 3)") == 0u);
  layer.object = layer_object::scores;  // the rank of B as a matrix: nothing to check
  BOOST_TEST(input_error_of([&] { layer.validate(); }).empty());
}

BOOST_AUTO_TEST_CASE(lcm_on_the_support_only) {
  matrix<Q> B(2, 2);
  B << Q(1, 2), Q(1, 3), Q(1, 5), Q(1, 7);
  BOOST_TEST(lcm_of_denominators(B) == mpz_int(210));
  const mask causal = mask::causal();  // (0, 1) is masked
  BOOST_TEST(lcm_of_denominators(B, &causal) == mpz_int(70));
}

BOOST_AUTO_TEST_CASE(exponents_are_row_normalized_and_divisible) {
  matrix<Q> B(2, 2);
  B << Q(3, 2), Q(-1, 2), 4, 6;  // q = 2: e = [[3, -1], [8, 12]] → [[4, 0], [0, 4]]
  const layer_exponents ex = row_normalized_exponents({B, mask::none(), layer_object::attention, {}, {}});
  BOOST_TEST(ex.q == mpz_int(2));
  BOOST_TEST(ex.e[0][0] == mpz_int(4));
  BOOST_TEST(ex.e[0][1] == mpz_int(0));
  BOOST_TEST(ex.e[1][0] == mpz_int(0));
  BOOST_TEST(ex.e[1][1] == mpz_int(4));
  BOOST_TEST(ex.gcd() == mpz_int(4));
  BOOST_TEST(ex.max_exponent() == mpz_int(4));
  layer_exponents divided = ex;
  divided.divide_by(4);
  BOOST_TEST(divided.e[0][0] == mpz_int(1));
  BOOST_TEST(divided.e[1][1] == mpz_int(1));
}

BOOST_AUTO_TEST_CASE(residual_matrix_by_hand) {
  // S = [[0, 1], [0, 0]] causal; V = [[1], [1/2]]; X = [[2], [1/3]].  L = 6.
  // Row 0 sees key 0 only: D X + E V = 1·(2 + 1) → L·3 = 18.
  // Row 1 sees keys 0, 1 (exponents 0, 0): (1/3 + 1) + (1/3 + 1/2) = 13/6 → L·13/6 = 13.
  matrix<Q> B(2, 2), V(2, 1), X(2, 1);
  B << 0, 1, 0, 0;
  V << 1, Q(1, 2);
  X << 2, Q(1, 3);
  const layer_model layer{B, mask::causal(), layer_object::residual, V, X};
  const layer_polynomial_matrix P = build_layer_matrix(layer, row_normalized_exponents(layer));
  BOOST_TEST(P.value_scale == mpz_int(6));
  BOOST_TEST(P.rows == 2u);
  BOOST_TEST(P.cols == 1u);
  BOOST_TEST((P.at(0, 0) == sparse_poly{{mpz_int(0), mpz_int(18)}}));
  BOOST_TEST((P.at(1, 0) == sparse_poly{{mpz_int(0), mpz_int(13)}}));
  BOOST_TEST(input_error_of([&] {
               build_layer_matrix(layer_model{B, mask::none(), layer_object::scores, {}, {}},
                                  row_normalized_exponents(layer));
             }).find("scores") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(random_layers_match_exact_evaluation) {
  // At u = 3/2 (a rational stand-in for e^{c/q}), entry (i, k) of M(u) must equal
  // L · u^{-min_j e_ij} · Σ_j u^{e_ij} (X_ik + V_jk) computed directly.
  auto rng = make_rng(1);
  std::uniform_int_distribution<int> num(-6, 6), den(1, 4);
  for (int trial = 0; trial < 20; ++trial) {
    const Eigen::Index m = 1 + trial % 3, n = 1 + (trial / 3) % 3, d = 1 + trial % 2;
    matrix<Q> B(m, n), V(n, d), X(m, d);
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < n; ++j) B(i, j) = Q(num(rng), den(rng));
    for (Eigen::Index j = 0; j < n; ++j)
      for (Eigen::Index k = 0; k < d; ++k) V(j, k) = Q(num(rng), den(rng));
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index k = 0; k < d; ++k) X(i, k) = Q(num(rng), den(rng));
    const layer_model layer{B, mask::none(), layer_object::residual, V, X};
    const layer_exponents ex = row_normalized_exponents(layer);
    const layer_polynomial_matrix P = build_layer_matrix(layer, ex);
    const Q u(3, 2);
    for (Eigen::Index i = 0; i < m; ++i) {
      Q lo = B(i, 0);
      for (Eigen::Index j = 1; j < n; ++j) lo = std::min(lo, B(i, j));
      for (Eigen::Index k = 0; k < d; ++k) {
        Q direct = 0;
        for (Eigen::Index j = 0; j < n; ++j) {
          const Q e = (B(i, j) - lo) * Q(ex.q);
          BOOST_REQUIRE(denominator(e) == 1);
          Q power = 1;
          for (mpz_int s = 0; s < numerator(e); ++s) power *= u;
          direct += power * (X(i, k) + V(j, k));
        }
        BOOST_TEST(evaluate(P.at(static_cast<std::size_t>(i), static_cast<std::size_t>(k)), u) ==
                   direct * Q(P.value_scale));
      }
    }
  }
}
