// rank_heads_lower_bound certificates (proofs/L4-rank-heads-tradeoff.md, parts C, D, F).  Every stated
// number is re-derived here by formulas other than the prover's:
//   c_d      Γ(d/2)/(√π Γ((d−1)/2)) in closed form: (2m)!/(4^m m! (m−1)!) for d = 2m+1,
//            4^{m−1}((m−1)!)²/((2m−2)!) · π⁻¹ for d = 2m (the prover uses a recurrence in d);
//   N(d, ℓ)  (2ℓ + d − 2)(ℓ + d − 3)!/(ℓ!(d − 2)!) (the prover: a difference of binomials);
//   E_ℓ      N(d, ℓ)·(2 c_d P_ℓ'(0)/(ℓ(ℓ + d − 2)))², from the Gegenbauer equation
//            ((1 − t²)^{(d−1)/2} P_ℓ')' = −ℓ(ℓ + d − 2)(1 − t²)^{(d−3)/2} P_ℓ, which gives
//            ∫₀¹ P_ℓ (1 − t²)^{(d−3)/2} dt = P_ℓ'(0)/(ℓ(ℓ + d − 2)), and P_ℓ'(0) = 2λ(−1)^k (λ+1)_k/k! · ℓ!/(2λ)_ℓ
//            (λ = (d − 2)/2, k = (ℓ − 1)/2; the prover expands P_ℓ by its three-term recurrence and
//            integrates monomials);
//   m(d,r,ℓ) min(C(ℓ + r − 1, r − 1), N(d, ℓ)), N(d, ℓ) when r ≥ d;
//   LB       ½ Σ E_ℓ max(0, 1 − H m/N) (+ the rank-one tail ½(1 − Σ E_ℓ)·max(0, 1 − H/N(d, L + 2)); with a residual,
//            the degree-1 term dropped), then LB ≥ value by the exact sign (b = 0) or MPFI enclosures of π².
#include "checker.hpp"

namespace attncert::verify::checker {

namespace {

Z factorial(long n) {
  Z r = 1;
  for (long i = 2; i <= n; ++i) r *= i;
  return r;
}

Z binom(long n, long k) {
  if (k < 0 || n < k) return 0;
  return factorial(n) / (factorial(k) * factorial(n - k));
}

// (x)_n, the rising factorial, for rational x.
Q rising(const Q& x, long n) {
  Q r = 1;
  for (long i = 0; i < n; ++i) r *= x + Q(i);
  return r;
}

// c_d² without its π factor (c_d² = this for odd d, this·π⁻² for even d).
Q density_squared(long d) {
  if (d % 2 == 1) {
    const long m = (d - 1) / 2;
    const Q c(factorial(2 * m), Z(Z(1) << (2 * m)) * factorial(m) * factorial(m - 1));
    return c * c;
  }
  const long m = d / 2;
  const Q c(Z(Z(1) << (2 * (m - 1))) * factorial(m - 1) * factorial(m - 1), factorial(2 * m - 2));
  return c * c;
}

Z dimension(long d, long l) { return Z(2 * l + d - 2) * factorial(l + d - 3) / (factorial(l) * factorial(d - 2)); }

// E_ℓ for odd ℓ (the coefficient of 1 or π⁻²).
Q energy(long d, long l) {
  const Q lambda(d - 2, 2);
  const long k = (l - 1) / 2;
  Q dp = Q(2) * lambda * rising(lambda + Q(1), k) / Q(factorial(k)) * Q(factorial(l)) / rising(Q(2) * lambda, l);
  if (k % 2 == 1) dp = -dp;
  const Q f = dp / Q(Z(l) * Z(l + d - 2));
  return Q(dimension(d, l)) * Q(4) * density_squared(d) * f * f;
}

// The sign of a − v + b/π² (b ≠ 0) at doubling precision up to the cap; beyond_cap when undecided.
int sign_with_pi(const Q& a, const Q& b, const Q& v) {
  const Q av = a - v;
  for (unsigned bits = 64; bits <= precision_cap(); bits *= 2) {
    poll();
    mpfi_t pi2, x;
    mpfi_init2(pi2, bits);
    mpfi_init2(x, bits);
    mpfi_const_pi(pi2);
    mpfi_sqr(pi2, pi2);
    mpfi_q_div(x, b.backend().data(), pi2);
    mpfi_add_q(x, x, av.backend().data());
    const int s = mpfi_is_strictly_pos(x) ? 1 : mpfi_is_strictly_neg(x) ? -1 : 0;
    mpfi_clear(pi2);
    mpfi_clear(x);
    if (s != 0) return s;
  }
  throw beyond_cap("LB - value not separated from 0 within " + precision_cap_text());
}

}  // namespace

void verify_rank_heads(const nlohmann::json& cert, const nlohmann::json& cl, const note_fn& note) {
  const long d = integer<long>(field(cl, "d", "/claim"), "/claim/d");
  if (d < 3 || d > 64) throw malformed("/claim/d: expected 3 <= d <= 64");
  const Z H = parse_integer(text_field(cl, "heads", "/claim"), "/claim/heads", false);
  if (H < 1 || H > Z(("1" + std::string(30, '0')).c_str())) throw malformed("/claim/heads: expected 1 <= H <= 10^30");
  const long r = integer<long>(field(cl, "rank", "/claim"), "/claim/rank");
  if (r < 1 || r > 64) throw malformed("/claim/rank: expected 1 <= r <= 64");
  const nlohmann::json& res = field(cl, "residual", "/claim");
  if (!res.is_boolean()) throw malformed("/claim/residual: expected a boolean");
  const bool residual = res.get<bool>();
  if (residual && r != 1) throw malformed("/claim/residual: the residual bound is for rank one");
  if (text_field(cl, "relation", "/claim") != ">=") throw malformed("/claim/relation: rank_heads_lower_bound is '>='");
  const Q value = exact_number(field(cl, "value", "/claim"), "/claim/value");
  const nlohmann::json& rh = field(cert, "rank_heads", "");
  const long L = integer<long>(field(rh, "max_degree", "/rank_heads"), "/rank_heads/max_degree");
  if (L < 1 || L > 401 || L % 2 == 0) throw malformed("/rank_heads/max_degree: an odd degree in [1, 401]");
  const nlohmann::json& over = field(rh, "energy_over_pi_squared", "/rank_heads");
  check(over.is_boolean() && over.get<bool>() == (d % 2 == 0), "/rank_heads/energy_over_pi_squared: the energies carry pi^-2 exactly for even d");
  const nlohmann::json& dropped = field(rh, "degree_one_dropped", "/rank_heads");
  check(dropped.is_boolean() && dropped.get<bool>() == residual,
        "/rank_heads/degree_one_dropped: the degree-1 term is dropped exactly when the claim allows a residual path");
  const nlohmann::json& terms = field(rh, "terms", "/rank_heads");
  if (!terms.is_array()) throw malformed("/rank_heads/terms: expected an array");
  check(terms.size() == static_cast<std::size_t>((L + 1) / 2), "/rank_heads/terms: one term per odd degree 1 ... max_degree");
  Q kept = 0, s = 0;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    poll();
    const std::string w = "/rank_heads/terms/" + std::to_string(i);
    const long l = 2 * static_cast<long>(i) + 1;
    check(integer<long>(field(terms[i], "degree", w), w + "/degree") == l, w + "/degree: expected " + std::to_string(l));
    const Q E = energy(d, l);
    const Z N = dimension(d, l);
    const Z m = r >= d ? N : std::min(binom(l + r - 1, r - 1), N);
    check(exact_number(field(terms[i], "energy", w), w + "/energy") == E, w + "/energy: the degree-" + std::to_string(l) + " energy is " + E.str());
    check(parse_integer(text_field(terms[i], "N", w), w + "/N", false) == N, w + "/N: N(d, l) is " + N.str());
    check(parse_integer(text_field(terms[i], "m", w), w + "/m", false) == m, w + "/m: m(d, r, l) is " + m.str());
    kept += E;
    const Q cap(Z(H * m), N);
    if (cap < 1 && !(residual && l == 1)) s += E * (Q(1) - cap);
  }
  check(exact_number(field(rh, "energy_sum", "/rank_heads"), "/rank_heads/energy_sum") == kept, "/rank_heads/energy_sum: the sum of the energies is " + kept.str());
  Q a = 0, b = 0;
  (d % 2 == 0 ? b : a) += s / 2;
  if (r == 1) {
    const Z Nt = dimension(d, L + 2);
    check(parse_integer(text_field(rh, "tail_N", "/rank_heads"), "/rank_heads/tail_N", false) == Nt, "/rank_heads/tail_N: N(d, L + 2) is " + Nt.str());
    const Q cap(H, Nt);
    if (cap < 1) {  // the degrees beyond L carry 1 − Σ E_ℓ, each keeping at least 1 − H/N(d, L + 2)
      a += (Q(1) - cap) / 2;
      (d % 2 == 0 ? b : a) -= kept * (Q(1) - cap) / 2;
    }
  } else {
    check(!rh.contains("tail_N"), "/rank_heads/tail_N: only rank-one bounds have the tail term");
  }
  const nlohmann::json& lb = field(rh, "lower_bound", "/rank_heads");
  check(exact_number(field(lb, "rational", "/rank_heads/lower_bound"), "/rank_heads/lower_bound/rational") == a,
        "/rank_heads/lower_bound/rational: the rational part of LB is " + a.str());
  check(exact_number(field(lb, "over_pi_squared", "/rank_heads/lower_bound"), "/rank_heads/lower_bound/over_pi_squared") == b,
        "/rank_heads/lower_bound/over_pi_squared: the pi^-2 part of LB is " + b.str());
  note("LB(d = " + std::to_string(d) + ", H = " + H.str() + ", r = " + std::to_string(r) + (residual ? ", residual" : "") + ") = " + (b == 0 ? a.str() : (a == 0 ? "" : a.str() + " + ") + "(" + b.str() + ")/pi^2") + " re-derived from " + std::to_string(terms.size()) + " energies (Gegenbauer equation)");
  const int sign = b == 0 ? (a >= value ? 1 : -1) : sign_with_pi(a, b, value);
  check(!cert.contains("counterexample"), "/counterexample: a lower-bound certificate states none");
  check(sign > 0, "/verdict: LB is below the value; only CERTIFIED certificates exist for this quantity");
  check_verdict(cert, true, note);
}

}  // namespace attncert::verify::checker
