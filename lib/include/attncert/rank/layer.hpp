// attncert/rank/layer.hpp — the one model of one attention layer with exact rational data,
// its one validation, its one lcm of denominators and its one builder of the polynomial
// matrix M(u) whose rank is the rank of the layer's object.  Tier: exact.
//
// Scores S = c·B with B rational (c = 1, a rational scale folded into B, 1/√d, or the
// parameter a of a family S(a) = a·B).  q = lcm of the denominators of B on the mask's
// support, e_ij = q·B_ij ∈ ℤ, and with u = e^{c/q}, on the support E_ij = u^{e_ij}.  Row i
// is multiplied by the unit u^{−min_j e_ij} ("row-normalized"), which changes no rank at
// any u > 0, and the normalizers D_i > 0 change none either, so
//   rank softmax(S)        = rank E(u)
//   rank softmax(S)·V      = rank E(u)·V
//   rank X + softmax(S)·V  = rank (D(u)·X + E(u)·V),   D = diag(row sums of E).
// Every entry of these is an integer polynomial in u after scaling V, X by L = lcm of
// their denominators.  The single-layer rank (rank/exact_rank.hpp: u transcendental,
// proofs/P08) and the family rank (rank/family.hpp: every real a, proofs/P09) both start
// here.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attncert/attention/mask.hpp"
#include "attncert/linalg/matrix.hpp"
#include "attncert/number/types.hpp"

namespace attncert {

/// Exact integers (GMP), without expression templates (docs/architecture.md, "No expression templates").
using mpz_int = boost::multiprecision::number<boost::multiprecision::gmp_int, boost::multiprecision::et_off>;

/// Which object of the layer.
enum class layer_object { scores, attention, output, residual };

/// "scores", "attention", "output", "residual".  Errors: input_error.
layer_object parse_layer_object(const std::string& s);
const char* to_string(layer_object o);

/// One attention layer: scores c·B under mask M; V for output/residual (rows = B.cols()),
/// X for residual (shape of the output).
struct layer_model {
  matrix<mpq_rational> B;
  mask M = mask::none();
  layer_object object = layer_object::attention;
  std::optional<matrix<mpq_rational>> V, X;

  /// The one validation (validate_layer_shapes on B's shape).  Errors (input_error): the
  /// mask's shape, a missing V or X, V's rows ≠ the number of keys, X's shape ≠ (queries, V's
  /// columns), and (except for the scores object) a fully masked row, whose softmax is undefined.
  void validate() const;
};

/// The one validation of a layer, on shapes only (for callers that hold the scores in
/// factored form, rank/exact_rank.hpp): `queries`×`keys` scores under M, the object, V, X.
/// Errors: those of layer_model::validate.
void validate_layer_shapes(Eigen::Index queries, Eigen::Index keys, const mask& M, layer_object object,
                           const std::optional<matrix<mpq_rational>>& V,
                           const std::optional<matrix<mpq_rational>>& X);

/// lcm of the denominators of the entries of A (only on `support` when given; 1 for none).
/// Tier: exact.
mpz_int lcm_of_denominators(const matrix<mpq_rational>& A, const mask* support = nullptr);

/// The integer exponents of the row-normalized E(u): on the support, e_ij = q·B_ij − min_j,
/// so every row's smallest exponent is 0.  Off the support the entry is unused.
struct layer_exponents {
  mpz_int q = 1;  ///< lcm of B's denominators on the support: u = e^{c/q}
  std::vector<std::vector<mpz_int>> e;
  std::vector<std::vector<bool>> support;
  bool on(std::size_t i, std::size_t j) const { return support[i][j]; }
  /// gcd of all exponents (0 when all are 0).
  mpz_int gcd() const;
  /// Divide every exponent by G (t ↦ t^G maps one transcendental number to another, so the
  /// rank over ℚ(t) is unchanged).  Precondition: G divides every exponent, G > 0.
  void divide_by(const mpz_int& G);
  /// Largest exponent of any row (the degree of M(u)'s entries).
  mpz_int max_exponent() const;
};

/// Row-normalized exponents of a validated layer.  Precondition: layer.validate() passed.
layer_exponents row_normalized_exponents(const layer_model& layer);

/// An integer polynomial with arbitrary-size exponents: exponent → nonzero coefficient.
using sparse_poly = std::map<mpz_int, mpz_int>;

/// M(u), row-major, entries integer polynomials in u.
struct layer_polynomial_matrix {
  std::size_t rows = 0, cols = 0;
  std::vector<sparse_poly> entries;
  mpz_int value_scale = 1;  ///< L: output/residual entries are L·(row-normalized D X + E V)
  const sparse_poly& at(std::size_t i, std::size_t j) const { return entries[i * cols + j]; }
};

/// The one builder of M(u) for the attention, output or residual object of `layer`, from
/// its (possibly gcd-divided) exponents: E(u); E(u)·V·L; (D(u)·X + E(u)·V)·L.
/// Errors: input_error for the scores object (it has no exponential matrix).
layer_polynomial_matrix build_layer_matrix(const layer_model& layer, const layer_exponents& ex);

}  // namespace attncert
