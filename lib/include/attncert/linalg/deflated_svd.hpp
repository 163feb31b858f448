// attncert/linalg/deflated_svd.hpp — the k smallest singular values of a large square matrix,
// escalated to MPFR precision p on a deflated subspace: the binary64 SVD's trailing vectors are
// refined at p bits (approx tier), then the k smallest singular values are enclosed from a k×k
// block and three norm bounds (enclosure tier).  Nothing of size n×n is factorized in MPFR: the
// cost is a few n×n×k products per refinement step.  See proofs/P16-fast-singular-values.md,
// part D, for the theorem and every bound below.
//
// The bound (A n×n; U = [U₁ U₂], V = [V₁ V₂] with U₁, V₁ the first n − k columns of the binary64
// factors and U₂, V₂ the refined n×k blocks at p bits; M = UᵀAV = [M₁₁ M₁₂; M₂₁ M₂₂]):
//   α' ≥ ‖UᵀU − I‖₂, β' ≥ ‖VᵀV − I‖₂                 (both < 1: U, V invertible)
//   σ_min(M₁₁) ≥ s := (1 − α)·ŝ_{n−k} − √(1 + α)·ρ     (Weyl, from P16's α, ρ for [U₁ ·], [V₁ ·])
//   ε ≥ max(‖M₁₂‖, ‖M₂₁‖)                            (from the residuals AV₂ − U₂Σ₂, AᵀU₂ − V₂Σ₂)
//   σ(M₂₂) ⊂ [l_j, h_j]                              (certified_singular_values of the k×k block)
//   η = s − h₁ > 0,  δ = min(ε, 2ε²/(η + √(η² + 4ε²)))   (C.-K. Li and R.-C. Li, 2005, on the
//                                                     Jordan–Wielandt matrix of M)
//   σ_{n−k+j}(A) ∈ [max(0, l_j − δ)/√((1 + α')(1 + β')), (h_j + δ)/√((1 − α')(1 − β'))].
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "attncert/linalg/certified_svd.hpp"
#include "attncert/linalg/fast_svd.hpp"

namespace attncert {

/// What one deflated escalation did (for the report).
struct deflation_report {
  std::size_t k = 0;           ///< singular values escalated (the trailing k)
  unsigned bits = 0;           ///< MPFR precision p
  int refinement_steps = 0;    ///< refinement steps run (approx tier)
  double residual = 0;         ///< ‖AᵀU₂ − V₂Σ₂‖_F of the refined vectors (approx, for the reader)
  double epsilon = 0;          ///< ε, rounded up (+∞ when not reached)
  double gap = 0;              ///< η, rounded down (≤ 0: no claim)
  std::string why_not;         ///< empty when the bound applied; otherwise why nothing was claimed
  bool orthogonalized = false; ///< the bound applied after U₂ was orthogonalized against U₁ (step 0′)
};

/// The refined trailing singular vectors at p bits (approx tier), kept between precisions.
struct deflation_vectors {
  matrix<mpfr_float> V2;  ///< n×k; empty: start from the binary64 factors
};

/// Enclosures of the k smallest singular values σ_{n−k+1} ≥ … ≥ σ_n (returned in that order) of
/// every real matrix Ã that lies inside both the interval matrix `A` and the binary64 enclosure
/// `F` was computed from (certified_singular_values_binary64).  Tier: enclosure.  Computes at
/// the current precision (precision_guard).
/// Guarantee: each returned interval contains the exact singular value of every such Ã; when
/// the bound does not apply (report.why_not says why: α' or β' ≥ 1, no gap η > 0, a non-finite
/// quantity, MPFR underflow) — first with the refined vectors, then with them orthogonalized
/// against U₁, V₁ (step 0′, report.orthogonalized) — every returned interval is [0, +∞).
/// `vectors` is a warm start (from a lower precision) and receives the refined V₂.
/// Preconditions (else input_error): A square n×n, F.valid and not transposed, F of size n,
/// 0 < k < n.  `max_steps` bounds the refinement.  The MPFR products run on `threads` threads
/// (number/parallel.hpp: the same results as on one).
std::vector<mpfi_float> deflated_trailing_singular_values(const matrix<mpfi_float>& A, const binary64_svd_factors& F,
                                                          std::size_t k, deflation_vectors& vectors,
                                                          deflation_report& report, int max_steps = 200,
                                                          unsigned threads = 1);

/// The number of trailing singular values to escalate so that the split is well separated: the
/// smallest k ≥ k_min with lo[n−k−1] ≥ 2·hi[n−k] in the binary64 enclosures `sigma` (decreasing),
/// at most k_max; 0 when there is none.
std::size_t deflation_split(const std::vector<mpfi_float>& sigma, std::size_t k_min, std::size_t k_max);

}  // namespace attncert
