// attncert/proofs/rank_heads.hpp — the exact quantities of the rank–heads trade-off
// (proofs/L4-rank-heads-tradeoff.md, parts C, D and F), shared by the check `rank-heads-tradeoff`
// and the prover of `attncert certify`'s rank_heads_lower_bound, rank_heads_vote_mse and rank_heads_full_rank_mse claims.  Tier: exact (GMP
// rationals and integers) except the two enclosure-tier functions of part F at the end (MPFI).  The certificate
// checker re-derives them by other formulas (lib/src/verify/rank_heads.cpp).
#pragma once

#include <cstdint>
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

// ---- part G: context length N on a finite lattice instance (lib/src/proofs/rank_heads_context.cpp) ----

/// The numbers of keys the context rows use; an input's key set for N is the first N of its 16 keys.
inline const std::vector<int> context_sizes = {2, 4, 8, 16};
/// Largest lattice radius: keeps every exact comparison of compare_scaled within 128-bit integers.
constexpr long lattice_radius_max = 4096;
/// SplitMix64 (Steele, Lea, Flood): the instance generator, simple enough to be re-implemented by a test.
struct splitmix64 {
  std::uint64_t state;
  std::uint64_t next();
};
/// An integer point z of the ball |z| ≤ K, z ≠ 0, standing for the unit vector z/|z|.
struct lattice_point {
  std::vector<std::int64_t> z;
  std::int64_t norm2 = 0;  ///< |z|²
};
/// Draws coordinates (next() >> 32) mod (2K + 1) − K until 0 < |z|² ≤ K² (rejection: the direction of a uniform
/// point of the lattice ball).  Errors: input_error for d < 1 or K outside [1, 4096].
lattice_point lattice_ball_point(splitmix64& g, int d, long K);
/// ⟨a, b⟩ of two points (exact; |⟨a, b⟩| ≤ K²).
std::int64_t dot(const lattice_point& a, const lattice_point& b);
/// sign(A/√B − C/√D) for B, D > 0, |A|, |C|, B, D ≤ 2²⁴: exact (128-bit integers).
int compare_scaled(std::int64_t A, std::int64_t B, std::int64_t C, std::int64_t D);
/// Indices i < n maximising numerators[i]/|z_i| (all ties).  Exact.
std::vector<int> hardmax_set(const std::vector<std::int64_t>& numerators, const std::vector<lattice_point>& keys, int n);

/// The exact counts of one context instance (proofs/L4 part G): `inputs` inputs (a query and 16 keys each, from
/// splitmix64{seed}; an input whose nearest key is tied for some N is redrawn) and `heads` rank-one hardmax heads
/// (directions from splitmix64{seed ^ 0x4EAD}), all lattice points of radius 4096 in dimension d.  A head's vote
/// for N is the key maximising sign(a·y)(a·x_i) over the first N keys, a tie splitting it equally.  The two-layer
/// vote construction's output after the first H heads is the plurality of the tally (a tie averages the tied keys).
struct context_instance {
  struct per_n_counts {
    std::vector<std::int64_t> input_credit;  ///< per input: the right votes of all heads, in units of 1/720720
    std::vector<std::int64_t> head_credit;   ///< per head: its right votes over all inputs, same units
    long head_ties = 0;                      ///< (input, head) pairs whose selection was a tie
    std::vector<long> vote_wrong;            ///< per vote size: inputs where the construction's output is not the target
    std::vector<mpfi_float> vote_mse;        ///< per vote size: the construction's MSE on the instance, enclosed
    /// The fraction of (input, head) pairs in which the head selects the nearest key, exactly.
    mpq_rational hit_rate(int inputs, int heads) const;
    /// approx_: the standard error of hit_rate as an estimate of the continuum probability (binary64).
    double approx_standard_error() const;
  };
  int d = 0, inputs = 0, heads = 0;
  std::uint64_t seed = 0;
  std::vector<int> vote_sizes;
  long redrawn = 0;                 ///< inputs redrawn for a tied nearest key
  std::vector<per_n_counts> per_n;  ///< indexed like context_sizes
};
/// Tier: exact (counts and rates); enclosure (vote_mse).  Errors: input_error for d outside [2, 8], fewer than two
/// inputs or heads, a vote size outside [1, heads], vote sizes not increasing.
context_instance context_counts(int d, int inputs, int heads, std::uint64_t seed, const std::vector<int>& vote_sizes);

/// p₂(d) = A + B·π^{−k}: the probability that a rank-one hardmax head with a uniform direction selects the nearer
/// of two keys, for independent uniform keys and query on S^{d−1} (proofs/L4 part G).  Exact tier.
struct pair_hit_probability {
  mpq_rational a, b;
  int pi_power = 1;
};
pair_hit_probability pair_hit_probability_of(int d);

// ---- parts H and I: attention-only nearest-neighbour models on a fixed test set (lib/src/proofs/rank_heads_trained.cpp) ----

/// How a trained model's tokens carry positions: none (part H), or learned positions added to the content or
/// concatenated in scratch coordinates (part I).
enum class trained_encoding { none = 0, additive = 1, concatenated = 2 };
/// One trained model of checks/data/rank_heads_trained.inc or rank_heads_positions.inc
/// (experiments/rank_heads_train.py): d = 8; width D = 9 (content and a query flag; encoding none) or 10 + N (and
/// N + 1 scratch coordinates; encodings with positions); `layers` layers of H heads with Wq, Wk (D × r) and Wv (D × D),
/// a readout Wr (D × 8).  Weights binary64 (float32 for the trained ones): the N + 1 positions (D each; encodings with positions only), then per
/// layer and head Wq, Wk, Wv row-major, then Wr.  The tokens are [x_i, 0…] + P_i for the keys, [y, 1, 0…] + P_N for
/// the query.
struct trained_model_info {
  int N, H, r, layers, seed, steps;
  double train_loss;        ///< mean training loss of the last 100 steps (float32, approx)
  double float32_test_mse;  ///< torch's float32 MSE on the test set rounded to float32 (approx, at training)
  double seconds;           ///< training time
  const double* weights;  ///< binary64 (the float32 weights of the check's models, exactly)
  trained_encoding encoding = trained_encoding::none;
  int width = 9;
};
/// The fixed test set for N keys: `inputs` inputs of a query and N keys, lattice points of radius 4096 in dimension 8
/// from splitmix64{20261205 + N}, each rounded to binary64 as z_i / sqrt(|z|²) (correctly rounded operations); an
/// input whose nearest key is tied (exactly) is redrawn.
struct trained_test_set {
  std::vector<std::vector<double>> y;
  std::vector<std::vector<std::vector<double>>> x;
  std::vector<int> target;  ///< the nearest key, decided exactly
  long redrawn = 0;
};
trained_test_set trained_test_set_of(int N, int inputs);
/// The model's prediction for one input, evaluated in T (mpfi_float: an enclosure of the exact value; double: approx).
template <class T>
std::vector<T> trained_forward(const trained_model_info& m, const std::vector<double>& y, const std::vector<std::vector<double>>& keys);
/// The filter of trained_error_of: the prediction in binary64 intervals rounded outward (every operation; the
/// exponential from exp_with_bound).  False (out empty) when an operation overflows or an exponent leaves the
/// domain.  Tier: enclosure.
bool trained_forward_binary64_intervals(const trained_model_info& m, const std::vector<double>& y, const std::vector<std::vector<double>>& keys,
                                        std::vector<mpfi_float>& out);
/// The model's MSE on the test set, enclosed; and where the prediction's nearest key is the target, decided by the
/// enclosures.  Each input is evaluated in binary64 intervals rounded outward (exponential: exp_with_bound) and in
/// MPFI when those are wider than 2^-30 or fail.  Tier: enclosure (approx_binary64_mse: approx).
struct trained_error {
  mpfi_float mse;
  long nearest_right = 0, nearest_wrong = 0, nearest_undecided = 0;
  double approx_binary64_mse = 0;
  long escalated = 0;  ///< inputs whose binary64-interval evaluation was too wide or failed (then MPFI)
};
trained_error trained_error_of(const trained_model_info& m, const trained_test_set& t);

}  // namespace attncert::rank_heads
