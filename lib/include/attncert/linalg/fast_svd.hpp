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

/// The residual bound ρ of `F` (the factors certified_singular_values_binary64 kept for `in`)
/// computed again with split products instead of one BLAS product (proofs/P16, part B′):
/// A·V exactly to 128 bits from binary64 slices multiplied by BLAS (detail::split, deflated_svd.hpp),
/// so ρ loses the γ_n·‖|A||V|‖_F of BLAS's rounding and is about the factors' true residual plus
/// the enclosure's radius.  Where that is smaller, F.rho and the enclosures `out` (those of
/// certified_singular_values_binary64, in the same order) are replaced and true is returned;
/// otherwise nothing changes.  Costs about ten dgemms of A's size: a filter's second stage, run
/// where the first leaves singular values undecided.  Tier: enclosure.
/// Errors: std::invalid_argument when the factors do not match `in` or `out`.
bool tighten_residual_split(const binary64_enclosure& in, binary64_svd_factors& F, singular_value_enclosures& out,
                            unsigned threads = 1);

/// A lower bound d on |det Ã| for every Ã inside a square triangular enclosure A: every entry
/// strictly above the diagonal (or every one strictly below it) is exactly [0, 0], midpoint and
/// radius (as a causal mask leaves them), so det Ã = Π Ã_ii with |Ã_ii| ≥ |mid_ii| − rad_ii.
/// The product is taken in MPFR at 64 bits rounded down, whose exponent range holds what binary64's
/// would not (proofs/P16, part E).  An empty rad means radius 0.
/// Tier: enclosure (a rigorous lower bound).  Returns 0 (nothing claimed) when A is not square,
/// not triangular, or a diagonal interval contains 0.
mpfr_float triangular_determinant_lower_bound(const binary64_enclosure& A);

/// Raises the lower ends of the n singular values of an n×n object from a lower bound d > 0 on
/// |det Ã| for every Ã that sv encloses the singular values of (proofs/P16, part E):
/// Π_{l≥i} σ_l = |det Ã| / Π_{l<i} σ_l ≥ d / Π_{l<i} hi_l (hi_l the upper end of sigma[l]), and
/// σ_i is the largest of those n − i factors, so σ_i ≥ (d / Π_{l<i} hi_l)^(1/(n−i)).  Each lower
/// end becomes the larger of the two (both hold); certified_positive is recounted.  Weak where
/// the upper ends are loose, but positive wherever they are finite: it decides σ_i > 0 when the
/// smallest singular values lie below what any working precision resolves.
/// Tier: enclosure.  Returns how many lower ends were raised.  d ≤ 0 changes nothing.
/// Errors: std::logic_error if a raised lower end would pass its upper end (impossible unless a
/// bound elsewhere is wrong: reported as an internal error, never hidden).
std::size_t raise_lower_ends_by_determinant(const mpfr_float& d, singular_value_enclosures& sv);

}  // namespace attncert
