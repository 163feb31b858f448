// Output-bound certificates (P04): for one row i at a = a0, ‖(Â − A)_i V‖₂ ≤ ‖Â_i − A_i‖₁ · max_j ‖v_j‖₂.
// With u = e^{a/q}, A_ij = u^{e_j}/D, Â_ij = u^{ê_j}/D̂, the differences are δ_j / (D D̂) with
// δ_j = u^{ê_j} D − u^{e_j} D̂; their signs at u0 come from checked samples, and
// G = L² num(μ) (Σ_j |δ_j|)² − den(μ) Σ_k (Σ_j L V_jk δ_j)² (bound² − error², scaled by
// (D D̂)² L² den(μ) > 0) must be >= 0 at u0.  See checker.hpp.
#include <algorithm>

#include "checker.hpp"

namespace attncert::verify::checker {

namespace {

// The claim's row i of S0 and Ŝ0 as exponents over the common denominator q.
struct row_exponentials {
  std::size_t n = 0;         // keys
  std::vector<bool> allowed;  // unmasked keys of the row
  Z q = 1;
  std::vector<zpoly> E, Eh;  // u^{e_j}, u^{ê_j} (empty where masked)
  zpoly D, Dh;               // Σ_j u^{e_j}, Σ_j u^{ê_j}
};

row_exponentials row_exponentials_of(const qmatrix& S0, const qmatrix& H0, long row, const std::string& mk) {
  row_exponentials x;
  x.n = S0[0].size();
  const auto& r = S0[static_cast<std::size_t>(row)];
  const auto& rh = H0[static_cast<std::size_t>(row)];
  for (std::size_t j = 0; j < x.n; ++j) x.allowed.push_back(mk == "none" || static_cast<long>(j) <= row);
  for (std::size_t j = 0; j < x.n; ++j)
    if (x.allowed[j]) x.q = boost::multiprecision::lcm(x.q, boost::multiprecision::lcm(denominator(r[j]), denominator(rh[j])));
  std::optional<Z> lo;
  for (std::size_t j = 0; j < x.n; ++j)
    if (x.allowed[j])
      for (const Q& v : {r[j], rh[j]}) {
        const Z e = numerator(Q(v * Q(x.q)));
        if (!lo || e < *lo) lo = e;
      }
  auto monomial = [&](const Q& v) {
    const Z e = numerator(Q(v * Q(x.q))) - *lo;
    if (e > 1000) throw malformed("/claim: exponent spread too large (limit 1000)");
    zpoly p(static_cast<std::size_t>(e.convert_to<long>()) + 1);
    p.back() = 1;
    return p;
  };
  x.E.resize(x.n);
  x.Eh.resize(x.n);
  for (std::size_t j = 0; j < x.n; ++j)
    if (x.allowed[j]) {
      x.E[j] = monomial(r[j]);
      x.Eh[j] = monomial(rh[j]);
      x.D = add(x.D, x.E[j]);
      x.Dh = add(x.Dh, x.Eh[j]);
    }
  return x;
}

// A polynomial field {poly, sample: {u, sign}} of /output_bound: poly recomputed, its sign at u0
// re-derived from the sample; returns the sign (0 for the zero polynomial).
int check_polynomial_with_sign(const nlohmann::json& j, const zpoly& p, const Q& a0, const Z& q, const std::string& w, const std::string& differs) {
  check(integer_polynomial(field(j, "poly", w), w + "/poly") == p, w + "/poly: " + differs);
  if (p.empty()) return 0;
  const Q sample = exact_number(field(field(j, "sample", w), "u", w), w + "/sample/u");
  const int sg = integer<int>(field(field(j, "sample", w), "sign", w), w + "/sign");
  check(sign_of(evaluate(p, sample)) == sg, w + "/sample: the sign there is not the stated one");
  check_sign_at_point(p, a0, sample, q, w);
  return sg;
}

}  // namespace

void verify_output_bound(const nlohmann::json& cert, const nlohmann::json& cl, const note_fn& note) {
  const qmatrix S0 = rational_matrix(field(cl, "S0", "/claim"), "/claim/S0"), H0 = rational_matrix(field(cl, "S_hat0", "/claim"), "/claim/S_hat0"),
                V = rational_matrix(field(cl, "V", "/claim"), "/claim/V");
  const std::size_t n = S0[0].size();
  if (H0.size() != S0.size() || H0[0].size() != n || V.size() != n) throw malformed("/claim: shapes");
  const long row = integer<long>(field(cl, "row", "/claim"), "/claim/row");
  if (row < 0 || row >= static_cast<long>(S0.size())) throw malformed("/claim/row: out of range");
  const std::string mk = field(cl, "mask", "/claim").get<std::string>();
  if (mk != "none" && mk != "causal") throw malformed("/claim/mask: none or causal");
  const Q a0 = exact_number(field(cl, "point", "/claim"), "/claim/point");
  if (field(cl, "relation", "/claim").get<std::string>() != "<=" || field(cl, "value", "/claim").get<std::string>() != "bound")
    throw malformed("/claim: output_bound is '<=' 'bound'");
  const row_exponentials x = row_exponentials_of(S0, H0, row, mk);
  check(parse_integer(field(cert, "q", "").get<std::string>(), "/q") == x.q, "/q: the common denominator is " + x.q.str());
  Z L = 1;
  Q mu = 0;
  for (const auto& vr : V) {
    Q n2 = 0;
    for (const auto& v : vr) {
      L = boost::multiprecision::lcm(L, denominator(v));
      n2 += v * v;
    }
    if (n2 > mu) mu = n2;
  }
  const nlohmann::json& ob = field(cert, "output_bound", "");
  check(exact_number(field(ob, "mu", "/output_bound"), "/output_bound/mu") == mu, "/output_bound/mu: max_j ||v_j||^2 is " + mu.str());
  check(exact_number(field(ob, "L", "/output_bound"), "/output_bound/L") == Q(L), "/output_bound/L: the common denominator of V is " + L.str());
  const nlohmann::json& dj = field(ob, "delta", "/output_bound");
  if (!dj.is_array() || dj.size() != n) throw malformed("/output_bound/delta: one per key");
  // δ_j = N̂_j D − N_j D̂ (Â_ij − A_ij = δ_j / (D D̂)); the sign at u0 from a checked sample
  std::vector<zpoly> delta;
  zpoly l1;
  for (std::size_t j = 0; j < n; ++j) {
    zpoly d;
    if (x.allowed[j]) d = add(mul(x.Eh[j], x.D), neg(mul(x.E[j], x.Dh)));
    const int sg = check_polynomial_with_sign(dj[j], d, a0, x.q, "/output_bound/delta/" + std::to_string(j), "differs from the recomputed difference");
    l1 = add(l1, sg >= 0 ? d : neg(d));
    delta.push_back(d);
  }
  zpoly wsum;
  for (std::size_t k = 0; k < V[0].size(); ++k) {
    zpoly W;
    for (std::size_t j = 0; j < n; ++j) W = add(W, mul(zpoly{numerator(Q(V[j][k] * Q(L)))}, delta[j]));
    wsum = add(wsum, mul(W, W));
  }
  const zpoly G = add(mul(zpoly{Z(L * L * numerator(mu))}, mul(l1, l1)), neg(mul(zpoly{denominator(mu)}, wsum)));
  const int gsign = check_polynomial_with_sign(field(ob, "G", "/output_bound"), G, a0, x.q, "/output_bound/G", "differs from the recomputed bound^2 - error^2");
  note("row " + std::to_string(row) + ": differences, signs, |.|_1, the error and bound^2 - error^2 recomputed; its sign at a = " + a0.str() +
       " is " + std::to_string(gsign));
  // a refuted bound's counterexample is the claim's point itself: nothing more is stated
  check(!cert.contains("counterexample"), "/counterexample: an output-bound certificate states none (the point is the claim's)");
  check_verdict(cert, gsign >= 0, note);
}

}  // namespace attncert::verify::checker
