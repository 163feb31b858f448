// checks/rank_heads_tradeoff.cpp — the rank–heads trade-off of Amsel, Yehudai and Bruna ("On the
// Benefits of Rank in Attention Layers", arXiv 2407.16153), on instances: first part.
//
// The N = 2 nearest-neighbour distribution: x₁, x₂ orthonormal, y uniform on S^{d−1}, target the
// key with the larger ⟨xᵢ, y⟩; predicting the mean (x₁ + x₂)/2 has squared error exactly 1/2.
// (1) Full rank is enough, at a known rate: the head W_KᵀW_Q = λI, W_OᵀW_V = I has
//     MSE(d, λ) = 4 c_d ∫₀¹ σ(−√2λt)² (1 − t²)^{(d−3)/2} dt, c_d = Γ(d/2)/(√π Γ((d−1)/2)) (rational
//     for odd d, rational/π for even d), enclosed by certified quadrature for d = 3 … 16 and
//     λ = 1 … 10⁴; λ·MSE ≤ K_d = 2√2 c_d (ln 2 − 1/2) for every λ and → K_d as λ → ∞.
// (3) What the low-rank lower bound rests on: the energy of y ↦ sign⟨y, u⟩ in each degree ℓ of
//     spherical harmonics, E_ℓ = N(d, ℓ) a_ℓ², exact (rational for odd d, rational/π² for even d),
//     E_ℓ = 0 for even ℓ, and the tail 1 − Σ_{ℓ ≤ L} E_ℓ (Parseval) exactly.
// Proof: proofs/L4-rank-heads-tradeoff.md (derivations and limits: items 2 and 4–7 of the issue,
// the low-rank lower bounds themselves, the depth construction and N > 2, are not here).
#include <cmath>

#include "checks/literature.hpp"

namespace attncert::checks {

// ---- library part ---------------------------------------------------------------------------
namespace rht {

density_constant density_constant_of(int d) {
  if (d < 2) throw input_error("density_constant_of: d must be >= 2");
  // c_2 = 1/π, c_3 = 1/2, c_d = c_{d−2} (d − 2)/(d − 3)
  density_constant c{d % 2 == 0 ? mpq_rational(1) : mpq_rational(1, 2), d % 2 == 0};
  for (int e = (d % 2 == 0 ? 4 : 5); e <= d; e += 2) c.r *= mpq_rational(e - 2, e - 3);
  return c;
}

mpfi_float pi_enclosure() {
  mpfi_float p;
  mpfi_const_pi(p.backend().data());
  return p;
}

mpfi_float value_of(const density_constant& c) {
  const mpfi_float r = from_rational<mpfi_float>(c.r);
  return c.over_pi ? mpfi_float(r / pi_enclosure()) : r;
}

namespace {
// (1 − t²)^{(d−3)/2} for t in [0, 1] (an enclosure for the enclosure t).
mpfi_float weight(const mpfi_float& t, int d) {
  using boost::multiprecision::sqrt;
  mpfi_float b = mpfi_float(1) - t * t;
  if (lower_of(b) < 0) b = hull_of(mpfi_float(0), mpfi_float(upper_of(b)));  // t ≤ 1: 1 − t² ≥ 0
  mpfi_float r(1);
  for (int k = 0; k < (d - 3) / 2; ++k) r *= b;
  if (d % 2 == 0) r *= sqrt(b);
  return r;
}
mpfi_float sigma_neg_sq(const mpfi_float& s) {  // σ(−s)² = 1/(1 + e^s)²
  using boost::multiprecision::exp;
  const mpfi_float q = mpfi_float(1) / (mpfi_float(1) + exp(s));
  return q * q;
}
}  // namespace

mpfi_float mse_full_rank(int d, const mpq_rational& lambda, int panels) {
  using boost::multiprecision::exp;
  using boost::multiprecision::sqrt;
  if (d < 3) throw input_error("mse_full_rank: d must be >= 3");
  if (lambda <= 0 || panels < 1) throw input_error("mse_full_rank: lambda > 0 and panels >= 1 expected");
  const mpfi_float a = sqrt(mpfi_float(2)) * from_rational<mpfi_float>(lambda);  // s = a t
  // ∫₀¹ σ(−at)² w(t) dt = (1/a) ∫₀^a σ(−s)² w(s/a) ds; s beyond 40 only in the tail bound.
  const bool cut = certainly_le(mpfi_float(40), a) == truth::certainly_true;
  const mpfi_float end = cut ? mpfi_float(40) : a;
  const mpfi_float h = end / mpfi_float(panels);
  mpfr_float lo = 0, hi = 0;
  mpfi_float fa = sigma_neg_sq(mpfi_float(0)), wa = weight(mpfi_float(0), d);
  for (int k = 0; k < panels; ++k) {
    check_deadline();
    const mpfi_float b = h * mpfi_float(k + 1);
    const mpfi_float fb = sigma_neg_sq(b), wb = weight(mpfi_float(b / a), d);
    const mpfi_float fm = sigma_neg_sq(mpfi_float(h * (mpfi_float(k) + mpfi_float(0.5))));
    // σ(−s)² is convex on s ≥ 0 (midpoint below, trapezoid above); w is nonincreasing and >= 0.
    lo += lower_of(mpfi_float(wb * h * fm));
    hi += upper_of(mpfi_float(wa * h * (fa + fb) / mpfi_float(2)));
    fa = fb;
    wa = wb;
  }
  mpfi_float integral = hull_of(mpfi_float(lo), mpfi_float(hi));
  if (cut)  // ∫_{40}^{a} σ(−s)² w ds ∈ [0, ∫_{40}^∞ e^{−2s} ds] = [0, e^{−80}/2]
    integral = hull_of(mpfi_float(lower_of(integral)), mpfi_float(upper_of(mpfi_float(integral + exp(mpfi_float(-80)) / mpfi_float(2)))));
  return mpfi_float(4) * value_of(density_constant_of(d)) * integral / a;
}

mpfi_float asymptotic_constant(int d) {
  using boost::multiprecision::log;
  using boost::multiprecision::sqrt;
  return mpfi_float(2) * sqrt(mpfi_float(2)) * value_of(density_constant_of(d)) *
         mpfi_float(log(mpfi_float(2)) - mpfi_float(0.5));
}

long harmonic_dimension(int d, int l) {
  auto binom = [](long n, long k) -> long {
    if (k < 0 || n < k) return 0;
    long r = 1;
    for (long i = 1; i <= k; ++i) r = r * (n - k + i) / i;
    return r;
  };
  return binom(l + d - 1, l) - binom(l + d - 3, l - 2);
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
  const std::vector<mpq_rational>& P = l == 0 ? prev : cur;
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
  const mpq_rational a = 2 * c.r * integral;  // a_ℓ = a (or a/π)
  return mpq_rational(harmonic_dimension(d, l)) * a * a;  // E_ℓ = N a² (or N a²/π²)
}

}  // namespace rht

namespace {

const char* error_model =
    "Enclosure tier: MPFI at 128 bits; the quadrature's enclosure is rigorous by convexity of sigma(-s)^2 on s >= 0 "
    "and monotonicity of (1 - t^2)^((d-3)/2) (midpoint/trapezoid and end-point bounds per panel, tail beyond s = 40 "
    "bounded by e^-80/2).  Exact tier: rationals (energies times 1 or pi^-2, pi enclosed by MPFR).  Approx tier: "
    "E_1 = 4 d c_d^2/(d - 1)^2 evaluated in the format (c_d by its recurrence, pi rounded once): relative error "
    "<= (2d + 16) eps, asserted where that is <= 1/16.  Monte Carlo: seeded, 5 standard errors, asserted where "
    ">= 1000 samples are expected where the error is non-negligible.";

const std::vector<std::string> lambdas = {"1", "10", "100", "1000", "10000"};
constexpr int dims_lo = 3, dims_hi = 16, panels = 2048, max_degree = 15;

std::string interval_text(const mpfi_float& x, int digits = 12) { return number_traits<mpfi_float>::to_string(x, digits); }

std::string c_d_text(int d) {
  const auto c = rht::density_constant_of(d);
  return c.r.str() + (c.over_pi ? "/pi" : "");
}

// (1): the full-rank head's MSE, its bounds, its rate.
void full_rank(report::check_report& rep, const run_settings& rs) {
  const std::string bits = std::to_string(rs.certify_bits);
  for (int d = dims_lo; d <= dims_hi; ++d) {
    const mpfi_float K = rht::asymptotic_constant(d);
    mpfi_float prev;
    for (std::size_t li = 0; li < lambdas.size(); ++li) {
      const mpq_rational lambda(lambdas[li]);
      const mpfi_float mse = rht::mse_full_rank(d, lambda, panels);
      const std::string inst = "d=" + std::to_string(d) + ", N=2, H=1, r=d (full), layers=1, lambda=" + lambdas[li];
      report::claim_row r = make_row("mse-full-rank", "the full-rank head's MSE lies in (0, 1/2) (the mean predictor's error)",
                                     inst, "mpfi" + bits, tier::enclosure);
      const mpfi_float ratio = mpfi_float(from_rational<mpfi_float>(lambda) * mse) / K;
      r.computed = interval_text(mse) + "; lambda MSE / K_d in " + interval_text(ratio, 8);
      r.expected = "in (0, 1/2)";
      r.tolerance = "0";
      r.tolerance_rule = "certified quadrature (" + std::to_string(panels) + " panels; c_d = " + c_d_text(d) + "); side: full rank is enough";
      r.result = lower_of(mse) > 0 && upper_of(mse) < mpfr_float(0.5) ? verdict::pass
                 : upper_of(mse) <= 0 || lower_of(mse) >= mpfr_float(0.5) ? verdict::fail
                                                                         : verdict::undecided;
      rep.claims.push_back(r);
      // λ·MSE ≤ K_d holds for every λ (proofs/L4 part B); the gap 1 − λ·MSE/K_d shrinks like λ^-2 (d > 3) or
      // e^-(√2 λ) (d = 3), below the quadrature's relative resolution (~1/panels) from λ = 10 on: asserted at λ = 1.
      if (lambdas[li] == "1") {
        report::claim_row q = make_row("rate-below-constant", "lambda MSE <= K_d = 2 sqrt2 c_d (ln 2 - 1/2) for every lambda", inst,
                                     "mpfi" + bits, tier::enclosure);
      q.computed = "lambda MSE / K_d in " + interval_text(ratio);
      q.expected = "<= 1 (K_d in " + interval_text(K) + ")";
      q.tolerance = "0";
      q.tolerance_rule = "certified: w <= 1 and the integral of sigma(-s)^2 over [0, inf) is ln 2 - 1/2";
      q.result = upper_of(ratio) <= 1 ? verdict::pass : lower_of(ratio) > 1 ? verdict::fail : verdict::undecided;
      rep.claims.push_back(q);
      }
      if (lambdas[li] == "10000") {
        report::claim_row t = make_row("rate-reaches-constant", "at lambda = 1e4, lambda MSE is within 1e-3 of K_d", inst,
                                       "mpfi" + bits, tier::enclosure);
        t.computed = interval_text(ratio);
        t.expected = ">= 0.999";
        t.tolerance = "0";
        t.tolerance_rule = "certified: lower end of the ratio's enclosure";
        t.result = lower_of(ratio) >= mpfr_float(0.999) ? verdict::pass : upper_of(ratio) < mpfr_float(0.999) ? verdict::fail : verdict::undecided;
        rep.claims.push_back(t);
      }
      if (li > 0) {
        report::claim_row m = make_row("mse-decreasing", "MSE decreases in lambda", "d=" + std::to_string(d) + ", lambda=" +
                                       lambdas[li - 1] + " -> " + lambdas[li], "mpfi" + bits, tier::enclosure);
        m.computed = interval_text(mse);
        m.expected = "< " + interval_text(prev);
        m.tolerance = "0";
        m.tolerance_rule = "certified: upper end below the previous lower end";
        m.result = upper_of(mse) < lower_of(prev) ? verdict::pass : lower_of(mse) >= upper_of(prev) ? verdict::fail : verdict::undecided;
        rep.claims.push_back(m);
      }
      // A second witness: seeded Monte Carlo, where it can say something (d = 4 and 8, small lambda).
      if ((d == 4 || d == 8) && li < 2) {
        const int samples = 200000;
        const std::uint64_t seed = rs.seed ^ (0xA11CEu + static_cast<std::uint64_t>(d * 16) + li);
        const auto [mean, se] = nn::approx_mse_monte_carlo(std::stod(lambdas[li]), nullptr, nullptr, samples, seed, d);
        const double L = double_down(lower_of(mse)), U = double_up(upper_of(mse));
        report::claim_row mc = make_row("mse-monte-carlo", "seeded Monte-Carlo MSE agrees with the certified MSE",
                                        inst + ", seed " + std::to_string(seed), "binary64", tier::approx);
        const double dist = mean < L ? L - mean : mean > U ? mean - U : 0.0;
        mc.computed = str(mean) + " +- " + str(se) + " (" + std::to_string(samples) + " samples)";
        mc.expected = "in [" + decimal_down(L, 17) + ", " + decimal_up(U, 17) + "]";
        mc.abs_error = str(dist);
        mc.tolerance = str(5 * se);
        mc.tolerance_rule = "statistical: distance to the enclosure <= 5 standard errors";
        mc.result = dist <= 5 * se ? verdict::pass : verdict::fail;
        rep.claims.push_back(mc);
      }
      prev = mse;
    }
  }
}

// (3): the harmonic energies of sign⟨y, u⟩.
void harmonics(report::check_report& rep, const run_settings& rs) {
  const std::string bits = std::to_string(rs.certify_bits);
  const mpfi_float pi2 = rht::pi_enclosure() * rht::pi_enclosure();
  for (int d = dims_lo; d <= 8; ++d) {
    const bool over_pi = rht::density_constant_of(d).over_pi;
    mpq_rational sum = 0;
    for (int l = 1; l <= max_degree; l += 2) {
      const mpq_rational e = rht::energy_coefficient(d, l);
      sum += e;
      const mpfi_float ev = over_pi ? mpfi_float(from_rational<mpfi_float>(e) / pi2) : from_rational<mpfi_float>(e);
      const mpfi_float tail = over_pi ? mpfi_float(mpfi_float(1) - from_rational<mpfi_float>(sum) / pi2) : from_rational<mpfi_float>(1 - sum);
      const std::string inst = "d=" + std::to_string(d) + ", degree " + std::to_string(l) + " (N(d,l) = " + std::to_string(rht::harmonic_dimension(d, l)) + ")";
      report::claim_row r = make_row("harmonic-energy", "energy of sign<y,u> in degree l is exact; the tail 1 - sum_{l' <= l} is > 0",
                                     inst, "exact", tier::exact);
      r.computed = "E_l = " + e.str() + (over_pi ? "/pi^2" : "") + " = " + interval_text(ev) + "; tail = " +
                   (over_pi ? "1 - " + sum.str() + "/pi^2" : (1 - sum).str()) + " = " + interval_text(tail);
      r.expected = "tail > 0 (Parseval: the energies sum to E[sign^2] = 1)";
      r.tolerance = "0";
      r.tolerance_rule = "exact: Gegenbauer recurrence and Beta moments in rationals" + std::string(over_pi ? ", pi enclosed" : "");
      r.result = lower_of(tail) > 0 && lower_of(ev) > 0 ? verdict::pass : upper_of(tail) <= 0 ? verdict::fail : verdict::undecided;
      rep.claims.push_back(r);
    }
    // The degree-1 energy against its closed form 4 d c_d² / (d − 1)² (a_1 = E|t| = 2 c_d/(d − 1)).
    const auto c = rht::density_constant_of(d);
    const mpq_rational closed = mpq_rational(4 * d) * c.r * c.r / mpq_rational((d - 1) * (d - 1));
    const mpq_rational got = rht::energy_coefficient(d, 1);
    rep.claims.push_back(claim_exact("energy-degree-one", "E_1 = 4 d c_d^2 / (d - 1)^2", "d=" + std::to_string(d),
                                     got.str() + (c.over_pi ? "/pi^2" : ""), closed.str() + (c.over_pi ? "/pi^2" : ""), got == closed,
                                     "rationals"));
  }
}

// π rounded to nearest in T (MPFR's constant at T's precision; a 40-digit decimal for the binary formats).
template <class T>
T pi_in() {
  if constexpr (std::is_same_v<T, mpfr_float>) {
    T x;
    mpfr_const_pi(x.backend().data(), MPFR_RNDN);
    return x;
  } else if constexpr (std::is_same_v<T, mpfi_float>) {
    return rht::pi_enclosure();
  } else {
    return number_traits<T>::from_string("3.141592653589793238462643383279502884197");
  }
}

// The degree-1 energy evaluated in each format against its exact value.
template <class T>
void approx_energy(report::check_report& rep, const format_spec& fmt, const run_settings& rs) {
  for (int d = dims_lo; d <= 8; ++d) {
    const double tol_rel = (2.0 * d + 16) * std::ldexp(1.0, 1 - static_cast<int>(number_traits<T>::bits()));
    const std::string inst = "d=" + std::to_string(d);
    const auto c = rht::density_constant_of(d);
    const mpq_rational e = rht::energy_coefficient(d, 1);
    certified_value truth;
    truth.enclosure = c.over_pi ? mpfi_float(from_rational<mpfi_float>(e) / (rht::pi_enclosure() * rht::pi_enclosure()))
                                : from_rational<mpfi_float>(e);
    truth.bits = rs.certify_bits;
    if (tol_rel > 1.0 / 16) {
      rep.claims.push_back(claim_skipped("energy-degree-one-format", "E_1 = 4 d c_d^2/(d - 1)^2 evaluated in the format", inst, fmt,
                                         tier_of<T>, "not asserted: the rounding bound (2d + 16) eps exceeds 1/16"));
      continue;
    }
    T cd = d % 2 == 0 ? T(1) : T(T(1) / T(2));  // c_2 π = 1, c_3 = 1/2
    for (int k = (d % 2 == 0 ? 4 : 5); k <= d; k += 2) cd = T(cd * T(k - 2)) / T(k - 3);
    if (c.over_pi) cd = T(cd / pi_in<T>());
    T val = T(T(T(4 * d) * cd) * cd) / T((d - 1) * (d - 1));
    val = T(val * T(T(1) + number_traits<T>::from_double(rs.fault)));  // the testing hook: 0 in every real run
    rep.claims.push_back(claim_certified<T>("energy-degree-one-format", "E_1 = 4 d c_d^2/(d - 1)^2 evaluated in the format", inst, fmt,
                                            val, truth, mpfr_float(tol_rel), "(2d + 16) eps"));
  }
}

report::check_report run(const run_settings& rs) {
  report::check_report rep;
  full_rank(rep, rs);
  harmonics(rep, rs);
  for_each_format(rs, [&]<class T>(const format_spec& f) { approx_energy<T>(rep, f, rs); });
  return rep;
}

}  // namespace

check_entry make_rank_heads_tradeoff() {
  return {"rank-heads-tradeoff", "The rank-heads trade-off on instances (Amsel, Yehudai, Bruna 2024), first part", "§9",
          "proofs/L4-rank-heads-tradeoff.md", error_model, run};
}

}  // namespace attncert::checks
