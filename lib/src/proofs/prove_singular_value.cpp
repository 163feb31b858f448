// Singular-value claims at a point: σ_k ≥ c ⇔ at least k eigenvalues of OᵀO are ≥ c².
// With O = W M, W = diag(1/(L D_i)) and ρ = Π_i (L D_i)²:  ρ OᵀO = Mᵀ diag(Π_{l≠i} (L D_l)²) M
// =: B, a matrix of integer polynomials in u.  For c = num/den the eigenvalues of
// T = den²B − num²ρI have the signs of σ² − c²; T is symmetric, so its characteristic
// polynomial has only real roots and Descartes' rule counts them exactly, from the signs of
// its coefficients at the point (each decided by analyze_sign).
#include <sstream>

#include "provers.hpp"

namespace attncert::proofs::detail {

namespace {

using poly_matrix = std::vector<std::vector<int_poly>>;

// Characteristic polynomial det(λI − T) of a square matrix over ℤ[u] by Berkowitz's
// division-free algorithm; coefficients of λ^0 .. λ^n.
std::vector<int_poly> charpoly(const poly_matrix& T) {
  const std::size_t n = T.size();
  std::vector<int_poly> chi = {int_poly{1}};  // descending powers of λ
  for (std::size_t r = 0; r < n; ++r) {
    std::vector<int_poly> t = {int_poly{1}, poly_neg(T[r][r])};
    // t_{k+2} = −R A_r^k C, R = T[r][0..r), C = T[0..r)[r]
    std::vector<int_poly> v(r);
    for (std::size_t i = 0; i < r; ++i) v[i] = T[i][r];
    for (std::size_t k = 0; k < r; ++k) {
      int_poly rc;
      for (std::size_t i = 0; i < r; ++i) rc = poly_add(rc, poly_mul(T[r][i], v[i]));
      t.push_back(poly_neg(rc));
      std::vector<int_poly> w(r);
      for (std::size_t i = 0; i < r; ++i)
        for (std::size_t j = 0; j < r; ++j) w[i] = poly_add(w[i], poly_mul(T[i][j], v[j]));
      v = w;
    }
    std::vector<int_poly> next(r + 2);
    for (std::size_t i = 0; i < r + 2; ++i)
      for (std::size_t j = 0; j <= std::min(i, r); ++j)
        if (i - j < t.size()) next[i] = poly_add(next[i], poly_mul(t[i - j], chi[j]));
    chi = next;
  }
  return std::vector<int_poly>(chi.rbegin(), chi.rend());
}

// ρ and B = Mᵀ diag(Π_{l≠i} (L D_l)²) M (see the file comment).
struct gram_family {
  int_poly rho;
  poly_matrix B;
};

gram_family scaled_gram(const layer_claim& c, const poly_family& F) {
  std::vector<int_poly> LD;
  for (const auto& d : row_normalizers(c.in)) LD.push_back(poly_scale(d, F.value_scale));
  gram_family g;
  g.rho = {1};
  for (const auto& x : LD) g.rho = poly_mul(g.rho, poly_mul(x, x));
  std::vector<int_poly> weight(LD.size());
  for (std::size_t i = 0; i < LD.size(); ++i) {
    int_poly w = {1};
    for (std::size_t l = 0; l < LD.size(); ++l)
      if (l != i) w = poly_mul(w, poly_mul(LD[l], LD[l]));
    weight[i] = w;
  }
  const std::size_t n = static_cast<std::size_t>(F.cols);
  g.B.assign(n, std::vector<int_poly>(n));
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = a; b < n; ++b) {
      int_poly acc;
      for (Eigen::Index i = 0; i < F.rows; ++i)
        acc = poly_add(acc, poly_mul(weight[static_cast<std::size_t>(i)],
                                     poly_mul(F.at(i, static_cast<Eigen::Index>(a)), F.at(i, static_cast<Eigen::Index>(b)))));
      g.B[a][b] = g.B[b][a] = acc;
    }
  return g;
}

// Conditions σ_k ≥ c  (count of eigenvalues of T = den²B − num²ρI that are ≥ 0 is ≥ k)
//        and σ_k ≤ c  (count of eigenvalues of T that are > 0 is ≤ k − 1), c ≥ 0.
struct condition {
  mpq_rational c;
  std::string sense;  // ">=" or "<="
  bool trivial = false;
  std::vector<int_poly> chi;
  std::vector<sign_analysis> signs;
  int positive = 0, zero = 0;
  bool holds = false;
};

std::vector<condition> conditions_of(const real_relation& rel) {
  std::vector<condition> conds;
  auto add = [&](const mpq_rational& v, const char* sense) {
    condition c;
    c.c = v;
    c.sense = sense;
    conds.push_back(c);
  };
  if (rel.text == "=" || rel.text == ">=") add(rel.value, ">=");
  if (rel.text == "=" || rel.text == "<=") add(rel.value, "<=");
  if (rel.text == "within") {
    add(rel.value - rel.tolerance, ">=");
    add(rel.value + rel.tolerance, "<=");
  }
  return conds;
}

// Decides one condition at the point; returns the reason when a coefficient's sign is
// undecided (nullopt when decided).
std::optional<std::string> decide(condition& cond, const gram_family& g, long index, const a_range& range, const mpz_int& q, unsigned max_bits) {
  if (cond.sense == ">=" && cond.c <= 0) {
    cond.trivial = cond.holds = true;  // σ_k ≥ 0 ≥ c
    return std::nullopt;
  }
  if (cond.sense == "<=" && cond.c < 0) {
    cond.trivial = true;  // σ_k ≥ 0 > c
    cond.holds = false;
    return std::nullopt;
  }
  const mpz_int num = numerator(cond.c), den = denominator(cond.c);
  poly_matrix T = g.B;
  for (std::size_t a = 0; a < T.size(); ++a) {
    for (std::size_t b = 0; b < T.size(); ++b)
      for (auto& x : T[a][b]) x *= den * den;
    T[a][a] = poly_add(T[a][a], poly_neg(poly_scale(g.rho, num * num)));
  }
  cond.chi = charpoly(T);
  int last = 0;
  bool seen_nonzero = false;
  for (std::size_t j = 0; j < cond.chi.size(); ++j) {
    cond.signs.push_back(analyze_sign(cond.chi[j], range, q, max_bits));
    if (!cond.signs.back().decided) return cond.signs.back().why_undecided;
    const int sg = cond.signs.back().identically_zero ? 0 : cond.signs.back().signs[0];
    if (sg == 0) {
      if (!seen_nonzero) ++cond.zero;
      continue;
    }
    seen_nonzero = true;
    if (last != 0 && sg != last) ++cond.positive;
    last = sg;
  }
  // the eigenvalues of the symmetric T are real, so Descartes' count is exact
  cond.holds = cond.sense == ">=" ? cond.positive + cond.zero >= index : cond.positive <= index - 1;
  return std::nullopt;
}

std::string singular_value_summary(claim_verdict verdict, const std::string& claim_text, long index, const std::vector<condition>& conds) {
  std::ostringstream os;
  os << to_string(verdict) << ": " << claim_text << ".\n";
  for (const auto& c : conds) {
    os << "  sigma_" << index << " " << c.sense << " " << c.c.str() << ": ";
    if (c.trivial) os << (c.holds ? "trivially true (singular values are >= 0)" : "false (singular values are >= 0)");
    else os << c.positive << " eigenvalue(s) of O^T O above c^2, " << c.zero << " equal to c^2 (Descartes on the exact characteristic polynomial)";
    os << "\n";
  }
  return os.str();
}

nlohmann::json singular_value_certificate(const layer_claim& c, const nlohmann::json& claim, claim_verdict verdict, const poly_family& F,
                                          const std::vector<condition>& conds) {
  nlohmann::json cl = layer_claim_json(c, claim);
  cl["quantity"] = "singular_value";
  cl["index"] = c.index;
  cl["relation"] = c.real_rel.text;
  cl["value"] = c.real_rel.value.str();
  if (c.real_rel.text == "within") cl["tolerance"] = c.real_rel.tolerance.str();
  nlohmann::json cert = certificate_header(cl, verdict);
  cert["q"] = F.q.str();
  nlohmann::json cj = nlohmann::json::array();
  for (const auto& cond : conds) {
    nlohmann::json e = {{"value", cond.c.str()}, {"sense", cond.sense}, {"trivial", cond.trivial}};
    if (!cond.trivial) {
      nlohmann::json co = nlohmann::json::array();
      for (std::size_t j = 0; j < cond.chi.size(); ++j) {
        const auto& sa = cond.signs[j];
        nlohmann::json x = {{"poly", poly_json(cond.chi[j])}};
        if (!sa.identically_zero) x["sample"] = {{"u", rational_string(sa.samples[0])}, {"sign", sa.signs[0]}};
        co.push_back(x);
      }
      e["charpoly"] = co;
      e["positive"] = cond.positive;
      e["zero"] = cond.zero;
    }
    cj.push_back(e);
  }
  cert["singular_value"] = {{"B", "rho O^T O = M^T diag(prod_{l != i} (L D_l)^2) M"}, {"conditions", cj}};
  if (verdict == claim_verdict::refuted) cert["counterexample"] = {{"a", rational_string(*c.range.lo)}};
  return cert;
}

}  // namespace

certify_result prove_singular_value(const layer_claim& c, const nlohmann::json& claim, unsigned max_bits) {
  certify_result res;
  res.report = report_header(claim);
  const std::string claim_text =
      "sigma_" + std::to_string(c.index) + "(" + to_string(c.object) + ") " + c.real_rel.describe() + " for " + c.range_text;
  res.report["claim"] = claim_text;
  if (c.object == layer_object::scores) fail("/quantity/object", "singular values of the scores are not supported yet");
  auto undecided = [&](const std::string& why) -> certify_result { return mark_undecided(res, "UNDECIDED: " + why + "\n", why); };
  if (!c.algebraic_point.empty())
    return undecided("singular-value claims at a = 1/sqrt(d) (irrational) are not supported; use a rational scale");
  if (!c.range.is_point()) return undecided("singular-value claims over a parameter range are not supported yet; give a point (\"at\")");
  const poly_family F = build_claim_family(c.in);
  if (c.index > std::min(F.rows, F.cols))
    fail("/quantity/index", "the matrix has only " + std::to_string(std::min(F.rows, F.cols)) + " singular values");
  if (F.cols > 8) fail("/quantity/object", "singular values are supported for at most 8 columns");
  const gram_family g = scaled_gram(c, F);
  std::vector<condition> conds = conditions_of(c.real_rel);
  bool ok = true;
  for (auto& cond : conds) {
    if (const auto why = decide(cond, g, c.index, c.range, F.q, max_bits)) return undecided(*why);
    ok = ok && cond.holds;
  }
  res.verdict = ok ? claim_verdict::certified : claim_verdict::refuted;
  res.summary = singular_value_summary(res.verdict, claim_text, c.index, conds);
  res.report["verdict"] = to_string(res.verdict);
  res.report["summary"] = res.summary;
  if (!ok) res.report["counterexample"] = {{"a", rational_string(*c.range.lo)}};
  res.certificate = singular_value_certificate(c, claim, res.verdict, F, conds);
  return res;
}

}  // namespace attncert::proofs::detail
