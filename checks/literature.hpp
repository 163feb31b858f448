// checks/literature.hpp — helpers shared by the checks of issue 7 (results of the
// literature: nearest-neighbour, head-size-bottleneck, rank-collapse) and the functions their
// tests call directly.  Two additions to checks/common.hpp:
//  * escalate(): filter, then escalate, like certify_sign, but keeping the enclosures of
//    several quantities at the deciding precision (a report shows the value certified, not
//    only the sign of a difference);
//  * negative_control(): a statement that must be REFUTED.  The row passes exactly when the
//    statement was refuted; it fails when the statement was certified (the check is broken)
//    and is undecided otherwise.  The statement's own verdict is kept in the note.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "attncert/proofs/rank_heads.hpp"
#include "checks/common.hpp"

namespace attncert::checks {

/// Result of an escalated enclosure evaluation.
struct escalation {
  truth answer = truth::unknown;  ///< is values[0] certainly > 0?
  unsigned bits = 0;              ///< precision that decided (or the cap)
  std::vector<std::string> shown; ///< the enclosures of every returned value at that precision
};

/// Evaluate `f` at `start` bits, doubling up to `cap` while the sign of its first value is
/// undecided.  Tier: enclosure — `answer` is certainly_true only if the whole first interval
/// is > 0, certainly_false only if it is <= 0.  The other values are only reported.
inline escalation escalate(const std::function<std::vector<mpfi_float>()>& f, unsigned start, unsigned cap) {
  return ziv_escalate(precision_schedule{start, cap}, [&](unsigned bits) {
           precision_guard g(bits);
           const std::vector<mpfi_float> v = f();
           escalation out;
           out.bits = g.bits();
           for (const auto& x : v) out.shown.push_back(number_traits<mpfi_float>::to_string(x, 12));
           out.answer = certainly_positive(v.at(0));
           const bool decided = out.answer != truth::unknown;
           return ziv_step<escalation>{std::move(out), decided};
         })
      .value;
}

/// Enclosure-tier row from an escalation (pass only when certain).
inline report::claim_row claim_escalated(const std::string& claim, const std::string& statement,
                                         const std::string& instance, const escalation& e, const std::string& computed,
                                         const std::string& expected, const std::string& rule) {
  report::claim_row r = make_row(claim, statement, instance, "mpfi" + std::to_string(e.bits), tier::enclosure);
  r.computed = computed;
  r.expected = expected;
  r.tolerance = "0";
  r.tolerance_rule = rule + " (filter, then escalate: decided at " + std::to_string(e.bits) + " bits)";
  r.result = e.answer == truth::certainly_true ? verdict::pass
             : e.answer == truth::certainly_false ? verdict::fail
                                                 : verdict::undecided;
  return r;
}

/// Turn the row of a statement that must be refuted into a negative-control row (see the
/// file comment).  The claim id gets the prefix "control-".
inline report::claim_row negative_control(report::claim_row r) {
  const verdict inner = r.result;
  r.claim = "control-" + r.claim;
  r.statement = "NEGATIVE CONTROL, must be refuted: " + r.statement;
  const std::string said = inner == verdict::fail ? "REFUTED" : inner == verdict::pass ? "CERTIFIED (control broken)"
                                                                                     : "UNDECIDED";
  r.note = "the statement itself is " + said + (r.note.empty() ? "" : "; " + r.note);
  r.result = inner == verdict::fail ? verdict::pass : inner == verdict::pass ? verdict::fail : inner;
  return r;
}

/// ‖v‖₂ of a row or column vector, in T.
template <class T>
T norm2(const matrix<T>& v) {
  using std::sqrt;
  using boost::multiprecision::sqrt;
  T s(0);
  for (Eigen::Index i = 0; i < v.rows(); ++i)
    for (Eigen::Index j = 0; j < v.cols(); ++j) s += v(i, j) * v(i, j);
  return sqrt(s);
}

/// Matrix of T from decimal strings (exact decimals: enclosed by intervals, exact in ℚ,
/// rounded once in approx formats).
template <class T>
matrix<T> from_strings(Eigen::Index r, Eigen::Index c, const std::vector<std::string>& v) {
  matrix<T> m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = number_traits<T>::from_string(v.at(static_cast<std::size_t>(i * c + j)));
  return m;
}

// ---- rank-heads-tradeoff (checks/rank_heads_tradeoff.cpp, proofs/L4-rank-heads-tradeoff.md) ----
namespace rht {

/// c_d = Γ(d/2)/(√π Γ((d−1)/2)), the density at 0 of one coordinate of a uniform point of S^{d−1}
/// (density c_d (1 − t²)^{(d−3)/2} on [−1, 1]): r for odd d, r/π for even d.  Exact tier.
using rank_heads::density_constant;
using rank_heads::density_constant_of;
mpfi_float pi_enclosure();
/// c_d enclosed.
mpfi_float value_of(const density_constant& c);
/// MSE of the full-rank head W_KᵀW_Q = λI, W_OᵀW_V = I on the N = 2 distribution in dimension d ≥ 3,
/// 4 c_d ∫₀¹ σ(−√2λt)² (1 − t²)^{(d−3)/2} dt, enclosed (`panels` panels; proofs/L4 part A).  Tier: enclosure.
mpfi_float mse_full_rank(int d, const mpq_rational& lambda, int panels);
/// K_d = 2√2 c_d (ln 2 − 1/2): λ·MSE ≤ K_d for every λ > 0 and λ·MSE → K_d (proofs/L4 part B).
mpfi_float asymptotic_constant(int d);
/// N(d, ℓ) = C(ℓ+d−1, ℓ) − C(ℓ+d−3, ℓ−2), the dimension of the degree-ℓ spherical harmonics on S^{d−1}.
long harmonic_dimension(int d, int l);
/// E_ℓ / (1 or π⁻²): the energy of y ↦ sign⟨y, u⟩ in degree ℓ is this rational for odd d and this
/// rational times π⁻² for even d (proofs/L4 part C).  Exact tier.
using rank_heads::energy_coefficient;

/// a + b·π⁻² with a, b rational: the exact values of proofs/L4 parts D and E.  Exact tier.
using rank_heads::pi2_rational;
mpfi_float value_of(const pi2_rational& x);
std::string text_of(const pi2_rational& x);
/// m(d, r, ℓ): the dimension of the degree-ℓ spherical harmonics on S^{d−1} that depend on y only through
/// a rank-r projection, C(ℓ + r − 1, r − 1) for r < d (proofs/L4 part D), N(d, ℓ) for r ≥ d.
long ridge_dimension(int d, int r, int l);
/// LB(d, H, r) = ½ Σ_{ℓ odd ≤ L} E_ℓ · max(0, 1 − H·m(d, r, ℓ)/N(d, ℓ)): a lower bound on the MSE of EVERY
/// attention layer with H heads of rank ≤ r on the N = 2 distribution (any scores' scale, softmax or hardmax,
/// any keys, values and output maps; proofs/L4 part D).  Truncation at L only lowers it.  Exact tier.
pi2_rational rank_lower_bound(int d, long heads, int rank, int max_degree);
/// M_d = (4/π²) E[arcsin(t)²], t a coordinate of a uniform point of S^{d−1} (= Σ_ℓ E_ℓ²/N(d, ℓ)), in closed
/// form (proofs/L4 part E).  Exact tier.
pi2_rational arcsin_moment(int d);
/// Σ_{ℓ odd ≤ L} E_ℓ²/N(d, ℓ) + [0, T_L²/N(d, L + 1)] (T_L = 1 − Σ_{ℓ ≤ L} E_ℓ): the harmonic series of M_d,
/// enclosed — an independent witness of arcsin_moment.  Tier: enclosure.
mpfi_float arcsin_moment_series(int d, int max_degree);

/// The relaxed hardmax bound of proofs/L4 part E for rank-one heads whose query directions are the rows of A:
/// every layer of hardmax heads with scores (a_h·y)(b_h·x_i) (any b_h, any value and output maps) has MSE
/// ≥ ½(1 − tr(K⁻¹B)), K_hg = (2/π) arcsin⟨â_h, â_g⟩, B_hg = Σ_ℓ E_ℓ² P_ℓ(⟨â_h, â_g⟩)/N(d, ℓ).
using hardmax_bound = rank_heads::hardmax_relaxed_enclosure;  // bound, certified, approx, rho, degree, distinct
/// Tier: enclosure.  Guarantee: if certified, the exact relaxed error of part E is in bound (rank_heads::hardmax_relaxed_mse
/// on the binary64 rows read exactly as rationals).
hardmax_bound hardmax_rank_one_bound(int d, const matrix<double>& A, int max_degree);
/// Query directions for H rank-one heads in dimension d that maximise tr(K⁻¹B) (the captured energy), by
/// projected gradient ascent from `restarts` seeded random starts.  approx_: any result is then certified by
/// hardmax_rank_one_bound; the optimizer only decides how good the certified number is.
matrix<double> approx_optimized_directions(int d, int heads, std::uint64_t seed, int restarts, int iterations);

/// LB with a path from the query to the output (residual): the same bound with degree 1 dropped, since a
/// function linear in y can carry any degree-1 harmonic (proofs/L4 part F).  Exact tier.
pi2_rational rank_lower_bound_residual(int d, long heads, int max_degree);
/// P(Bin(H, q) ≤ (H − 1)/2) for odd H and q in [1/2, 1], enclosed (the summed terms plus a geometric bound of
/// the rest).  Tier: enclosure.
mpfi_float binomial_lower_tail(long H, const mpfi_float& q);
/// The two-layer vote construction (proofs/L4 part F) with H (odd) i.i.d. uniform rank-one vote directions, hardmax:
/// its MSE averaged over the directions and the N = 2 inputs, 4 c_d ∫₀¹ B_H(1 − arccos(t)/π)(1 − t²)^{(d−3)/2} dt
/// (B_H = binomial_lower_tail), enclosed by monotone Riemann sums.  Some direction set does at least this well.
mpfi_float two_layer_vote_mse(int d, long H, int panels);

/// Softmax at finite scale (proofs/L4 part F): with softmax at scale λ in layer 1 and μ in layer 2 instead of hardmax,
/// the vote construction's MSE averaged over the directions and the N = 2 inputs is at most two_layer_vote_mse(d, H)
/// plus this: 8 c_d H (ln(4H)/(√2 λ))^{1/2} + 2 e^{−2μ}.  Tier: enclosure of that expression (the bound itself is
/// the lemma of part F).  Errors: input_error for d < 3, H < 1 or a scale not certainly positive.
mpfi_float softmax_vote_penalty(int d, long H, const mpfi_float& lambda, const mpfi_float& mu);

/// The explicit two-layer construction of part F on one input, in exact rationals: tokens of width 2d + 2
/// (content, a concatenated position ±1, tally, out), layer 1 = H hardmax heads with rank-one scores
/// (a_h·y)(a_h·x_i) writing the selected key's position into the query's tally, layer 2 = one hardmax head with
/// rank-one score tally·position copying the selected key's content into out, read out.  Every matrix is built
/// explicitly and applied (a tie averages the tied keys).  Exact tier.
struct vote_outcome {
  std::vector<mpq_rational> output;  ///< the network's prediction (d entries)
  mpq_rational tally;                ///< Σ_h (vote of head h), each ±1 (0 on a tie)
};
vote_outcome two_layer_vote_forward(const matrix<mpq_rational>& directions, const std::vector<mpq_rational>& x1,
                                    const std::vector<mpq_rational>& x2, const std::vector<mpq_rational>& y);

// ---- context length N (checks/rank_heads_context.cpp, proofs/L4 part G) ----
using rank_heads::compare_scaled;
using rank_heads::context_counts;
using rank_heads::context_instance;
using rank_heads::context_sizes;
using rank_heads::dot;
using rank_heads::hardmax_set;
using rank_heads::lattice_ball_point;
using rank_heads::lattice_point;
using rank_heads::lattice_radius_max;
using rank_heads::pair_hit_probability;
using rank_heads::pair_hit_probability_of;
using rank_heads::splitmix64;
mpfi_float value_of(const pair_hit_probability& p);
std::string text_of(const pair_hit_probability& p);

/// The two-layer vote construction for N keys, built and applied in rationals: tokens of width 2d + 2N (content,
/// a concatenated one-hot position, a tally per key, out); layer 1 = H hardmax heads with rank-one scores
/// (a_h·y)(a_h·x_i) writing the selected key's position into the tally (residual); layer 2 = one hardmax head with
/// scores ⟨(I − 11ᵀ/N)·tally, position⟩ (a bilinear form of rank N − 1) copying the selected key's content into out.
struct vote_outcome_n {
  std::vector<mpq_rational> output;         ///< the out block (d entries)
  std::vector<mpq_rational> tally;          ///< the query's tally after layer 1 (N entries)
  matrix<mpq_rational> second_layer_form;   ///< W_Q2ᵀ W_K2 (W × W)
};
vote_outcome_n vote_forward_n(const matrix<mpq_rational>& directions, const matrix<mpq_rational>& keys, const std::vector<mpq_rational>& y);

/// H seeded directions in dimension d with integer entries in [−3, 3] (an all-zero row becomes e₀), for the exact
/// grid checks of the constructions of parts F and G.
matrix<mpq_rational> small_integer_directions(std::mt19937_64& rng, int H, int d);

// ---- trained models (checks/rank_heads_trained.cpp, proofs/L4 part H) ----
using rank_heads::trained_encoding;
using rank_heads::trained_error;
using rank_heads::trained_error_of;
using rank_heads::trained_forward;
using rank_heads::trained_forward_binary64_intervals;
using rank_heads::trained_model_info;
using rank_heads::trained_test_set;
using rank_heads::trained_test_set_of;
/// The models of part H (no positions).
const std::vector<trained_model_info>& trained_models_info();
/// The models of part I (learned positions, additive or concatenated).
const std::vector<trained_model_info>& positions_models_info();
/// The trained-model rows of the check (proofs/L4 part H), and the positional-encoding rows (part I).
void trained_rows(report::check_report& rep, const run_settings& rs);

/// The context-length rows of the check (proofs/L4 part G).
void context_rows(report::check_report& rep, const run_settings& rs);

}  // namespace rht

// ---- nearest-neighbour (checks/nearest_neighbour.cpp, proofs/L1-nearest-neighbour.md) ----
namespace nn {

/// A nonzero rational u with Q u = 0, chosen as the projection of `direction` onto ker Q
/// (u = direction − Qᵀ(QQᵀ)⁻¹Q·direction), so that ⟨u, direction⟩ = ‖u‖² > 0 whenever
/// direction ∉ row space of Q.  Q must have full row rank (else input_error).  Exact tier.
matrix<mpq_rational> kernel_witness(const matrix<mpq_rational>& Q, const matrix<mpq_rational>& direction);

/// Certified enclosure of the mean squared error of the full-rank head W = cI over the
/// two-point distribution in odd dimension d ≥ 3 (t has density ∝ w(t) = (1 − t²)^{(d−3)/2}):
/// MSE(c) = (1/Z) ∫₀¹ 2σ(−√2ct)² w(t) dt, Z = ∫₀¹ w (exact rational).  On each of `panels`
/// panels of s = √2ct ∈ [0, min(√2c, 64)], ∫σ(−s)² lies between the midpoint and the
/// trapezoid values (σ(−s)² is convex on s ≥ 0) and w, decreasing, lies between its values at
/// the panel's ends; the tail beyond 64 lies in [0, e^{−128}/2].  d = 3 (w ≡ 1) gives a
/// second-order enclosure, d > 3 a first-order one.  Tier: enclosure — the exact MSE lies in
/// the returned interval.  Errors: input_error for even d or d < 3.
mpfi_float mse_quadrature(const mpfi_float& c, int panels, int d = 3);

/// Closed form of the same MSE: (√2/c)(ln 2 − 1/2 − ln(1 + e^{−√2c}) + 1/(1 + e^{√2c})).
/// Tier: that of T.
template <class T>
T mse_closed_form(const T& c) {
  using std::exp;
  using std::log;
  using std::sqrt;
  using boost::multiprecision::exp;
  using boost::multiprecision::log;
  using boost::multiprecision::sqrt;
  const T s = sqrt(T(2)) * c;
  return sqrt(T(2)) / c * (log(T(2)) - T(1) / T(2) - log(T(1) + exp(T(-s))) + T(1) / (T(1) + exp(s)));
}

/// Seeded Monte-Carlo estimate (approx tier, binary64) of the MSE over the two-point
/// distribution (x₁ = e₁, x₂ = e₂, y uniform on the sphere of ℝ^d) for the head with
/// W_QK = c·q kᵀ (rank 1, q and k with d entries; q = k = nullptr: the full-rank head W = cI).
/// Returns {mean, standard error}.
std::pair<double, double> approx_mse_monte_carlo(double c, const double* q, const double* k, int samples,
                                                 std::uint64_t seed, int d = 3);

}  // namespace nn

// ---- head-size-bottleneck (checks/head_size_bottleneck.cpp, proofs/L2-head-size-bottleneck.md) ----
namespace hsb {

/// P_ij = Π_f w_fj^{q_fi} / Σ_k Π_f w_fk^{q_fi} (exact; integer q_fi, positive rational w_fj):
/// the softmax of the score matrix Σ_f q_f (log w_f)ᵀ, of rank ≤ the number of factors.
inline matrix<mpq_rational> power_structured(const std::vector<std::vector<int>>& qs,
                                             const std::vector<std::vector<mpq_rational>>& ws) {
  const auto n = static_cast<Eigen::Index>(qs.at(0).size()), m = static_cast<Eigen::Index>(ws.at(0).size());
  matrix<mpq_rational> P(n, m);
  for (Eigen::Index i = 0; i < n; ++i) {
    mpq_rational z(0);
    for (Eigen::Index j = 0; j < m; ++j) {
      mpq_rational p(1);
      for (std::size_t f = 0; f < qs.size(); ++f) {
        const int qi = qs[f][static_cast<std::size_t>(i)];
        const mpq_rational& wj = ws[f][static_cast<std::size_t>(j)];
        for (int k = 0; k < (qi < 0 ? -qi : qi); ++k) p = qi < 0 ? mpq_rational(p / wj) : mpq_rational(p * wj);
      }
      P(i, j) = p;
      z += p;
    }
    for (Eigen::Index j = 0; j < m; ++j) P(i, j) /= z;
  }
  return P;
}

/// One factor: P_ij = w_j^{q_i} / Σ_k w_k^{q_i}, the softmax of the rank-1 scores q (log w)ᵀ.
inline matrix<mpq_rational> power_structured(const std::vector<int>& q, const std::vector<mpq_rational>& w) {
  return power_structured(std::vector<std::vector<int>>{q}, std::vector<std::vector<mpq_rational>>{w});
}

/// Centred log-probabilities L = log P · (I − 11ᵀ/n), in T (approx or enclosure; log is
/// transcendental).  Precondition: P > 0 entrywise.  Tier: that of T.
template <class T>
matrix<T> centred_log(const matrix<mpq_rational>& P) {
  using std::log;
  using boost::multiprecision::log;
  matrix<T> L(P.rows(), P.cols());
  for (Eigen::Index i = 0; i < P.rows(); ++i) {
    T mean(0);
    for (Eigen::Index j = 0; j < P.cols(); ++j) {
      L(i, j) = log(from_rational<T>(P(i, j)));
      mean += L(i, j);
    }
    mean = mean / T(static_cast<int>(P.cols()));
    for (Eigen::Index j = 0; j < P.cols(); ++j) L(i, j) = L(i, j) - mean;
  }
  return L;
}

}  // namespace hsb

}  // namespace attncert::checks
