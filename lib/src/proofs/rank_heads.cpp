// The exact quantities of the rank–heads trade-off: see attncert/proofs/rank_heads.hpp and
// proofs/L4-rank-heads-tradeoff.md (parts C, D, F).  Exact tier throughout.
#include "attncert/proofs/rank_heads.hpp"

#include <map>
#include <mutex>
#include <utility>

#include "attncert/deadline.hpp"
#include "attncert/error.hpp"

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

}  // namespace attncert::rank_heads
