// attncert/linalg/fast_svd.hpp — singular values at binary64 speed: LAPACK's divide-and-conquer
// SVD (approx tier) and, from its factors, certified enclosures of every singular value of every
// real matrix inside a binary64 midpoint-radius enclosure (enclosure tier).  See
// proofs/P16-fast-singular-values.md for the derivation and the assumptions on BLAS.
//
// Why LAPACK (dgesdd through LAPACKE) and not Eigen's BDCSVD: it is the SVD NumPy runs (the
// numerical ranks attncert reports are then the ones a NumPy user gets), and it runs on whatever
// BLAS Debian selects (OpenBLAS when installed: blocked, threaded).  BDCSVD was not timed here.
//
// The certified enclosure (Rump's a-posteriori approach, residual form).  A is m×n with m ≥ n
// (otherwise Aᵀ, which has the same singular values); U (m×n), σ̂ (n) and V (n×n) are any
// binary64 matrices — their quality only decides how tight the enclosures come out:
//   α ≥ ‖UᵀU − I‖₂,  β ≥ ‖VᵀV − I‖₂,  ρ ≥ ‖A·V − U·diag(σ̂)‖₂ for every A in the enclosure.
// If α < 1 and β < 1, then for every such A and every i (σ̂_(i) the i-th largest |σ̂_j|):
//   σ_i(A) ∈ [ max(0, σ̂_(i)·√(1 − α) − ρ) / √(1 + β),  (σ̂_(i)·√(1 + α) + ρ) / √(1 − β) ].
// α, β and ρ come from BLAS products with the a priori bound |fl(XY) − XY| ≤ γ_k·|X|·|Y|
// (γ_k = k·u/(1 − k·u), u = 2⁻⁵³, plus an underflow allowance), which holds for any order of
// summation, blocking, threading and use of FMA — the assumption is only that the BLAS computes
// each entry as a sum of the k products (no Strassen-like fast multiplication).
#pragma once

#include <cstddef>
#include <vector>

#include "attncert/linalg/certified_svd.hpp"
#include "attncert/linalg/lapack.hpp"
#include "attncert/linalg/matrix.hpp"

namespace attncert {

/// A binary64 enclosure of a real matrix: every real matrix A with |A − mid| ≤ rad entrywise.
/// `rad` may be empty (a point matrix).  Tier: enclosure (when produced by an enclosing
/// function; the struct itself is data).
struct binary64_enclosure {
  matrix<double> mid, rad;
};

/// Certified enclosures of all min(m, n) singular values of every real matrix inside `A`,
/// decreasing, from one dgesdd with vectors and four BLAS products (proofs/P16).
/// Tier: enclosure.  Guarantee: sigma[i] contains σ_i of every matrix inside A; when α or β
/// comes out ≥ 1 (or anything is not finite) nothing is claimed: every enclosure is [0, +∞].
/// Returns the enclosures in the same struct as the MPFI path (bits = 53).
/// Errors: input_error for a non-finite midpoint or radius.
singular_value_enclosures certified_singular_values_binary64(const binary64_enclosure& A);

/// The approximate factors and the bounds behind certified_singular_values_binary64, for a caller
/// that escalates part of the spectrum (linalg/deflated_svd.hpp).  A is m×n with m ≥ n after the
/// transposition (transposed: these are the factors of the midpoint's transpose).  s is dgesdd's,
/// decreasing and ≥ 0; alpha ≥ ‖UᵀU − I‖₂, beta ≥ ‖VᵀV − I‖₂ and rho ≥ ‖Ã·V − U·diag(s)‖₂ for every
/// Ã inside the enclosure (proofs/P16, part B).  valid = false: nothing was claimed (the bounds
/// are then not usable).
struct binary64_svd_factors {
  matrix<double> U, V;
  std::vector<double> s;
  double alpha = 0, beta = 0, rho = 0;
  bool transposed = false, valid = false;
};

/// As above, and keeps the factors and bounds in `factors` (nothing else changes).
singular_value_enclosures certified_singular_values_binary64(const binary64_enclosure& A, binary64_svd_factors& factors);

}  // namespace attncert
