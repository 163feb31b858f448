// The exact quantities of the rank–heads trade-off: see attncert/proofs/rank_heads.hpp and
// proofs/L4-rank-heads-tradeoff.md (parts A, C, D, E, F).  Exact tier, except the enclosure-tier (MPFI) functions:
// binomial_lower_tail, two_layer_vote_mse, full_rank_mse, arcsin_moment_series and hardmax_relaxed_mse.
#include "attncert/proofs/rank_heads.hpp"

#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include <gmp.h>
#include <mpfi.h>

#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "attncert/number/decimal.hpp"
#include "attncert/number/interval.hpp"

#include <Eigen/Cholesky>

namespace attncert::rank_heads {

namespace {
mpz_int binomial(long n, long k) {
  if (k < 0 || n < k) return 0;
  mpz_int r = 1;
  for (long i = 1; i <= k; ++i) r = r * (n - k + i) / i;  // exact: r·(n−k+i)/i = C(n−k+i, i)
  return r;
}
}  // namespace

density_constant density_constant_of(int d) {
  if (d < 2) throw input_error("density_constant_of: d must be >= 2");
  // c_2 = 1/π, c_3 = 1/2, c_d = c_{d−2} (d − 2)/(d − 3)
  density_constant c{d % 2 == 0 ? mpq_rational(1) : mpq_rational(1, 2), d % 2 == 0};
  for (int e = (d % 2 == 0 ? 4 : 5); e <= d; e += 2) c.r *= mpq_rational(e - 2, e - 3);
  return c;
}

mpz_int harmonic_dimension(int d, int l) { return binomial(l + d - 1, l) - binomial(l + d - 3, l - 2); }

mpz_int ridge_dimension(int d, int r, int l) {
  if (d < 3 || r < 1 || l < 0) throw input_error("ridge_dimension: d >= 3, r >= 1, l >= 0 expected");
  const mpz_int N = harmonic_dimension(d, l);
  if (r >= d) return N;
  const mpz_int m = binomial(l + r - 1, r - 1);
  return m < N ? m : N;
}

mpq_rational energy_coefficient(int d, int l) {
  if (d < 3 || l < 0) throw input_error("energy_coefficient: d >= 3 and l >= 0 expected");
  if (l % 2 == 0) return 0;  // sign is odd, P_ℓ even
  // P_ℓ (P_ℓ(1) = 1): (ℓ + d − 2) P_{ℓ+1} = (2ℓ + d − 2) t P_ℓ − ℓ P_{ℓ−1}; coefficients in t^j.
  std::vector<mpq_rational> prev{1}, cur{0, 1};
  for (int k = 1; k < l; ++k) {
    std::vector<mpq_rational> next(static_cast<std::size_t>(k + 2), mpq_rational(0));
    for (std::size_t j = 0; j < cur.size(); ++j) next[j + 1] += mpq_rational(2 * k + d - 2) * cur[j];
    for (std::size_t j = 0; j < prev.size(); ++j) next[j] -= mpq_rational(k) * prev[j];
    for (auto& x : next) x /= mpq_rational(k + d - 2);
    prev = std::move(cur);
    cur = std::move(next);
  }
  const std::vector<mpq_rational>& P = cur;
  // a_ℓ = 2 c_d ∫₀¹ P_ℓ(t)(1 − t²)^μ dt, μ = (d − 3)/2; for odd j = 2i + 1,
  // ∫₀¹ t^j (1 − t²)^μ dt = (1/2) B(i + 1, μ + 1) = (1/2) i! / Π_{m=1}^{i+1} (μ + m).
  const mpq_rational mu(d - 3, 2);
  mpq_rational integral = 0;
  for (std::size_t j = 1; j < P.size(); j += 2) {
    if (P[j] == 0) continue;
    const long i = static_cast<long>(j - 1) / 2;
    mpq_rational m(1, 2);
    for (long t = 1; t <= i; ++t) m *= t;
    for (long t = 1; t <= i + 1; ++t) m /= (mu + t);
    integral += P[j] * m;
  }
  const density_constant c = density_constant_of(d);
  const mpq_rational a = 2 * c.r * integral;              // a_ℓ = a (or a/π)
  return mpq_rational(harmonic_dimension(d, l)) * a * a;  // E_ℓ = N a² (or N a²/π²)
}

const std::vector<mpq_rational>& energy_coefficients(int d, int L) {
  if (d < 3 || L < 0) throw input_error("energy_coefficients: d >= 3 and L >= 0 expected");
  static std::mutex m;
  static std::map<std::pair<int, int>, std::vector<mpq_rational>> cache;
  const std::lock_guard<std::mutex> lock(m);
  auto it = cache.find({d, L});
  if (it != cache.end()) return it->second;
  std::vector<mpq_rational> e(static_cast<std::size_t>(L + 1), mpq_rational(0));
  for (int l = 1; l <= L; l += 2) {
    check_deadline();  // the caller's budget (certify's --max-seconds): degree 401 in d = 64 takes seconds
    e[static_cast<std::size_t>(l)] = energy_coefficient(d, l);
  }
  return cache.emplace(std::make_pair(d, L), std::move(e)).first->second;
}

pi2_rational rank_lower_bound(int d, const mpz_int& heads, int rank, int max_degree) {
  if (d < 3 || heads < 1 || rank < 1 || max_degree < 1)
    throw input_error("rank_lower_bound: d >= 3, heads >= 1, rank >= 1 and max_degree >= 1 expected");
  const auto& e = energy_coefficients(d, max_degree);
  mpq_rational s = 0, kept = 0;
  for (int l = 1; l <= max_degree; l += 2) {
    check_deadline();
    kept += e[static_cast<std::size_t>(l)];
    const mpq_rational cap(mpz_int(heads * ridge_dimension(d, rank, l)), harmonic_dimension(d, l));
    if (cap < 1) s += e[static_cast<std::size_t>(l)] * (1 - cap);
  }
  // Rank one: the degrees beyond L together carry T_L = 1 − Σ_{ℓ ≤ L} E_ℓ, and each keeps a fraction
  // ≥ 1 − H/N(d, L') (N increases with ℓ; even degrees carry nothing), so that tail term is added.
  const bool over = density_constant_of(d).over_pi;
  pi2_rational out;
  if (rank == 1) {
    const mpq_rational cap(heads, harmonic_dimension(d, max_degree % 2 == 1 ? max_degree + 2 : max_degree + 1));
    if (cap < 1) {
      // tail: 1 − kept (odd d) or 1 − kept/π² (even d), times (1 − cap)
      out.a += (1 - cap) / 2;
      (over ? out.b : out.a) -= kept * (1 - cap) / 2;
    }
  }
  (over ? out.b : out.a) += s / 2;
  return out;
}

pi2_rational rank_lower_bound_residual(int d, const mpz_int& heads, int max_degree) {
  pi2_rational lb = rank_lower_bound(d, heads, 1, max_degree);
  // drop the degree-1 term ½ E_1 max(0, 1 − H/d)
  const mpq_rational cap(heads, harmonic_dimension(d, 1));
  if (cap < 1) {
    const mpq_rational e1 = energy_coefficients(d, 1)[1] * (1 - cap) / 2;
    (density_constant_of(d).over_pi ? lb.b : lb.a) -= e1;
  }
  return lb;
}

// ---- part E: the arcsine moment (exact) ----------------------------------------------------------------------------

pi2_rational arcsin_moment(int d) {
  if (d < 3) throw input_error("arcsin_moment: d >= 3 expected");
  // I_n = ∫_{−π/2}^{π/2} θ² cos^n θ dθ = p π³ + q π (n even) or p π² + q (n odd);
  // I_n = ((n − 1)/n) I_{n−2} − 2 C_n / n², C_n = ∫ cos^n = γ π (n even) or γ (n odd), C_n = ((n − 1)/n) C_{n−2}.
  const int n = d - 2;
  mpq_rational p = n % 2 == 0 ? mpq_rational(1, 12) : mpq_rational(1, 2);
  mpq_rational q = n % 2 == 0 ? mpq_rational(0) : mpq_rational(-4);
  mpq_rational g = n % 2 == 0 ? mpq_rational(1) : mpq_rational(2);
  for (int k = n % 2 == 0 ? 2 : 3; k <= n; k += 2) {
    const mpq_rational f(k - 1, k);
    g *= f;
    p *= f;
    q = f * q - 2 * g / mpq_rational(k * k);
  }
  // E[arcsin(t)²] = c_d I_n = r (p π² + q) in both parities (c_d = r or r/π); M_d = (4/π²) of that.
  const mpq_rational r = density_constant_of(d).r;
  return {4 * r * p, 4 * r * q};
}

// ---- part F: the vote construction's mean MSE (enclosure tier) ----------------------------------------------------

mpfi_float binomial_lower_tail(long H, const mpfi_float& q) {
  using boost::multiprecision::exp;
  using boost::multiprecision::log;
  if (H < 1 || H % 2 == 0) throw input_error("binomial_lower_tail: H must be odd and >= 1");
  if (lower_of(q) < 0.5 || upper_of(q) > 1) throw input_error("binomial_lower_tail: q must lie in [1/2, 1]");
  const mpfi_float p = mpfi_float(1) - q;  // probability of a wrong vote, in [0, 1/2]
  if (upper_of(p) <= 0) return mpfi_float(0);
  if (lower_of(p) <= 0) {  // p straddles 0: the tail is increasing in p, 0 at p = 0
    return hull_of(mpfi_float(0), binomial_lower_tail(H, mpfi_float(1) - mpfi_float(upper_of(p))));
  }
  // terms t_k = C(H, k) q^k p^{H−k}, k ≤ k0 = (H − 1)/2, from k0 down; t_{k−1} = t_k · k/(H − k + 1) · p/q,
  // and the ratio decreases with k, so Σ_{k<m} t_k ≤ t_m r_m/(1 − r_m) once r_m < 1.
  const long k0 = (H - 1) / 2;
  mpz_int binom;
  mpz_bin_uiui(binom.backend().data(), static_cast<unsigned long>(H), static_cast<unsigned long>(k0));
  mpfi_float term = mpfi_float(binom) * exp(mpfi_float(k0) * log(q) + mpfi_float(H - k0) * log(p));
  const mpfi_float pq = p / q;
  mpfi_float sum = term;
  for (long k = k0; k > 0; --k) {
    const mpfi_float r = mpfi_float(k) / mpfi_float(H - k + 1) * pq;
    term *= r;
    sum += term;
    if (k == 1) break;  // t_0 added: every term summed
    // the rest Σ_{j<k−1} t_j ≤ t_{k−1} r'/(1 − r'), r' the ratio at k − 1 (smaller than r)
    if (upper_of(r) < 1) {
      const mpfi_float rest = term * r / (mpfi_float(1) - r);
      if (upper_of(rest) <= upper_of(sum) * mpfr_float(1e-30)) return hull_of(sum, mpfi_float(sum + mpfi_float(upper_of(rest))));
    }
  }
  return sum;  // every term summed (k down to 0)
}

namespace {
mpfi_float pi_interval() {
  mpfi_float p;
  mpfi_const_pi(p.backend().data());
  return p;
}
}  // namespace

mpfi_float sphere_weight(const mpfi_float& t, int d) {
  using boost::multiprecision::sqrt;
  mpfi_float b = mpfi_float(1) - t * t;
  if (lower_of(b) < 0) b = hull_of(mpfi_float(0), mpfi_float(upper_of(b)));  // t ≤ 1: 1 − t² ≥ 0
  mpfi_float r(1);
  for (int k = 0; k < (d - 3) / 2; ++k) r *= b;
  if (d % 2 == 0) r *= sqrt(b);
  return r;
}

mpfi_float logistic_tail_squared(const mpfi_float& s) {
  using boost::multiprecision::exp;
  const mpfi_float q = mpfi_float(1) / (mpfi_float(1) + exp(s));
  return q * q;
}

// ---- part A: the full-rank head's MSE (enclosure tier) ------------------------------------------------------------

mpfi_float full_rank_mse(int d, const mpq_rational& lambda, int panels) {
  using boost::multiprecision::exp;
  using boost::multiprecision::sqrt;
  if (d < 3) throw input_error("full_rank_mse: d must be >= 3");
  if (lambda <= 0 || panels < 1) throw input_error("full_rank_mse: lambda > 0 and panels >= 1 expected");
  mpfi_float lam;
  mpfi_set_q(lam.backend().data(), lambda.backend().data());
  const mpfi_float a = sqrt(mpfi_float(2)) * lam;  // s = a t
  // ∫₀¹ σ(−at)² w(t) dt = (1/a) ∫₀^a σ(−s)² w(s/a) ds; s beyond 40 only in the tail bound.
  const bool cut = certainly_le(mpfi_float(40), a) == truth::certainly_true;
  const mpfi_float end = cut ? mpfi_float(40) : a;
  const mpfi_float h = end / mpfi_float(panels);
  // The panel bounds are summed as intervals, so the rounding of the sums is enclosed too (a sum of lower ends in
  // round-to-nearest could exceed the exact sum by half an ulp).
  mpfi_float lo(0), hi(0);
  mpfi_float fa = logistic_tail_squared(mpfi_float(0)), wa = sphere_weight(mpfi_float(0), d);
  for (int k = 0; k < panels; ++k) {
    if ((k & 255) == 0) check_deadline();
    const mpfi_float b = h * mpfi_float(k + 1);
    const mpfi_float fb = logistic_tail_squared(b), wb = sphere_weight(mpfi_float(b / a), d);
    const mpfi_float fm = logistic_tail_squared(mpfi_float(h * (mpfi_float(k) + mpfi_float(0.5))));
    // σ(−s)² is convex on s ≥ 0 (midpoint below, trapezoid above); w is nonincreasing and >= 0.
    lo += mpfi_float(lower_of(mpfi_float(wb * h * fm)));
    hi += mpfi_float(upper_of(mpfi_float(wa * h * (fa + fb) / mpfi_float(2))));
    fa = fb;
    wa = wb;
  }
  mpfi_float integral = hull_of(mpfi_float(lower_of(lo)), mpfi_float(upper_of(hi)));
  if (cut)  // ∫_{40}^{a} σ(−s)² w ds ∈ [0, ∫_{40}^∞ e^{−2s} ds] = [0, e^{−80}/2]
    integral = hull_of(mpfi_float(lower_of(integral)), mpfi_float(upper_of(mpfi_float(integral + exp(mpfi_float(-80)) / mpfi_float(2)))));
  const density_constant c = density_constant_of(d);
  mpfi_float cd;
  mpfi_set_q(cd.backend().data(), c.r.backend().data());
  if (c.over_pi) cd /= pi_interval();
  return mpfi_float(4) * cd * integral / a;
}


vote_mse_enclosure two_layer_vote_mse(int d, long H, int panels) {
  using boost::multiprecision::acos;
  using boost::multiprecision::sqrt;
  if (d < 3 || panels < 1 || H < 1 || H % 2 == 0) throw input_error("two_layer_vote_mse: d >= 3, odd H and panels >= 1 expected");
  // ∫₀¹ B_H(q(t)) w(t) dt, q(t) = 1 − arccos(t)/π: both factors nonincreasing in t, so each panel lies between
  // h·f(right end) and h·f(left end).  The panels cover [0, t₀], t₀ = min(1, 12/√H); beyond, f ≤ f(t₀).
  const mpfi_float pi = pi_interval();
  vote_mse_enclosure out;
  out.whole = H < 144;  // 12/√H ≥ 1 exactly when H ≤ 144 (and H = 144 is even)
  out.t0 = out.whole ? mpfi_float(1) : mpfi_float(mpfi_float(12) / sqrt(mpfi_float(H)));
  const mpfi_float h = out.t0 / mpfi_float(panels);
  auto point = [&](int k) { return k == panels ? out.t0 : mpfi_float(h * mpfi_float(k)); };
  auto B_at = [&](const mpfi_float& t) {
    if (lower_of(t) >= 1) return mpfi_float(0);  // q = 1: every vote right
    mpfi_float tt = t;
    if (upper_of(tt) > 1) tt = hull_of(mpfi_float(lower_of(tt)), mpfi_float(1));
    mpfi_float q = mpfi_float(1) - acos(tt) / pi;
    if (lower_of(q) < 0.5) q = hull_of(mpfi_float(0.5), mpfi_float(upper_of(q)));
    if (upper_of(q) > 1) q = hull_of(mpfi_float(lower_of(q)), mpfi_float(1));
    return binomial_lower_tail(H, q);
  };
  // B_H at the panel ends does not depend on d: kept per (H, panels, precision) for the other dimensions.
  static std::mutex m;
  static std::map<std::tuple<long, int, unsigned>, std::vector<mpfi_float>> cache;
  const auto key = std::make_tuple(H, panels, static_cast<unsigned>(mpfi_float::default_precision()));
  {
    const std::lock_guard<std::mutex> lock(m);
    if (auto it = cache.find(key); it != cache.end()) out.B = it->second;
  }
  if (out.B.empty()) {
    for (int k = 0; k <= panels; ++k) {
      check_deadline();
      out.B.push_back(B_at(point(k)));
    }
    const std::lock_guard<std::mutex> lock(m);
    cache.emplace(key, out.B);
  }
  auto f = [&](int k) {
    mpfi_float tt = point(k);
    if (upper_of(tt) > 1) tt = hull_of(mpfi_float(lower_of(tt)), mpfi_float(1));
    return mpfi_float(out.B[static_cast<std::size_t>(k)] * sphere_weight(tt, d));
  };
  // The lower sum of right ends and the upper sum of left ends, each accumulated as an interval (so the rounding of
  // the sums is enclosed too): the integral lies in [lower end of the first, upper end of the second].
  mpfi_float lo(0), hi(0);
  mpfi_float fa = f(0);
  for (int k = 0; k < panels; ++k) {
    const mpfi_float fb = f(k + 1);
    lo += mpfi_float(lower_of(mpfi_float(h * fb)));
    hi += mpfi_float(upper_of(mpfi_float(h * fa)));
    fa = fb;
  }
  if (!out.whole) hi += fa * (mpfi_float(1) - out.t0);
  const density_constant c = density_constant_of(d);
  mpfi_float cd;
  mpfi_set_q(cd.backend().data(), c.r.backend().data());  // exact up to the outward rounding of MPFI
  if (c.over_pi) cd /= pi;
  out.mse = mpfi_float(4) * cd * hull_of(mpfi_float(lower_of(lo)), mpfi_float(upper_of(hi)));
  return out;
}

}  // namespace attncert::rank_heads

// ---- part E: hardmax rank-one heads with given query directions (enclosure tier) -----------------------------------

namespace attncert::rank_heads {

namespace {
// The energies as enclosures (π⁻² applied for even d) and the exact tail T_L = 1 − Σ_{ℓ ≤ L} E_ℓ, enclosed.
struct energy_table {
  std::vector<mpfi_float> E;
  mpfi_float tail;
};
energy_table energy_enclosures(int d, int L) {
  const auto& e = energy_coefficients(d, L);
  const bool over = density_constant_of(d).over_pi;
  const mpfi_float pi = pi_interval(), pi2 = pi * pi;
  energy_table t;
  mpq_rational sum = 0;
  for (const auto& x : e) {
    sum += x;
    t.E.push_back(over ? mpfi_float(from_rational<mpfi_float>(x) / pi2) : from_rational<mpfi_float>(x));
  }
  t.tail = over ? mpfi_float(mpfi_float(1) - from_rational<mpfi_float>(sum) / pi2) : from_rational<mpfi_float>(1 - sum);
  return t;
}

// P_ℓ(t) for ℓ = 0 … L (P_ℓ(1) = 1; the three-term recurrence of part C), enclosed.
void legendre_values(int d, int L, const mpfi_float& t, std::vector<mpfi_float>& P) {
  P.assign(static_cast<std::size_t>(L + 1), mpfi_float(0));
  P[0] = mpfi_float(1);
  if (L >= 1) P[1] = t;
  for (int k = 1; k < L; ++k)
    P[static_cast<std::size_t>(k + 1)] = mpfi_float(mpfi_float(mpfi_float(2 * k + d - 2) * t * P[static_cast<std::size_t>(k)]) -
                                                    mpfi_float(k) * P[static_cast<std::size_t>(k - 1)]) /
                                         mpfi_float(k + d - 2);
}

// t_hg = ⟨a_h, a_g⟩/(|a_h| |a_g|) from the exact inner products, enclosed and clipped to [−1, 1].
mpfi_float cosine_enclosure(const mpq_rational& ab, const mpq_rational& aa, const mpq_rational& bb) {
  using boost::multiprecision::sqrt;
  const mpfi_float t = from_rational<mpfi_float>(ab) / sqrt(from_rational<mpfi_float>(aa * bb));
  const mpfr_float lo = lower_of(t) < -1 ? mpfr_float(-1) : lower_of(t), hi = upper_of(t) > 1 ? mpfr_float(1) : upper_of(t);
  return hull_of(mpfi_float(lo), mpfi_float(hi));
}

// A binary64 midpoint–radius enclosure of an exact matrix: every exact entry within rad of mid.
struct mid_rad {
  matrix<double> mid, rad;
};

// Encloses M·X for every M inside `m` and the point matrix X (n × n): M·X ∈ Ŷ ± E entrywise, Ŷ = fl(mid·X).
// |Ŷ − mid·X| ≤ γ_n |mid||X| + (n + 2)η for any order of summation, FMA or not (γ_n = nu/(1 − nu), u = 2⁻⁵³,
// η = 2⁻¹⁰⁷⁴ for underflow), and |(M − mid)X| ≤ rad|X|.  The nonnegative products are themselves computed in
// binary64, so |mid||X| ≤ (fl(|mid||X|) + nη)/(1 − γ_n) (likewise rad|X|); E sums the three terms and is
// inflated by (1 + 64u) for its own roundings (about a dozen operations on nonnegative numbers, each within a
// relative u; proofs/L4 part E, "verified solve").
mid_rad enclose_times_point(const mid_rad& m, const matrix<double>& X) {
  const double n = static_cast<double>(X.rows()), u = std::ldexp(1.0, -53), eta = std::ldexp(1.0, -1074);
  const double gamma = n * u / (1 - n * u);
  mid_rad out;
  out.mid = m.mid * X;
  const matrix<double> absX = X.cwiseAbs();
  const matrix<double> S = m.mid.cwiseAbs() * absX, R = m.rad * absX;
  const double allow = (n + 2) * eta;
  out.rad = ((gamma * (S.array() + n * eta) / (1 - gamma) + (R.array() + n * eta) / (1 - gamma) + allow) * (1 + 64 * u)).matrix();
  return out;
}

// An MPFI interval for mid ± rad.
mpfi_float interval_of(double mid, double rad) {
  return hull_of(mpfi_float(mpfi_float(mid) - mpfi_float(rad)), mpfi_float(mpfi_float(mid) + mpfi_float(rad)));
}
}  // namespace

mpfi_float arcsin_moment_series(int d, int max_degree) {
  if (d < 3 || max_degree < 1) throw input_error("arcsin_moment_series: d must be >= 3 and max_degree >= 1");
  const energy_table t = energy_enclosures(d, max_degree);
  mpfi_float s(0);
  for (int l = 1; l <= max_degree; l += 2) {
    const mpfi_float& E = t.E[static_cast<std::size_t>(l)];
    s += E * E / from_rational<mpfi_float>(mpq_rational(harmonic_dimension(d, l)));
  }
  // Σ_{ℓ > L} E_ℓ²/N(d, ℓ) ≤ (max_{ℓ>L} E_ℓ) Σ_{ℓ>L} E_ℓ / N(d, L + 1) ≤ T_L² / N(d, L + 1).
  const mpfi_float tail = t.tail * t.tail / from_rational<mpfi_float>(mpq_rational(harmonic_dimension(d, max_degree + 1)));
  return hull_of(s, mpfi_float(s + mpfi_float(upper_of(tail))));
}

namespace {
// The exact Gram matrix of the rows of `directions`, a row parallel or antiparallel to an earlier kept one dropped (its
// sign profile is ± a kept one's, so it adds nothing to the relaxed error).  Errors: input_error for a zero row.
matrix<mpq_rational> distinct_gram(int d, const matrix<mpq_rational>& directions) {
  std::vector<Eigen::Index> kept;
  std::vector<mpq_rational> norm2;
  auto dot = [&](Eigen::Index i, Eigen::Index j) {
    mpq_rational s = 0;
    for (Eigen::Index k = 0; k < d; ++k) s += directions(i, k) * directions(j, k);
    return s;
  };
  for (Eigen::Index h = 0; h < directions.rows(); ++h) {
    const mpq_rational n2 = dot(h, h);
    if (n2 == 0) throw input_error("hardmax_relaxed_mse: every direction must be nonzero (row " + std::to_string(h) + " is 0)");
    bool parallel = false;
    for (std::size_t k = 0; k < kept.size() && !parallel; ++k) {
      const mpq_rational ab = dot(h, kept[k]);
      parallel = ab * ab == n2 * norm2[k];
    }
    if (parallel) continue;
    kept.push_back(h);
    norm2.push_back(n2);
  }
  const Eigen::Index H = static_cast<Eigen::Index>(kept.size());
  matrix<mpq_rational> G(H, H);
  for (Eigen::Index h = 0; h < H; ++h)
    for (Eigen::Index g = h; g < H; ++g)
      G(h, g) = G(g, h) = g == h ? norm2[static_cast<std::size_t>(h)] : dot(kept[static_cast<std::size_t>(h)], kept[static_cast<std::size_t>(g)]);
  return G;
}

// K_hg = (2/π) arcsin t_hg and B_hg = Σ_{ℓ odd ≤ L} E_ℓ² P_ℓ(t_hg)/N(d, ℓ) ± T_L²/N(d, L + 1), K_hh = 1, B_hh = M_d, enclosed
// entrywise in MPFI from the exact Gram matrix G, then held as binary64 midpoint and radius.
void enclose_gram_kernels(int d, const matrix<mpq_rational>& G, int max_degree, mid_rad& K, mid_rad& B) {
  using boost::multiprecision::asin;
  const Eigen::Index H = G.rows();
  const energy_table et = energy_enclosures(d, max_degree);
  std::vector<mpfi_float> w(static_cast<std::size_t>(max_degree + 1), mpfi_float(0));  // E_ℓ²/N(d, ℓ)
  for (int l = 1; l <= max_degree; l += 2)
    w[static_cast<std::size_t>(l)] = et.E[static_cast<std::size_t>(l)] * et.E[static_cast<std::size_t>(l)] /
                                     from_rational<mpfi_float>(mpq_rational(harmonic_dimension(d, l)));
  const mpfr_float tau =
      upper_of(mpfi_float(et.tail * et.tail / from_rational<mpfi_float>(mpq_rational(harmonic_dimension(d, max_degree + 1)))));
  const mpfi_float tau_i(tau), pm_tau = hull_of(-tau_i, tau_i);  // [−τ, τ]
  const pi2_rational M = arcsin_moment(d);
  const mpfi_float pi = pi_interval();
  const mpfi_float diag_B = from_rational<mpfi_float>(M.a) + from_rational<mpfi_float>(M.b) / (pi * pi);
  const mpfi_float two_over_pi = mpfi_float(2) / pi;

  // K and B enclosed entrywise in MPFI, then as binary64 midpoint and radius.
  K = {matrix<double>(H, H), matrix<double>(H, H)};
  B = {matrix<double>(H, H), matrix<double>(H, H)};
  auto store = [](mid_rad& m, Eigen::Index i, Eigen::Index j, const mpfi_float& v) {
    const double c = static_cast<double>(approx_mid(v));
    const mpfi_float dev = v - mpfi_float(c);
    const mpfr_float r = upper_of(dev) > -lower_of(dev) ? upper_of(dev) : mpfr_float(-lower_of(dev));
    m.mid(i, j) = m.mid(j, i) = c;
    m.rad(i, j) = m.rad(j, i) = double_up(r);
  };
  std::vector<mpfi_float> P;
  for (Eigen::Index h = 0; h < H; ++h) {
    check_deadline();
    store(K, h, h, mpfi_float(1));
    store(B, h, h, diag_B);
    for (Eigen::Index g = h + 1; g < H; ++g) {
      const mpfi_float t = cosine_enclosure(G(h, g), G(h, h), G(g, g));
      legendre_values(d, max_degree, t, P);
      mpfi_float b(0);
      for (int l = 1; l <= max_degree; l += 2) b += w[static_cast<std::size_t>(l)] * P[static_cast<std::size_t>(l)];
      store(K, h, g, mpfi_float(two_over_pi * asin(t)));
      store(B, h, g, b + pm_tau);  // |P_ℓ| ≤ 1 beyond L (interval sum: rounded outward)
    }
  }
}

// The verified solve (proofs/L4 part E) on K and B: fills approx, rho, bound and certified of `out`.
void verified_solve(const mid_rad& K, const mid_rad& B, hardmax_relaxed_enclosure& out) {
  using boost::multiprecision::sqrt;
  const Eigen::Index H = K.mid.rows();
  // X ≈ K⁻¹ (approx part; any symmetric X keeps the bound rigorous).
  Eigen::LLT<matrix<double>> llt(K.mid);
  if (llt.info() != Eigen::Success) return;
  matrix<double> X = llt.solve(matrix<double>::Identity(H, H));
  X = ((X + X.transpose()) / 2).eval();
  if (!X.allFinite()) return;
  out.approx = 0.5 * (1 - (X.cwiseProduct(B.mid)).sum());

  const mid_rad Y = enclose_times_point(K, X), Z = enclose_times_point(B, X);  // K X and B X
  if (!Y.rad.allFinite() || !Z.rad.allFinite()) return;
  // ρ ≥ ‖K X − I‖_F, ‖X‖_F, ‖B‖_F, T1 = tr(XB) = Σ X_ij B_ij, T2 = tr(XKXB) = Σ (KX)_ji (BX)_ij (X, K, B symmetric).
  mpfi_float rho2(0), b2(0), x2(0), T1(0), T2(0);
  for (Eigen::Index i = 0; i < H; ++i) {
    check_deadline();
    for (Eigen::Index j = 0; j < H; ++j) {
      const mpfi_float res = mpfi_float(interval_of(Y.mid(i, j), Y.rad(i, j)) - mpfi_float(i == j ? 1 : 0));
      rho2 += res * res;
      const mpfi_float bij = interval_of(B.mid(i, j), B.rad(i, j));
      b2 += bij * bij;
      x2 += mpfi_float(X(i, j)) * mpfi_float(X(i, j));
      T1 += mpfi_float(X(i, j)) * bij;
      T2 += interval_of(Y.mid(j, i), Y.rad(j, i)) * interval_of(Z.mid(i, j), Z.rad(i, j));
    }
  }
  const mpfi_float rho = sqrt(mpfi_float(upper_of(rho2)));
  out.rho = double_up(upper_of(rho));
  if (!(upper_of(rho) < 1)) return;
  // λ_min(K) ≥ μ = (1 − ρ)/‖X‖_F: K is a Gram matrix (symmetric positive semidefinite) and ‖I − KX‖₂ ≤ ρ < 1
  // makes it invertible with ‖K⁻¹‖₂ ≤ ‖X‖₂/(1 − ρ).  E‖(KX − I)c‖² ≤ ρ² λ_max(B) ≤ ρ² ‖B‖_F.
  const mpfr_float mu = lower_of(mpfi_float(mpfi_float(1) - mpfi_float(upper_of(rho))) / sqrt(mpfi_float(upper_of(x2))));
  const mpfr_float resid = upper_of(mpfi_float(mpfi_float(upper_of(rho2)) * sqrt(mpfi_float(upper_of(b2))) / mpfi_float(mu)));
  // min_w q ≥ q(w₀) − ‖Kw₀ − c‖²/μ with w₀ = Xc; E q(w₀) = tr(XKXB) − 2 tr(XB).  The relaxed error is
  // ½(1 + min q) averaged over e: at least ½(1 + T2 − 2T1 − resid) and at most ½(1 + T2 − 2T1).
  const mpfi_float upper_side = (mpfi_float(1) + T2 - mpfi_float(2) * T1) / mpfi_float(2);
  const mpfi_float lower_side = (mpfi_float(1) + T2 - mpfi_float(2) * T1 - mpfi_float(resid)) / mpfi_float(2);
  out.bound = hull_of(mpfi_float(lower_of(lower_side)), mpfi_float(upper_of(upper_side)));
  out.certified = true;
}
}  // namespace

hardmax_relaxed_enclosure hardmax_relaxed_mse(int d, const matrix<mpq_rational>& directions, int max_degree) {
  if (d < 3 || max_degree < 1) throw input_error("hardmax_relaxed_mse: d must be >= 3 and max_degree >= 1");
  if (directions.cols() != d || directions.rows() < 1) throw input_error("hardmax_relaxed_mse: the directions must be H x d with H >= 1");
  const matrix<mpq_rational> G = distinct_gram(d, directions);
  mid_rad K, B;
  enclose_gram_kernels(d, G, max_degree, K, B);
  hardmax_relaxed_enclosure out;
  out.degree = max_degree;
  out.distinct = static_cast<long>(G.rows());
  verified_solve(K, B, out);
  return out;
}

}  // namespace attncert::rank_heads
