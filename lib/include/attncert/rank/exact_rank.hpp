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

// ---------------------------------------------------------------------------------------------
// The same rank from the factors of the scores, fast (n = 1024–4096 tokens).  See proofs/P08,
// section "Scores in factored form".
//
// Scores S = c·Q·Kᵀ with c a nonzero real algebraic number (a rational scale, or 1/√d).  Let
// lQ, lK be the lcm of the denominators of Q's and K's entries (powers of two for float
// inputs), Qi = lQ·Q and Ki = lK·K integer matrices and N = Qi·Kiᵀ (integers).  Then
// S_ij = σ·N_ij with σ = c/(lQ·lK) ≠ 0 algebraic, so on the mask's support
// exp(S_ij) = t^{N_ij} with t = e^σ transcendental (Hermite–Lindemann).  Every minor of E(t),
// of E(t)·V·L and of (D(t)·X + E(t)·V)·L (L = lcm of V's and X's denominators; D = diag of the
// row sums of E) is an integer Laurent polynomial in t, so a minor that is nonzero mod a prime
// p at t ↦ t₀ ∈ F_p* — exponents reduced mod p − 1 (Fermat; negative exponents the same way,
// t₀ being a unit) — proves rank ≥ its size.  No row normalization and no common denominator
// of the scores are needed.  Scores given directly: N = lS·S, σ = c/lS.
//
// Algorithm: N mod (p − 1) = (Qi mod (p − 1))·(Ki mod (p − 1))ᵀ by one nmod_mat_mul (N itself
// is never formed unless the fallback below needs it); t₀^e from byte tables (≤ 8 modular
// products per entry); then one elimination: for a square matrix nmod_mat_det (det ≠ 0 is the
// full-rank witness), otherwise rref pivots and the pivot minor.  The upper bound is the cheap
// structural one (attention and residual: min(rows, cols); output: min(rows, cols, rank V),
// rank V only computed when needed).  When lo falls short of it after opt.evaluations pairs
// (p, t₀), the call falls back to layer_rank on B = N (scores σ·N: the same layer) — structure
// of E and an exact polynomial kernel — and returns the better bound on each side.
// ---------------------------------------------------------------------------------------------

/// The scores of one layer in factored form: S = c·Q·Kᵀ (Q: queries × d, K: keys × d), or
/// S = c·S₀ for given rational scores S₀.  c = scale, times 1/√d (d = Q's width) when
/// inv_sqrt_d.  The matrices are borrowed and must outlive the call.
struct score_factors {
  const matrix<mpq_rational>* S = nullptr;  ///< given scores S₀ (then Q and K are unused), or
  const matrix<mpq_rational>* Q = nullptr;  ///< queries and
  const matrix<mpq_rational>* K = nullptr;  ///< keys
  mpq_rational scale = 1;                   ///< the rational factor of c (0 allowed: all scores 0)
  bool inv_sqrt_d = false;                  ///< c also has the factor 1/√d (needs Q and K)
};

/// Rank of the object of the layer whose scores are given by F, under mask M, with V
/// (rows = keys) for output/residual and X (queries × V's columns) for residual — the same
/// layer and the same answer as layer_rank(c·Q·Kᵀ …), computed from the factors.  For the
/// scores object the mask is ignored (rank of S as a matrix).  Tier: exact.
/// Errors (input_error): neither S nor both Q and K, Q and K of different widths, inv_sqrt_d
/// with S, and the shape / fully-masked-row errors of layer_rank.
/// Guarantee: the exact rank lies in [lo, hi]; lo is witnessed by a prime p, a point t₀ and a
/// minor nonzero mod p (re-checkable with modular arithmetic from Q, K, V, X), hi by structure
/// or by layer_rank's exact kernel.  The prime has ⌊(64 − ⌈log₂ n⌉)/2⌋ bits (n the largest
/// dimension), so FLINT's modular dot products stay in one limb; its size affects only the
/// chance of a retry, never soundness.
rank_interval layer_rank_from_factors(const score_factors& F, const mask& M, layer_object object,
                                      const std::optional<matrix<mpq_rational>>& V = std::nullopt,
                                      const std::optional<matrix<mpq_rational>>& X = std::nullopt,
                                      const rank_options& opt = {});

}  // namespace attncert
