// attncert/proofs/rank_heads.hpp — the exact quantities of the rank–heads trade-off
// (proofs/L4-rank-heads-tradeoff.md, parts C, D and F), shared by the check `rank-heads-tradeoff`
// and the prover of `attncert certify`'s rank_heads_lower_bound, rank_heads_vote_mse and rank_heads_full_rank_mse claims.  Tier: exact (GMP
// rationals and integers) except the two enclosure-tier functions of part F at the end (MPFI).  The certificate
// checker re-derives them by other formulas (lib/src/verify/rank_heads.cpp).
#pragma once

#include <vector>

#include "attncert/linalg/matrix.hpp"
#include "attncert/number/types.hpp"

namespace attncert {
/// Exact integers (GMP), without expression templates (the same alias as rank/layer.hpp's).
using mpz_int = boost::multiprecision::number<boost::multiprecision::gmp_int, boost::multiprecision::et_off>;
}  // namespace attncert

namespace attncert::rank_heads {

/// c_d = Γ(d/2)/(√π Γ((d−1)/2)), the density at 0 of one coordinate of a uniform point of S^{d−1}
/// (density c_d (1 − t²)^{(d−3)/2} on [−1, 1]): r for odd d, r/π for even d.  Errors: input_error for d < 2.
struct density_constant {
  mpq_rational r;
  bool over_pi = false;
};
density_constant density_constant_of(int d);

/// N(d, ℓ) = C(ℓ+d−1, ℓ) − C(ℓ+d−3, ℓ−2), the dimension of the degree-ℓ spherical harmonics on S^{d−1}.
mpz_int harmonic_dimension(int d, int l);

/// m(d, r, ℓ): the dimension of the degree-ℓ spherical harmonics on S^{d−1} that depend on y only through a
/// rank-r projection, min(C(ℓ + r − 1, r − 1), N(d, ℓ)) for r < d (proofs/L4 part D), N(d, ℓ) for r ≥ d.
mpz_int ridge_dimension(int d, int r, int l);

/// E_ℓ / (1 or π⁻²): the energy of y ↦ sign⟨y, u⟩ in degree ℓ is this rational for odd d and this rational times
/// π⁻² for even d (proofs/L4 part C; 0 for even ℓ).  Errors: input_error for d < 3 or ℓ < 0.
mpq_rational energy_coefficient(int d, int l);
/// energy_coefficient(d, ℓ) for ℓ = 0 … L, computed once per (d, L) in a process (thread-safe).
const std::vector<mpq_rational>& energy_coefficients(int d, int L);

/// a + b·π⁻² with a, b rational.
struct pi2_rational {
  mpq_rational a, b;
};

/// LB(d, H, r) = ½ Σ_{ℓ odd ≤ L} E_ℓ · max(0, 1 − H·m(d, r, ℓ)/N(d, ℓ)), plus for r = 1 the tail
/// ½ (1 − Σ_{ℓ ≤ L} E_ℓ)·max(0, 1 − H/N(d, L')) (L' the first odd degree above L): a lower bound on the MSE of
/// EVERY attention layer with H heads of rank ≤ r on the N = 2 distribution (proofs/L4 part D).  Truncation at
/// L only lowers it.  Errors: input_error for d < 3, H < 1, r < 1 or L < 1.
pi2_rational rank_lower_bound(int d, const mpz_int& heads, int rank, int max_degree);

/// LB with a path from the query to the output (residual): rank one, degree 1 dropped (proofs/L4 part F).
pi2_rational rank_lower_bound_residual(int d, const mpz_int& heads, int max_degree);

/// M_d = (4/π²) E[arcsin(t)²] (t one coordinate of a uniform point of S^{d−1}) = a + b·π⁻², exactly, by the
/// recurrence I_n = ((n − 1)/n) I_{n−2} − 2C_n/n² of I_n = ∫ θ² cos^n θ dθ over [−π/2, π/2] (proofs/L4 part E).
/// H orthonormal hardmax rank-one heads have relaxed MSE ½(1 − H·M_d), a lower bound for every hardmax layer with
/// those query directions.  Exact tier.  Errors: input_error for d < 3.
pi2_rational arcsin_moment(int d);

/// Σ_{ℓ odd ≤ L} E_ℓ²/N(d, ℓ) + [0, T_L²/N(d, L + 1)] (T_L = 1 − Σ_{ℓ ≤ L} E_ℓ): the harmonic series of M_d,
/// enclosed at the current MPFR precision — an independent witness of arcsin_moment.  Tier: enclosure.
mpfi_float arcsin_moment_series(int d, int max_degree);

/// Part E's verified solve (proofs/L4 part E, "verified solve"): for hardmax rank-one heads whose query directions
/// are the rows of `directions` (exact, nonzero; a row parallel or antiparallel to an earlier one is dropped, it adds
/// nothing), every layer of hardmax heads with scores (a_h·y)(b_h·x_i) (any b_h, any value and output maps; no
/// residual) on the N = 2 distribution has MSE ≥ the relaxed error ½(1 − tr(K⁻¹B)), K_hg = (2/π) arcsin⟨â_h, â_g⟩,
/// B_hg = Σ_ℓ E_ℓ² P_ℓ(⟨â_h, â_g⟩)/N(d, ℓ) (series cut at `max_degree`, tail enclosed).  K and B are enclosed in
/// MPFI at the current precision, then held as binary64 midpoint and radius; X ≈ K⁻¹ from a binary64 Cholesky
/// (approx part) and a Frobenius residual bound make the result rigorous.  Tier: enclosure.  Guarantee: when
/// `certified`, the exact relaxed error lies in `bound`.  Errors: input_error for d < 3, no rows, a row of the
/// wrong length or a zero row, max_degree < 1.
struct hardmax_relaxed_enclosure {
  mpfi_float bound;        ///< encloses the relaxed error (its lower end bounds every such layer's MSE from below)
  bool certified = false;  ///< false: the verification failed (K too ill-conditioned); nothing is claimed
  double approx = 0;       ///< ½(1 − tr(K⁻¹B)) in binary64 (approx tier, for display)
  double rho = 0;          ///< upper bound of ‖I − K·X‖_F (X ≈ K⁻¹)
  int degree = 0;          ///< series truncation L
  long distinct = 0;       ///< rows kept (no two parallel)
};
hardmax_relaxed_enclosure hardmax_relaxed_mse(int d, const matrix<mpq_rational>& directions, int max_degree);

/// (1 − t²)^{(d−3)/2}, the density of one coordinate of a uniform point of S^{d−1} up to c_d, for t in [0, 1] (an
/// enclosure for the enclosure t; an upper end above 1 is read as 1).  Tier: enclosure.
mpfi_float sphere_weight(const mpfi_float& t, int d);

/// σ(−s)² = (1 + e^s)^{−2}, enclosed.  Tier: enclosure.
mpfi_float logistic_tail_squared(const mpfi_float& s);

/// The MSE of the full-rank head λI on the N = 2 distribution in dimension d (proofs/L4 part A),
/// 4 c_d ∫₀¹ σ(−√2λt)² (1 − t²)^{(d−3)/2} dt, enclosed: with s = √2λt, `panels` panels on [0, min(√2λ, 40)], each
/// bounded by convexity of σ(−s)² (midpoint below, trapezoid above) times the nonincreasing weight at its ends, and
/// [0, e^{−80}/2] for s beyond 40.  About 10⁻³ wide relatively at 2048 panels.  Tier: enclosure.  Errors:
/// input_error for d < 3, λ ≤ 0 or panels < 1.
mpfi_float full_rank_mse(int d, const mpq_rational& lambda, int panels);

/// P(Bin(H, q) ≤ (H − 1)/2) for odd H and q in [1/2, 1], enclosed at the current MPFR precision: the terms from
/// k = (H − 1)/2 downward, then a geometric bound of the rest once it is below 10⁻³⁰ of the sum (proofs/L4 part F).
/// Tier: enclosure.  Errors: input_error for even H, H < 1 or q outside [1/2, 1].
mpfi_float binomial_lower_tail(long H, const mpfi_float& q);

/// The two-layer vote construction of proofs/L4 part F with H (odd) i.i.d. uniform rank-one vote directions, hardmax:
/// its MSE averaged over the directions and the N = 2 inputs, 4 c_d ∫₀¹ B_H(1 − arccos(t)/π)(1 − t²)^{(d−3)/2} dt,
/// enclosed by monotone Riemann sums (the integrand is nonincreasing): `panels` equal panels on [0, t₀],
/// t₀ = min(1, 12/√H), and f(t₀)(1 − t₀) for the rest.  Some direction set does at least this well.  `B` holds the
/// enclosures of B_H at the panel ends t_k = k t₀/panels (k = 0 … panels; they do not depend on d and are kept per
/// (H, panels, precision) in the process).  Tier: enclosure.  Errors: input_error for d < 3, even H or panels < 1.
struct vote_mse_enclosure {
  mpfi_float mse;
  mpfi_float t0;       ///< the end of the panels (1, or 12/√H enclosed)
  bool whole = true;   ///< t₀ = 1 (no tail term)
  std::vector<mpfi_float> B;
};
vote_mse_enclosure two_layer_vote_mse(int d, long H, int panels);

}  // namespace attncert::rank_heads
