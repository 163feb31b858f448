// attncert/rank/exact_rank.hpp — exact rank of one attention layer by the
// transcendence method (exact tier), with witnesses.  See proofs/P08-transcendence-rank.md.
//
// Scores S = c·B with B rational and c a nonzero real algebraic number (c = 1, a rational
// scale, or 1/√d).  Write B_ij = p_ij / q with one common denominator q.  On the mask's
// support E_ij = exp(S_ij) = t^{p_ij} with t = exp(c/q), which is transcendental by the
// Hermite–Lindemann theorem (e^α is transcendental for every nonzero algebraic α).  Every
// minor of E — and of EV, and of DX + EV with D = diag(row sums of E), for rational V, X — is an
// integer Laurent polynomial in t, so it vanishes at t iff it is identically zero.  Hence
//   rank softmax(S)         = rank_{ℚ(t)} E(t)
//   rank softmax(S)·V       = rank_{ℚ(t)} E(t)V
//   rank X + softmax(S)·V   = rank_{ℚ(t)} (D(t)X + E(t)V)
// (row scaling by the positive normalizers D⁻¹ preserves rank).
//
// Lower bound: evaluate t ↦ t₀ ∈ F_p* for random 62-bit primes p (exponents reduced mod p − 1,
// by Fermat); a nonzero r×r minor of M(t₀) mod p proves the Laurent-polynomial minor is not
// identically zero, so rank ≥ r — rigorously (the witness lists p, t₀ and the minor).
// Upper bound: structure (min(m,n); proportional rows/columns of E, i.e. equal support and
// exponent rows/columns differing by a constant; rank V), or an exact polynomial kernel N(t)
// with M(t)·N(t) ≡ 0 verified by FLINT when the degrees are moderate.  lo == hi is the exact
// rank.  Limits: one attention layer; deeper stacks are enclosure-tier only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attncert/attention/mask.hpp"
#include "attncert/linalg/matrix.hpp"
#include "attncert/rank/layer.hpp"

namespace attncert {

/// A certified rank interval with its witnesses.
struct rank_interval {
  std::size_t lo = 0, hi = 0;
  std::string lo_witness;  ///< why rank ≥ lo
  std::string hi_witness;  ///< why rank ≤ hi
  bool exact() const { return lo == hi; }
};

/// Limits of the kernel (upper-bound) computation.
struct rank_options {
  std::uint64_t seed = 20261129;  ///< seeds the random primes and evaluation points
  int evaluations = 3;            ///< independent (p, t₀) pairs tried for the lower bound
  long max_kernel_degree = 4096;  ///< attempt an exact kernel only if max row degree ≤ this
  long max_kernel_size = 96;      ///< ... and rows, cols ≤ this
};

/// Exact rank of a rational matrix over ℚ (FLINT fmpz_mat_rank after clearing
/// denominators).  lo == hi always.  Tier: exact.
rank_interval exact_rank_rational(const matrix<mpq_rational>& M);

/// Rank of the object of one attention layer whose scores are c·B (c ≠ 0 algebraic) under
/// mask M.  V is required for output/residual (rows = B.cols()), X for residual (shape of
/// the output).  For `scores` the mask is ignored (the rank of c·B, as a matrix).
/// Errors (input_error): shape mismatches, a fully masked row (softmax undefined).
/// Guarantee: the exact rank lies in [lo, hi]; the witnesses are checkable.
rank_interval layer_rank(const layer_model& layer, const rank_options& opt = {});
/// The same, for the layer (B, M, object, V, X).
rank_interval layer_rank(const matrix<mpq_rational>& B, const mask& M, layer_object object,
                         const std::optional<matrix<mpq_rational>>& V = std::nullopt,
                         const std::optional<matrix<mpq_rational>>& X = std::nullopt, const rank_options& opt = {});

}  // namespace attncert
