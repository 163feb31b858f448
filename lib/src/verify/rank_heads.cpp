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
//
// rank_heads_vote_mse certificates (part F): the mean MSE of the vote construction, 4 c_d ∫₀¹ B_H(q(t)) w(t) dt,
// re-enclosed here in MPFI at the certificate's precision: c_d in closed form; the panel ends t_k = k·t₀/n,
// t₀ = min(1, 12/√H); q = 1 − arccos(t)/π; B_H(q) = Σ_{k ≤ (H−1)/2} C(H, k) q^k p^{H−k} summed upward from k = 0
// with every term (the prover sums downward from the middle and bounds the rest geometrically); w(t) =
// (1 − t²)^{(d−3)/2}; the lower sum of right ends and the upper sum of left ends (the integrand is nonincreasing:
// the theorem of part F, taken as given).  Every stated B_H must meet the re-derived one, and the verdict must
// follow from the re-derived enclosure.
//
// rank_heads_hardmax_orthonormal certificates (part E): M_d = (4/π²) c_d I_{d−2}, I_n = ∫_{−π/2}^{π/2} θ² cos^n θ dθ,
// re-derived here from the Fourier expansion cos^n θ = 2^{−n} Σ_k C(n, k) cos((n − 2k)θ) and
// ∫ θ² cos(mθ) = π³/12 (m = 0), (π²/2) s/m + 2π c/m² − 4 s/m³ (s = sin(mπ/2), c = cos(mπ/2)), with c_d in closed form
// (the prover integrates by parts: I_n = ((n − 1)/n) I_{n−2} − 2C_n/n²); then ½(1 − H·M_d) ≥ value as for LB.
//
// rank_heads_full_rank_mse certificates (part A): the MSE 4 c_d ∫₀¹ σ(−at)² w(t) dt (a = √2λ) of the full-rank head,
// re-enclosed here by another rule than the prover's: with s = at the integrand F(s) = σ(−s)² w(s/a) is
// nonincreasing (both factors are), so ∫₀^E F lies between the right-end and left-end Riemann sums; E = 40 when
// a ≥ 40 (decided exactly: 2λ² ≥ 1600), else E = a, and ∫_E^a F ∈ [0, e^{−80}/2].  The prover bounds each panel by
// convexity of σ(−s)² instead.  The checker's panels start at 2^15 and double (to 2^21) until the verdict is
// decided; the stated enclosure must meet the re-derived one.
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

// c_d without its π factor (c_d = this for odd d, this·π⁻¹ for even d), in closed form.
Q density(long d) {
  if (d % 2 == 1) {
    const long m = (d - 1) / 2;
    return Q(factorial(2 * m), Z(Z(1) << (2 * m)) * factorial(m) * factorial(m - 1));
  }
  const long m = d / 2;
  return Q(Z(Z(1) << (2 * (m - 1))) * factorial(m - 1) * factorial(m - 1), factorial(2 * m - 2));
}

// c_d² without its π factor (c_d² = this for odd d, this·π⁻² for even d).
Q density_squared(long d) {
  const Q c = density(d);
  return c * c;
}

}  // namespace

Z dimension(long d, long l) { return Z(2 * l + d - 2) * factorial(l + d - 3) / (factorial(l) * factorial(d - 2)); }

Q energy(long d, long l) {
  const Q lambda(d - 2, 2);
  const long k = (l - 1) / 2;
  Q dp = Q(2) * lambda * rising(lambda + Q(1), k) / Q(factorial(k)) * Q(factorial(l)) / rising(Q(2) * lambda, l);
  if (k % 2 == 1) dp = -dp;
  const Q f = dp / Q(Z(l) * Z(l + d - 2));
  return Q(dimension(d, l)) * Q(4) * density_squared(d) * f * f;
}

namespace {

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

bool q_le_left(const Q& v, const mpfi_t x) { return mpfr_cmp_q(&x->left, v.backend().data()) >= 0; }    // v ≤ lower(x)
bool q_ge_right(const Q& v, const mpfi_t x) { return mpfr_cmp_q(&x->right, v.backend().data()) <= 0; }  // v ≥ upper(x)

namespace {

// out = (1 − t²)^{(d−3)/2} for t in [0, 1] (1 − t² clamped at 0 below); `scratch` is overwritten.
void sphere_weight_into(mpfi_t out, const mpfi_t t, long d, mpfi_t scratch) {
  mpfi_sqr(scratch, t);
  mpfi_ui_sub(scratch, 1, scratch);
  if (mpfr_sgn(&scratch->left) < 0) mpfr_set_ui(&scratch->left, 0, MPFR_RNDD);
  mpfi_set_ui(out, 1);
  for (long j = 0; j < (d - 3) / 2; ++j) mpfi_mul(out, out, scratch);
  if (d % 2 == 0) {
    mpfi_sqrt(scratch, scratch);
    mpfi_mul(out, out, scratch);
  }
}

// B_H(q) for q = 1 − p, p in the interval P ⊂ [0, ½] (p may straddle 0: B is increasing in p and 0 at p = 0).
void binomial_tail_upward(mpfi_t out, long H, const mpfi_t P, mpfr_prec_t bits) {
  if (mpfr_sgn(&P->right) <= 0) {
    mpfi_set_ui(out, 0);
    return;
  }
  iv p(bits), q(bits), term(bits), ratio(bits), sum(bits);
  if (mpfr_sgn(&P->left) <= 0) mpfi_set_fr(p.x, &P->right);  // the upper end; the result then starts at 0
  else mpfi_set(p.x, P);
  mpfi_ui_sub(q.x, 1, p.x);
  // term_0 = p^H by binary powers
  iv base(bits);
  mpfi_set(base.x, p.x);
  mpfi_set_ui(term.x, 1);
  for (unsigned long e = static_cast<unsigned long>(H); e > 0; e >>= 1) {
    if (e & 1) mpfi_mul(term.x, term.x, base.x);
    mpfi_sqr(base.x, base.x);
  }
  mpfi_div(ratio.x, q.x, p.x);
  mpfi_set(sum.x, term.x);
  for (long k = 0; k < (H - 1) / 2; ++k) {
    if ((k & 1023) == 0) poll();
    mpfi_mul_ui(term.x, term.x, static_cast<unsigned long>(H - k));
    mpfi_div_ui(term.x, term.x, static_cast<unsigned long>(k + 1));
    mpfi_mul(term.x, term.x, ratio.x);
    mpfi_add(sum.x, sum.x, term.x);
  }
  if (mpfr_sgn(&P->left) <= 0) {
    mpfi_set_ui(out, 0);
    mpfi_put(out, sum.x);
  } else {
    mpfi_set(out, sum.x);
  }
}

}  // namespace

void arcsin_moment_fourier(long d, Q& a, Q& b) {
  // I_n as A3 π³ + A2 π² + A1 π + A0
  const long n = d - 2;
  Q A3 = 0, A2 = 0, A1 = 0, A0 = 0;
  for (long k = 0; k <= n; ++k) {
    poll();
    const long m = std::labs(n - 2 * k);
    const Q w = Q(binom(n, k)) / Q(Z(Z(1) << n));
    if (m == 0) {
      A3 += w / 12;
      continue;
    }
    const int s = m % 2 == 0 ? 0 : ((m / 2) % 2 == 0 ? 1 : -1);  // sin(mπ/2)
    const int c = m % 2 == 1 ? 0 : ((m / 2) % 2 == 0 ? 1 : -1);  // cos(mπ/2)
    A2 += w * Q(s) / Q(2 * m);
    A1 += w * Q(2 * c) / Q(m * m);
    A0 -= w * Q(4 * s) / Q(m * m * m);
  }
  // c_d = ρ (odd d) or ρ/π (even d): M_d = (4/π²) c_d I_n lies in ℚ + ℚπ⁻² exactly when the other parts vanish.
  const Q rho = density(d);
  if (d % 2 == 1) {
    check(A3 == 0 && A1 == 0, "/rank_heads_hardmax: internal: I_n for odd n has no pi^3 or pi part");
    a = 4 * rho * A2;
    b = 4 * rho * A0;
  } else {
    check(A2 == 0 && A0 == 0, "/rank_heads_hardmax: internal: I_n for even n has no pi^2 or rational part");
    a = 4 * rho * A3;
    b = 4 * rho * A1;
  }
}

void verify_rank_heads_hardmax(const nlohmann::json& cert, const nlohmann::json& cl, const note_fn& note) {
  const long d = integer<long>(field(cl, "d", "/claim"), "/claim/d");
  if (d < 3 || d > 64) throw malformed("/claim/d: expected 3 <= d <= 64");
  const long H = integer<long>(field(cl, "heads", "/claim"), "/claim/heads");
  if (H < 1 || H > d) throw malformed("/claim/heads: expected 1 <= heads <= d (orthonormal query directions)");
  if (text_field(cl, "relation", "/claim") != ">=") throw malformed("/claim/relation: rank_heads_hardmax_orthonormal is '>='");
  const Q value = exact_number(field(cl, "value", "/claim"), "/claim/value");
  const nlohmann::json& body = field(cert, "rank_heads_hardmax", "");
  Q a, b;
  arcsin_moment_fourier(d, a, b);
  const nlohmann::json& M = field(body, "arcsin_moment", "/rank_heads_hardmax");
  check(exact_number(field(M, "rational", "/rank_heads_hardmax/arcsin_moment"), "/rank_heads_hardmax/arcsin_moment/rational") == a,
        "/rank_heads_hardmax/arcsin_moment/rational: the rational part of M_d is " + a.str());
  check(exact_number(field(M, "over_pi_squared", "/rank_heads_hardmax/arcsin_moment"), "/rank_heads_hardmax/arcsin_moment/over_pi_squared") == b,
        "/rank_heads_hardmax/arcsin_moment/over_pi_squared: the pi^-2 part of M_d is " + b.str());
  const Q la = Q(1, 2) - Q(H) * a / 2, lb = -Q(H) * b / 2;
  const nlohmann::json& L = field(body, "lower_bound", "/rank_heads_hardmax");
  check(exact_number(field(L, "rational", "/rank_heads_hardmax/lower_bound"), "/rank_heads_hardmax/lower_bound/rational") == la,
        "/rank_heads_hardmax/lower_bound/rational: the rational part of 1/2 (1 - H M_d) is " + la.str());
  check(exact_number(field(L, "over_pi_squared", "/rank_heads_hardmax/lower_bound"), "/rank_heads_hardmax/lower_bound/over_pi_squared") == lb,
        "/rank_heads_hardmax/lower_bound/over_pi_squared: the pi^-2 part of 1/2 (1 - H M_d) is " + lb.str());
  note("M_" + std::to_string(d) + " = " + a.str() + " + (" + b.str() + ")/pi^2 re-derived from the Fourier expansion of cos^" + std::to_string(d - 2));
  const int sign = lb == 0 ? (la >= value ? 1 : -1) : sign_with_pi(la, lb, value);
  check(!cert.contains("counterexample"), "/counterexample: a lower-bound certificate states none");
  check(sign > 0, "/verdict: the bound is below the value; only CERTIFIED certificates exist for this quantity");
  check_verdict(cert, true, note);
}

void verify_rank_heads_full_rank(const nlohmann::json& cert, const nlohmann::json& cl, const note_fn& note) {
  const long d = integer<long>(field(cl, "d", "/claim"), "/claim/d");
  if (d < 3 || d > 64) throw malformed("/claim/d: expected 3 <= d <= 64");
  const Q lambda = exact_number(field(cl, "lambda", "/claim"), "/claim/lambda");
  if (lambda <= 0 || lambda > Q(Z(("1" + std::string(30, '0')).c_str()))) throw malformed("/claim/lambda: expected 0 < lambda <= 10^30");
  const std::string rel = text_field(cl, "relation", "/claim");
  if (rel != "<=" && rel != ">=") throw malformed("/claim/relation: rank_heads_full_rank_mse is '<=' or '>='");
  const Q value = exact_number(field(cl, "value", "/claim"), "/claim/value");
  const nlohmann::json& body = field(cert, "rank_heads_full_rank", "");
  const nlohmann::json& stated = field(body, "mse", "/rank_heads_full_rank");
  if (!stated.is_array() || stated.size() != 2) throw malformed("/rank_heads_full_rank/mse: expected [lower, upper]");
  const Q slo = exact_number(stated[0], "/rank_heads_full_rank/mse/0"), shi = exact_number(stated[1], "/rank_heads_full_rank/mse/1");
  check(!cert.contains("counterexample"), "/counterexample: an MSE certificate states none");
  const mpfr_prec_t bits = 128;
  const bool cut = Q(2) * lambda * lambda >= Q(1600);  // a = √2λ ≥ 40
  iv a(bits), E(bits), h(bits), s(bits), t(bits), F(bits), wt(bits), tmp(bits), lo(bits), hi(bits), prev(bits), mse(bits), cd(bits), pi(bits);
  mpfi_const_pi(pi.x);
  mpfi_set_q(a.x, lambda.backend().data());
  mpfi_set_ui(tmp.x, 2);
  mpfi_sqrt(tmp.x, tmp.x);
  mpfi_mul(a.x, a.x, tmp.x);
  if (cut) mpfi_set_ui(E.x, 40);
  else mpfi_set(E.x, a.x);
  const Q c = density(d);
  mpfi_set_q(cd.x, c.backend().data());
  if (d % 2 == 0) mpfi_div(cd.x, cd.x, pi.x);
  mpfi_mul_ui(cd.x, cd.x, 4);
  auto F_at = [&](long k, long n) {  // F at s = k E/n (s = E at k = n)
    if (k == n) mpfi_set(s.x, E.x);
    else {
      mpfi_mul_ui(s.x, E.x, static_cast<unsigned long>(k));
      mpfi_div_ui(s.x, s.x, static_cast<unsigned long>(n));
    }
    mpfi_exp(F.x, s.x);  // σ(−s)² = (1 + e^s)^{−2}
    mpfi_add_ui(F.x, F.x, 1);
    mpfi_sqr(F.x, F.x);
    mpfi_ui_div(F.x, 1, F.x);
    mpfi_div(t.x, s.x, a.x);  // t = s/a ≤ 1
    sphere_weight_into(tmp.x, t.x, d, wt.x);
    mpfi_mul(F.x, F.x, tmp.x);
  };
  for (long n = 1L << 15; n <= (1L << 21); n *= 2) {
    mpfi_div_ui(h.x, E.x, static_cast<unsigned long>(n));
    mpfi_set_ui(lo.x, 0);
    mpfi_set_ui(hi.x, 0);
    F_at(0, n);
    mpfi_set(prev.x, F.x);
    for (long k = 0; k < n; ++k) {
      if ((k & 4095) == 0) poll();
      F_at(k + 1, n);
      mpfi_mul(tmp.x, h.x, F.x);  // right end: below
      mpfi_add_fr(lo.x, lo.x, &tmp.x->left);
      mpfi_mul(tmp.x, h.x, prev.x);  // left end: above
      mpfi_add_fr(hi.x, hi.x, &tmp.x->right);
      mpfi_set(prev.x, F.x);
    }
    if (cut) {  // ∫_{40}^{a} F ≤ ∫_{40}^∞ e^{−2s} ds = e^{−80}/2
      mpfi_set_si(tmp.x, -80);
      mpfi_exp(tmp.x, tmp.x);
      mpfi_div_ui(tmp.x, tmp.x, 2);
      mpfi_add_fr(hi.x, hi.x, &tmp.x->right);
    }
    mpfi_interv_fr(mse.x, &lo.x->left, &hi.x->right);
    mpfi_mul(mse.x, mse.x, cd.x);
    mpfi_div(mse.x, mse.x, a.x);
    const bool holds = rel == "<=" ? q_ge_right(value, mse.x) : q_le_left(value, mse.x);
    const bool fails = rel == "<=" ? mpfr_cmp_q(&mse.x->left, value.backend().data()) > 0 : mpfr_cmp_q(&mse.x->right, value.backend().data()) < 0;
    if (!holds && !fails) continue;
    check(slo <= shi && mpfr_cmp_q(&mse.x->left, shi.backend().data()) <= 0 && mpfr_cmp_q(&mse.x->right, slo.backend().data()) >= 0,
          "/rank_heads_full_rank/mse: the stated enclosure does not meet the re-derived one");
    note("MSE of the full-rank head (d = " + std::to_string(d) + ", lambda = " + lambda.str() + ") re-enclosed by monotone Riemann sums of " +
         std::to_string(n) + " panels");
    check_verdict(cert, holds, note);
    return;
  }
  throw beyond_cap("the re-derived enclosure of the MSE contains the value at 2^21 monotone panels");
}

void verify_rank_heads_vote(const nlohmann::json& cert, const nlohmann::json& cl, const note_fn& note) {
  const long d = integer<long>(field(cl, "d", "/claim"), "/claim/d");
  if (d < 3 || d > 64) throw malformed("/claim/d: expected 3 <= d <= 64");
  const long H = integer<long>(field(cl, "heads", "/claim"), "/claim/heads");
  if (H < 1 || H > 65535 || H % 2 == 0) throw malformed("/claim/heads: expected an odd number of vote heads in [1, 65535]");
  const std::string rel = text_field(cl, "relation", "/claim");
  if (rel != "<=" && rel != ">=") throw malformed("/claim/relation: rank_heads_vote_mse is '<=' or '>='");
  const Q value = exact_number(field(cl, "value", "/claim"), "/claim/value");
  const nlohmann::json& rv = field(cert, "rank_heads_vote", "");
  const long n = integer<long>(field(rv, "panels", "/rank_heads_vote"), "/rank_heads_vote/panels");
  if (n < 1 || n > 3200) throw malformed("/rank_heads_vote/panels: expected 1 <= panels <= 3200");
  const long bits_l = integer<long>(field(rv, "precision_bits", "/rank_heads_vote"), "/rank_heads_vote/precision_bits");
  if (bits_l < 64 || bits_l > 4096) throw malformed("/rank_heads_vote/precision_bits: expected 64 ... 4096");
  if (static_cast<unsigned>(bits_l) > precision_cap()) throw beyond_cap("/rank_heads_vote/precision_bits: above " + precision_cap_text());
  const mpfr_prec_t bits = static_cast<mpfr_prec_t>(bits_l);
  const bool whole = H < 144;  // 12/√H ≥ 1 exactly when H ≤ 144
  const nlohmann::json& w = field(rv, "whole", "/rank_heads_vote");
  check(w.is_boolean() && w.get<bool>() == whole, "/rank_heads_vote/whole: the panels cover [0, 1] exactly when H < 144");
  const nlohmann::json& Bs = field(rv, "binomial_tails", "/rank_heads_vote");
  if (!Bs.is_array() || Bs.size() != static_cast<std::size_t>(n + 1)) throw malformed("/rank_heads_vote/binomial_tails: one interval per panel end (panels + 1)");
  iv pi(bits), t0(bits), h(bits), t(bits), qv(bits), p(bits), B(bits), wt(bits), f(bits), lo(bits), hi(bits), tmp(bits), one_minus(bits);
  mpfi_const_pi(pi.x);
  if (whole) {
    mpfi_set_ui(t0.x, 1);
  } else {
    mpfi_set_ui(t0.x, static_cast<unsigned long>(H));
    mpfi_sqrt(t0.x, t0.x);
    mpfi_ui_div(t0.x, 12, t0.x);
  }
  mpfi_div_ui(h.x, t0.x, static_cast<unsigned long>(n));
  mpfi_set_ui(lo.x, 0);
  mpfi_set_ui(hi.x, 0);
  auto f_at = [&](long k) {
    if (k == n) mpfi_set(t.x, t0.x);
    else mpfi_mul_ui(t.x, h.x, static_cast<unsigned long>(k));
    if (mpfr_cmp_ui(&t.x->right, 1) > 0) mpfr_set_ui(&t.x->right, 1, MPFR_RNDU);  // t ≤ 1
    if (mpfr_cmp_ui(&t.x->left, 1) >= 0) {
      mpfi_set_ui(B.x, 0);  // q = 1
    } else {
      mpfi_acos(qv.x, t.x);
      mpfi_div(p.x, qv.x, pi.x);  // p = arccos(t)/π ∈ [0, ½]
      if (mpfr_sgn(&p.x->left) < 0) mpfr_set_ui(&p.x->left, 0, MPFR_RNDD);
      if (mpfr_cmp_d(&p.x->right, 0.5) > 0) mpfr_set_d(&p.x->right, 0.5, MPFR_RNDU);
      binomial_tail_upward(B.x, H, p.x, bits);
    }
    const std::string where = "/rank_heads_vote/binomial_tails/" + std::to_string(k);
    const nlohmann::json& e = Bs[static_cast<std::size_t>(k)];
    if (!e.is_array() || e.size() != 2) throw malformed(where + ": expected [lower, upper]");
    const Q slo = exact_number(e[0], where + "/0"), shi = exact_number(e[1], where + "/1");
    check(slo <= shi, where + ": an interval [lower, upper]");
    // the stated enclosure must meet the re-derived one
    check(mpfr_cmp_q(&B.x->left, shi.backend().data()) <= 0 && mpfr_cmp_q(&B.x->right, slo.backend().data()) >= 0,
          where + ": B_H at this panel end is not in the stated interval (re-derived by the upward sum)");
    // f = B·(1 − t²)^{(d−3)/2}
    sphere_weight_into(tmp.x, t.x, d, wt.x);
    mpfi_mul(f.x, B.x, tmp.x);
  };
  iv prev(bits);
  f_at(0);
  mpfi_set(prev.x, f.x);
  for (long k = 0; k < n; ++k) {
    poll();
    f_at(k + 1);
    mpfi_mul(tmp.x, h.x, f.x);  // right end: the lower sum
    mpfi_add_fr(lo.x, lo.x, &tmp.x->left);
    mpfi_mul(tmp.x, h.x, prev.x);  // left end: the upper sum
    mpfi_add_fr(hi.x, hi.x, &tmp.x->right);
    mpfi_set(prev.x, f.x);
  }
  if (!whole) {  // beyond t₀ the integrand is at most f(t₀)
    mpfi_ui_sub(one_minus.x, 1, t0.x);
    mpfi_mul(tmp.x, prev.x, one_minus.x);
    mpfi_add_fr(hi.x, hi.x, &tmp.x->right);
  }
  iv mse(bits), cd(bits);
  const Q c = density(d);
  mpfi_set_q(cd.x, c.backend().data());
  if (d % 2 == 0) mpfi_div(cd.x, cd.x, pi.x);
  mpfi_mul_ui(cd.x, cd.x, 4);
  mpfi_interv_fr(mse.x, &lo.x->left, &hi.x->right);
  mpfi_mul(mse.x, mse.x, cd.x);
  const nlohmann::json& stated = field(rv, "mean_mse", "/rank_heads_vote");
  if (!stated.is_array() || stated.size() != 2) throw malformed("/rank_heads_vote/mean_mse: expected [lower, upper]");
  const Q mlo = exact_number(stated[0], "/rank_heads_vote/mean_mse/0"), mhi = exact_number(stated[1], "/rank_heads_vote/mean_mse/1");
  check(mlo <= mhi && mpfr_cmp_q(&mse.x->left, mhi.backend().data()) <= 0 && mpfr_cmp_q(&mse.x->right, mlo.backend().data()) >= 0,
        "/rank_heads_vote/mean_mse: the stated enclosure does not meet the re-derived one");
  note("mean MSE of the vote construction (d = " + std::to_string(d) + ", H = " + std::to_string(H) + ") re-enclosed from " +
       std::to_string(n + 1) + " upward binomial sums at " + std::to_string(bits_l) + " bits");
  check(!cert.contains("counterexample"), "/counterexample: a mean-MSE certificate states none");
  const bool holds = rel == "<=" ? q_ge_right(value, mse.x) : q_le_left(value, mse.x);
  const bool fails = rel == "<=" ? mpfr_cmp_q(&mse.x->left, value.backend().data()) > 0 : mpfr_cmp_q(&mse.x->right, value.backend().data()) < 0;
  if (!holds && !fails) throw beyond_cap("the re-derived enclosure of the mean MSE contains the value at " + std::to_string(bits_l) + " bits and " + std::to_string(n) + " panels");
  check_verdict(cert, holds, note);
}

}  // namespace attncert::verify::checker
