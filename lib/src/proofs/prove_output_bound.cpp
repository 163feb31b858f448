// The output-error bound (P04, proofs/P04-output-bound.md) at a point:
//   ‖((Â − A)V)_i‖₂ ≤ ‖Â_i − A_i‖₁ · max_j ‖v_j‖₂  with A = softmax(a S0), Â = softmax(a Ŝ0).
// With one u = e^{a/q} for both (q over both), row i of Â − A is δ_j(u)/(D_i D̂_i), δ_j =
// N̂_j D_i − N_j D̂_i; the claim ⇔ G = L² μ_num (Σ_j s_j δ_j)² − μ_den Σ_k W_k² ≥ 0 at u₀, with
// s_j = sign δ_j(u₀), W_k = Σ_j δ_j L V_jk, μ = max_j ‖v_j‖².  Every sign is decided exactly
// by analyze_sign at the point.
#include <sstream>

#include "provers.hpp"

namespace attncert::proofs::detail {

namespace {

// The lcm of the denominators of row `row` of S0 and Ŝ0 on the mask's support: u = e^{a/q}
// with this q makes every score of the row an integer power of u (the layer model's lcm).
mpz_int score_denominator_lcm(const output_bound_claim& c) {
  matrix<mpq_rational> row(2, c.S0.cols());
  for (Eigen::Index j = 0; j < c.S0.cols(); ++j) {
    const bool on = c.M.allows(c.row, j);
    row(0, j) = on ? c.S0(c.row, j) : mpq_rational(0);
    row(1, j) = on ? c.S_hat0(c.row, j) : mpq_rational(0);
  }
  return lcm_of_denominators(row);
}

// Exponents of u in row `row` of exp(a S0) and exp(a Ŝ0), shifted by the row's common
// minimum; −1 for a masked entry.
struct row_exponents {
  std::vector<long> e, e_hat;
};

// Errors: a fully masked row.  nullopt: an exponent spread above 1000 (the claim is valid,
// the polynomials would be too large).
std::optional<row_exponents> exponents_of_row(const output_bound_claim& c, const mpz_int& q) {
  auto scaled = [&](const matrix<mpq_rational>& S, Eigen::Index j) { return numerator(mpq_rational(S(c.row, j) * mpq_rational(q))); };
  mpz_int lo = 0;
  bool any = false;
  for (Eigen::Index j = 0; j < c.S0.cols(); ++j) {
    if (!c.M.allows(c.row, j)) continue;
    for (const mpz_int& x : {scaled(c.S0, j), scaled(c.S_hat0, j)})
      if (!any || x < lo) lo = x, any = true;
  }
  if (!any) fail("/objects/mask", "the row is fully masked");
  row_exponents r;
  for (Eigen::Index j = 0; j < c.S0.cols(); ++j) {
    if (!c.M.allows(c.row, j)) {
      r.e.push_back(-1);
      r.e_hat.push_back(-1);
      continue;
    }
    const mpz_int x = scaled(c.S0, j) - lo, y = scaled(c.S_hat0, j) - lo;
    if (x > 1000 || y > 1000) return std::nullopt;
    r.e.push_back(x.convert_to<long>());
    r.e_hat.push_back(y.convert_to<long>());
  }
  return r;
}

// μ = max_j ‖v_j‖₂² (exact).
mpq_rational largest_squared_row_norm(const matrix<mpq_rational>& V) {
  mpq_rational mu = 0;
  for (Eigen::Index j = 0; j < V.rows(); ++j) {
    mpq_rational n2 = 0;
    for (Eigen::Index k = 0; k < V.cols(); ++k) n2 += V(j, k) * V(j, k);
    mu = std::max(mu, n2);
  }
  return mu;
}

// The polynomials of the proof and the decided signs of the δ_j and of G.
struct bound_polynomials {
  std::vector<int_poly> delta;
  std::vector<sign_analysis> delta_signs;
  int_poly G;
  sign_analysis G_sign;
  mpq_rational mu;
  mpz_int L;
};

int sign_of(const sign_analysis& sa) { return sa.identically_zero ? 0 : sa.signs[0]; }

// δ_j and their signs at the point; the reason when a sign is undecided.
std::optional<std::string> differences(const row_exponents& r, const a_range& point, const mpz_int& q, unsigned max_bits, bound_polynomials& b,
                                       int_poly& l1) {
  int_poly D, D_hat;
  for (std::size_t j = 0; j < r.e.size(); ++j)
    if (r.e[j] >= 0) {
      D = poly_add(D, monomial(r.e[j]));
      D_hat = poly_add(D_hat, monomial(r.e_hat[j]));
    }
  for (std::size_t j = 0; j < r.e.size(); ++j) {
    int_poly d;
    if (r.e[j] >= 0) d = poly_add(poly_mul(monomial(r.e_hat[j]), D), poly_neg(poly_mul(monomial(r.e[j]), D_hat)));
    b.delta.push_back(d);
    b.delta_signs.push_back(analyze_sign(d, point, q, max_bits));
    if (!b.delta_signs.back().decided) return b.delta_signs.back().why_undecided;
    l1 = poly_add(l1, sign_of(b.delta_signs.back()) >= 0 ? d : poly_neg(d));
  }
  return std::nullopt;
}

// G = L² μ_num (Σ_j s_j δ_j)² − μ_den Σ_k W_k² (see the file comment).
int_poly bound_minus_error(const output_bound_claim& c, const bound_polynomials& b, const int_poly& l1) {
  int_poly wsum;
  for (Eigen::Index k = 0; k < c.V.cols(); ++k) {
    int_poly W;
    for (std::size_t j = 0; j < b.delta.size(); ++j)
      W = poly_add(W, poly_scale(b.delta[j], numerator(mpq_rational(c.V(static_cast<Eigen::Index>(j), k) * mpq_rational(b.L)))));
    wsum = poly_add(wsum, poly_mul(W, W));
  }
  const int_poly rhs = poly_scale(poly_mul(l1, l1), b.L * b.L * numerator(b.mu));
  return poly_add(rhs, poly_neg(poly_scale(wsum, denominator(b.mu))));
}

nlohmann::json output_bound_certificate(const output_bound_claim& c, const nlohmann::json& claim, claim_verdict verdict, const mpz_int& q,
                                        const bound_polynomials& b) {
  nlohmann::json cl = {{"S0", matrix_json(c.S0)}, {"S_hat0", matrix_json(c.S_hat0)}, {"V", matrix_json(c.V)},
                       {"mask", c.M.type() == mask::kind::causal ? "causal" : "none"},
                       {"quantity", "output_bound"}, {"row", c.row}, {"point", rational_string(c.a0)}, {"relation", "<="}, {"value", "bound"}};
  if (claim.contains("title")) cl["title"] = claim["title"];
  auto signed_poly = [](const int_poly& p, const sign_analysis& sa) {
    nlohmann::json x = {{"poly", poly_json(p)}};
    if (!sa.identically_zero) x["sample"] = {{"u", rational_string(sa.samples[0])}, {"sign", sa.signs[0]}};
    return x;
  };
  nlohmann::json dj = nlohmann::json::array();
  for (std::size_t j = 0; j < b.delta.size(); ++j) dj.push_back(signed_poly(b.delta[j], b.delta_signs[j]));
  nlohmann::json cert = certificate_header(cl, verdict);
  cert["q"] = q.str();
  cert["output_bound"] = {{"delta", dj}, {"G", signed_poly(b.G, b.G_sign)}, {"mu", b.mu.str()}, {"L", b.L.str()}};
  return cert;
}

}  // namespace

certify_result prove_output_bound(const output_bound_claim& c, const nlohmann::json& claim, unsigned max_bits) {
  a_range point;
  point.lo = point.hi = c.a0;
  point.lo_open = point.hi_open = false;
  const mpz_int q = score_denominator_lcm(c);
  const std::optional<row_exponents> exps = exponents_of_row(c, q);
  if (!exps) return undecided_result(claim, "the exponent spread of the row is above 1000: polynomials too large");
  bound_polynomials b;
  b.L = lcm_of_denominators(c.V);  // L·V is an integer matrix
  b.mu = largest_squared_row_norm(c.V);
  int_poly l1;
  if (const auto why = differences(*exps, point, q, max_bits, b, l1)) return undecided_result(claim, *why);
  b.G = bound_minus_error(c, b, l1);
  b.G_sign = analyze_sign(b.G, point, q, max_bits);
  if (!b.G_sign.decided) return undecided_result(claim, b.G_sign.why_undecided);
  const int gsign = sign_of(b.G_sign);
  certify_result res;
  res.verdict = gsign >= 0 ? claim_verdict::certified : claim_verdict::refuted;
  const std::string row = std::to_string(c.row);
  const std::string text = "||((A_hat - A) V)_" + row + "||_2 <= ||A_hat_" + row + " - A_" + row + "||_1 * max_j ||v_j||_2 at a = " + rational_string(c.a0);
  std::ostringstream os;
  os << to_string(res.verdict) << ": " << text << ".\n  bound^2 - error^2 has sign " << (gsign > 0 ? "+" : gsign < 0 ? "-" : "0")
     << " (exact: a polynomial in u = e^{a/" << q.str() << "} at the point)\n";
  res.summary = os.str();
  res.report = report_header(claim, /*with_title=*/false);  // (the output_bound report has never carried the title)
  res.report["claim"] = text;
  res.report["verdict"] = to_string(res.verdict);
  res.report["summary"] = res.summary;
  res.certificate = output_bound_certificate(c, claim, res.verdict, q, b);
  return res;
}

}  // namespace attncert::proofs::detail
