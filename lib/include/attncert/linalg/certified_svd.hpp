// attncert/linalg/certified_svd.hpp — certified enclosures of all singular values of an
// interval (or exact rational) matrix (enclosure tier), after S. M. Rump, "Verified bounds for
// singular values, in particular for the spectral norm of a matrix and its inverse",
// BIT Numerical Mathematics 51 (2011) 367–384.
//
// Filter, then escalate: an approximate SVD (approx tier, `approx_svd_factors`) supplies
// nearly orthogonal factors U, V; everything after that is rigorous, whatever U and V are —
// their quality only decides how tight the enclosures come out.
//
// Derivation (A m×n real, k = min(m, n), σ_1 ≥ … ≥ σ_k the singular values, ‖·‖ = ‖·‖₂).
// U (m×m) and V (n×n) are floating-point matrices, i.e. exact real matrices.
//  (1) B = Uᵀ A V, computed in interval arithmetic: B contains Uᵀ Ã V for every real Ã in A.
//      D = the diagonal part of B (d_j = B_jj, j < k), E = B − D (interval matrices).
//  (2) α ≥ ‖UᵀU − I‖ and β ≥ ‖VᵀV − I‖, bounded by the Frobenius norm of the interval
//      matrices UᵀU − I and VᵀV − I, rounded up; ε_E ≥ ‖Ẽ‖ for every Ẽ in E, likewise
//      (‖Ẽ‖₂ ≤ ‖Ẽ‖_F ≤ (Σ mag(E_ij)²)^½).  If α ≥ 1 or β ≥ 1 nothing is claimed: every
//      enclosure is [0, +∞).
//  (3) ‖U‖² = λ_max(UᵀU) ≤ 1 + α and σ_min(U)² = λ_min(UᵀU) ≥ 1 − α > 0, so U is
//      invertible with ‖U⁻¹‖ = ‖U⁻ᵀ‖ ≤ 1/√(1 − α); the same for V with β.
//  (4) σ_i(XY) ≤ ‖X‖ σ_i(Y) and σ_i(XY) ≤ σ_i(X) ‖Y‖ applied to A = U⁻ᵀ B̃ V⁻¹ and
//      B̃ = Uᵀ Ã V give σ_i(B̃) / (‖U‖‖V‖) ≤ σ_i(Ã) ≤ ‖U⁻ᵀ‖ ‖V⁻¹‖ σ_i(B̃).
//  (5) Weyl: |σ_i(B̃) − σ_i(D̃)| ≤ ‖B̃ − D̃‖ = ‖Ẽ‖ ≤ ε_E, and the singular values of the
//      rectangular diagonal D̃ are its |d̃_j| in decreasing order.
//  (6) Order statistics are monotone: if x_j ∈ [l_j, u_j] for all j, the i-th largest of the
//      x_j lies in [i-th largest of the l_j, i-th largest of the u_j].  With [l_j, u_j] = |d_j|
//      (interval absolute value) this encloses σ_i(D̃) = [δ_i⁻, δ_i⁺].  The two lists of ends
//      are sorted separately; they are floating-point points, so sorting them is exact and no
//      interval is ever compared.  (Pairing the ends of one interval after sorting by
//      midpoints would NOT be rigorous when the |d_j| overlap.)
//  Hence, for every real Ã inside A,
//      σ_i(Ã) ∈ [ max(0, δ_i⁻ − ε_E) / √((1 + α)(1 + β)),  (δ_i⁺ + ε_E) / √((1 − α)(1 − β)) ],
//  every operation evaluated in MPFI (or MPFR with the rounding direction that makes the
//  end outward), so the returned ends are rounded outward.
//
// Cost: the approximate SVD (Eigen::JacobiSVD with full U and V at the current precision)
// plus three interval/directed-rounding products of size m²n + mn², m³/2, n³/2.
// Accuracy: ε_E and α, β are O(k·u·‖A‖) and O(k·u) at unit roundoff u, so each enclosure has
// width O(k·u·σ_1 + rad(A)·k) — absolute, not relative: singular values below that level
// are not separated from 0 at this precision (escalate).
//
// The bodies are in lib/src/linalg/certified_svd.cpp: Eigen's JacobiSVD over mpfr_float is
// instantiated there once, not in every unit that includes this header.
#pragma once

#include <cstddef>
#include <limits>
#include <vector>

#include "attncert/error.hpp"
#include "attncert/linalg/matrix.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/number/precision_guard.hpp"

namespace attncert {

/// Result of a certified singular-value computation (enclosure tier).
struct singular_value_enclosures {
  /// sigma[i] contains the exact i-th largest singular value (i = 0 … min(m, n) − 1,
  /// decreasing order) of every real matrix inside the input.
  std::vector<mpfi_float> sigma;
  /// MPFR precision (bits) the enclosures were computed at.
  unsigned bits = 0;
  /// #{i : lower(sigma[i]) > 0}: every matrix inside the input has rank ≥ this, rigorously.
  std::size_t certified_positive = 0;
  /// ε_E: the upper bound on ‖E‖₂ = ‖UᵀAV − diag‖₂ that was used (+∞ when nothing is claimed).
  mpfr_float residual_bound;
  /// α ≥ ‖UᵀU − I‖₂ and β ≥ ‖VᵀV − I‖₂ (+∞ when not computed).
  mpfr_float orthogonality_defect_u, orthogonality_defect_v;
};

/// Approximate full SVD factors of a point matrix: A ≈ U·diag(σ)·Vᵀ with U m×m, V n×n,
/// computed by Eigen::JacobiSVD in mpfr_float at the current precision.  Tier: approx (no
/// claim; U and V are only nearly orthogonal).  Returns false if Eigen reports a failure or
/// a factor is not finite.
bool approx_svd_factors(const matrix<mpfr_float>& A, matrix<mpfr_float>& U, matrix<mpfr_float>& V);

namespace detail::csvd {

// Upper bound, rounded up, of sqrt(Σ max(|lo_i|, |hi_i|)²) over the intervals [lo_i, hi_i]
// handed to `visit`: the Frobenius norm of every real matrix inside an interval matrix.
// (mpfr_fma with MPFR_RNDU: each partial sum is rounded up, so the final sum bounds the
// exact one from above; abs and max are exact.)
class frobenius_upper {
 public:
  frobenius_upper() : sum_(0), mag_(0) {}
  void add(mpfr_srcptr lo, mpfr_srcptr hi) {
    if (mpfr_cmpabs(lo, hi) > 0) mpfr_abs(mag_.backend().data(), lo, MPFR_RNDU);
    else mpfr_abs(mag_.backend().data(), hi, MPFR_RNDU);
    mpfr_fma(sum_.backend().data(), mag_.backend().data(), mag_.backend().data(), sum_.backend().data(), MPFR_RNDU);
  }
  void add(const mpfi_float& x) { add(&x.backend().data()->left, &x.backend().data()->right); }
  mpfr_float value() const {
    mpfr_float r;
    mpfr_sqrt(r.backend().data(), sum_.backend().data(), MPFR_RNDU);
    return r;
  }

 private:
  mpfr_float sum_, mag_;
};

// α ≥ ‖QᵀQ − I‖_F ≥ ‖QᵀQ − I‖₂ for a point matrix Q (k×k), rounded up.  Each entry of
// QᵀQ − I is enclosed by the pair (lo, hi) of dot products accumulated with mpfr_fma rounded
// down and up; the matrix is symmetric, so off-diagonal entries are counted twice.
mpfr_float orthogonality_defect(const matrix<mpfr_float>& Q);

// C = Xᵀ·Y or C = Y·X for a point matrix X and an interval matrix Y, written out with the
// MPFI C interface (interval × point products, interval sums): every C_ij contains the
// exact product entry for every real matrix inside Y.  No Eigen kernel touches intervals.
matrix<mpfi_float> point_transpose_times(const matrix<mpfr_float>& X, const matrix<mpfi_float>& Y);

matrix<mpfi_float> times_point(const matrix<mpfi_float>& Y, const matrix<mpfr_float>& X);

mpfr_float plus_infinity();

mpfi_float nonnegative_half_line();

// Nothing claimed: every enclosure is [0, +∞) (always true of singular values).
singular_value_enclosures no_claim(std::size_t k);

}  // namespace detail::csvd

/// Enclosures of the singular values of every real matrix inside the interval matrix A,
/// given ANY approximate SVD factors U (m×m) and V (n×n) (point matrices at any precision).
/// Tier: enclosure.  Computes at the current precision (precision_guard).
/// Guarantee: for every real Ã inside A and every i < min(m, n), the exact i-th largest
/// singular value of Ã lies in the returned sigma[i]; if U or V is too far from orthogonal
/// (α or β ≥ 1) every sigma[i] is [0, +∞).  Derivation at the top of this file (Rump 2011).
/// Preconditions: U is m×m and V is n×n (else input_error).  Unbounded or NaN entries in A
/// give [0, +∞) enclosures.
singular_value_enclosures certified_singular_values_with(const matrix<mpfi_float>& A, const matrix<mpfr_float>& U,
                                                         const matrix<mpfr_float>& V);

/// Enclosures of all singular values of every real matrix inside the interval matrix A, at
/// the CURRENT precision (set it with precision_guard).  The approximate SVD of the midpoint
/// matrix (Eigen::JacobiSVD, full U and V, in mpfr_float) is the approx part; the bounds are
/// rigorous (certified_singular_values_with).  Tier: enclosure.
/// Guarantee: the exact i-th largest singular value of every real matrix inside A lies in
/// sigma[i]; certified_positive is a rigorous lower bound on the rank of every such matrix.
/// An interval matrix that contains singular matrices never gets certified_positive =
/// min(m, n).  Never claims more than it proves: if the approximate SVD fails or its factors
/// are too far from orthogonal, the enclosures are [0, +∞).  Any shape (m < n, m > n, empty).
singular_value_enclosures certified_singular_values(const matrix<mpfi_float>& A);

/// Filter, then escalate, for an exact rational matrix: encloses A at start_bits, computes
/// certified_singular_values, and doubles the precision (each attempt under its own
/// precision_guard) until certified_positive ≥ stop_at_positive (pass min(m, n) for "all")
/// or an attempt at cap_bits has been made.  Returns the last attempt; its `bits` says where
/// it stopped (g.bits(), the precision actually used).  Tier: enclosure; same guarantee as
/// above — the exact singular values of A lie in the returned intervals.
/// Preconditions: min_precision_bits ≤ start_bits ≤ cap_bits ≤ max_precision_bits (else
/// std::invalid_argument from precision_guard, or input_error when start_bits > cap_bits).
singular_value_enclosures certified_singular_values(const matrix<mpq_rational>& A, unsigned start_bits, unsigned cap_bits,
                                                    std::size_t stop_at_positive);

}  // namespace attncert
