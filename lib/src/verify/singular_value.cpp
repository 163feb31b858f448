// Singular-value certificates at a point.  With B = Mᵀ diag(Π_{l≠i} (L D_l)²) M = ρ OᵀO,
// ρ = Π_l (L D_l)² (O the claim's object), the condition σ_k >= c (or <= c), c = num/den, is a
// count of the eigenvalues of T = den²B − num²ρI above / at 0: the characteristic polynomial
// χ(λ) = det(λI − T) is recomputed by Laplace expansion with entries in ℤ[u][λ] (a different
// algorithm from the prover's Berkowitz), the signs of its coefficients at u0 = e^{a/q} are
// re-derived from samples, and Descartes' rule (exact: all roots real) gives the counts.
#include <algorithm>

#include "checker.hpp"

namespace attncert::verify::checker {

namespace {

// A polynomial in λ whose coefficients are polynomials in ℤ[u] (λ-coefficient lists, low → high).
using lambda_poly = std::vector<zpoly>;
lambda_poly lambda_add(const lambda_poly& a, const lambda_poly& b) {
  lambda_poly c(std::max(a.size(), b.size()));
  for (std::size_t i = 0; i < a.size(); ++i) c[i] = add(c[i], a[i]);
  for (std::size_t i = 0; i < b.size(); ++i) c[i] = add(c[i], b[i]);
  while (!c.empty() && c.back().empty()) c.pop_back();
  return c;
}
lambda_poly lambda_mul(const lambda_poly& a, const lambda_poly& b) {
  if (a.empty() || b.empty()) return {};
  lambda_poly c(a.size() + b.size() - 1);
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < b.size(); ++j) c[i + j] = add(c[i + j], mul(a[i], b[j]));
  while (!c.empty() && c.back().empty()) c.pop_back();
  return c;
}
lambda_poly lambda_det(const std::vector<std::vector<lambda_poly>>& A, const std::vector<std::size_t>& rows, const std::vector<std::size_t>& cols) {
  poll();
  if (rows.empty()) return {zpoly{Z(1)}};
  lambda_poly acc;
  const std::vector<std::size_t> rest(rows.begin() + 1, rows.end());
  for (std::size_t j = 0; j < cols.size(); ++j) {
    const lambda_poly& a = A[rows[0]][cols[j]];
    if (a.empty()) continue;
    std::vector<std::size_t> c2;
    for (std::size_t t = 0; t < cols.size(); ++t)
      if (t != j) c2.push_back(cols[t]);
    lambda_poly term = lambda_mul(a, lambda_det(A, rest, c2));
    if (j % 2) for (auto& x : term) x = neg(x);
    acc = lambda_add(acc, term);
  }
  return acc;
}


// The text /singular_value/B states: which matrix the characteristic polynomials are of.
const char* const gram_matrix_text = "rho O^T O = M^T diag(prod_{l != i} (L D_l)^2) M";

// B = Mᵀ diag(Π_{l≠i} (L D_l)²) M and ρ = Π_l (L D_l)².
struct scaled_gram {
  std::vector<std::vector<zpoly>> B;
  zpoly rho;
};

scaled_gram scaled_gram_matrix(const rebuilt_claim& rc) {
  const polynomial_matrix& F = rc.M;
  std::vector<zpoly> LD;
  for (const auto& d : rc.row_sums) LD.push_back(mul(zpoly{rc.value_scale}, d));
  scaled_gram sg;
  sg.rho = {Z(1)};
  for (const auto& x : LD) sg.rho = mul(sg.rho, mul(x, x));
  const std::size_t n = static_cast<std::size_t>(F.cols);
  sg.B.assign(n, std::vector<zpoly>(n));
  for (long i = 0; i < F.rows; ++i) {
    zpoly w = {Z(1)};
    for (std::size_t l = 0; l < LD.size(); ++l)
      if (static_cast<long>(l) != i) w = mul(w, mul(LD[l], LD[l]));
    for (std::size_t a = 0; a < n; ++a)
      for (std::size_t b = 0; b < n; ++b) sg.B[a][b] = add(sg.B[a][b], mul(w, mul(F.at(i, static_cast<long>(a)), F.at(i, static_cast<long>(b)))));
  }
  return sg;
}

// The conditions the claim's relation needs: (c, ">=" | "<=") for σ_index.
std::vector<std::pair<Q, std::string>> singular_value_conditions(const nlohmann::json& cl) {
  const std::string rel = field(cl, "relation", "/claim").get<std::string>();
  const Q c = exact_number(field(cl, "value", "/claim"), "/claim/value");
  std::vector<std::pair<Q, std::string>> want;
  if (rel == "=" || rel == ">=") want.push_back({c, ">="});
  if (rel == "=" || rel == "<=") want.push_back({c, "<="});
  if (rel == "within") {
    const Q t = exact_number(field(cl, "tolerance", "/claim"), "/claim/tolerance");
    if (t < 0) throw malformed("/claim/tolerance: negative");
    want = {{c - t, ">="}, {c + t, "<="}};
  }
  if (want.empty()) throw malformed("/claim/relation: =, <=, >= or within");
  return want;
}

// χ(λ) = det(λI − T), T = den(c)² B − num(c)² ρ I, padded to n + 1 coefficients.
lambda_poly shifted_characteristic_polynomial(const scaled_gram& sg, const Q& cv) {
  const std::size_t n = sg.B.size();
  std::vector<std::vector<lambda_poly>> L(n, std::vector<lambda_poly>(n));
  const Z dd = denominator(cv) * denominator(cv), nn = numerator(cv) * numerator(cv);
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b) {
      zpoly tab = mul(zpoly{dd}, sg.B[a][b]);
      if (a == b) tab = add(tab, neg(mul(zpoly{nn}, sg.rho)));
      L[a][b] = tab.empty() ? lambda_poly{} : lambda_poly{neg(tab)};  // λI − T
      if (a == b) L[a][b] = lambda_add(L[a][b], lambda_poly{zpoly{}, zpoly{Z(1)}});
    }
  std::vector<std::size_t> all(n);
  for (std::size_t k = 0; k < n; ++k) all[k] = k;
  lambda_poly chi = lambda_det(L, all, all);
  chi.resize(n + 1);
  return chi;
}

// The stated coefficients of χ (each equal to the recomputed one, its sign at u0 from a checked
// sample) and the eigenvalue counts they give: (positive, zero) by Descartes' rule.
std::pair<int, int> check_characteristic_polynomial(const nlohmann::json& e, const lambda_poly& chi, const Q& a0, const Z& q, const std::string& w) {
  const std::size_t n = chi.size() - 1;
  const nlohmann::json& co = field(e, "charpoly", w);
  if (!co.is_array() || co.size() != n + 1) throw malformed(w + "/charpoly: expected " + std::to_string(n + 1) + " coefficients");
  int last = 0, positive = 0, zero = 0;
  bool seen = false;
  for (std::size_t j = 0; j <= n; ++j) {
    const std::string wj = w + "/charpoly/" + std::to_string(j);
    check(integer_polynomial(field(co[j], "poly", wj), wj + "/poly") == chi[j], wj + "/poly: differs from the recomputed coefficient");
    int sg = 0;
    if (!chi[j].empty()) {
      const auto& sj = field(co[j], "sample", wj);
      const Q sample = exact_number(field(sj, "u", wj), wj + "/sample/u");
      sg = integer<int>(field(sj, "sign", wj), wj + "/sign");
      check(sign_of(evaluate(chi[j], sample)) == sg, wj + "/sample: the sign there is not the stated one");
      check_sign_at_point(chi[j], a0, sample, q, wj);
    }
    if (sg == 0) {
      if (!seen) ++zero;
      continue;
    }
    seen = true;
    if (last != 0 && sg != last) ++positive;
    last = sg;
  }
  return {positive, zero};
}

}  // namespace

void verify_singular_value(const nlohmann::json& cert, const nlohmann::json& cl, const rebuilt_claim& rc, const note_fn& note) {
  const polynomial_matrix& F = rc.M;
  if (!cl.contains("point")) throw malformed("/claim/point: singular-value certificates are for a point");
  const Q a0 = exact_number(cl["point"], "/claim/point");
  const long index = integer<long>(field(cl, "index", "/claim"), "/claim/index");
  if (index < 1 || index > std::min(F.rows, F.cols)) throw malformed("/claim/index: out of range");
  if (F.cols > 6) throw malformed("/claim: the checker handles singular values of at most 6 columns");
  const scaled_gram sg = scaled_gram_matrix(rc);
  const auto want = singular_value_conditions(cl);
  const nlohmann::json& svj = field(cert, "singular_value", "");
  check(field(svj, "B", "/singular_value").get<std::string>() == gram_matrix_text,
        std::string("/singular_value/B: the characteristic polynomials are of ") + gram_matrix_text);
  const nlohmann::json& conds = field(svj, "conditions", "/singular_value");
  if (!conds.is_array() || conds.size() != want.size()) throw malformed("/singular_value/conditions: expected " + std::to_string(want.size()));
  bool ok = true;
  for (std::size_t t = 0; t < want.size(); ++t) {
    const std::string w = "/singular_value/conditions/" + std::to_string(t);
    const nlohmann::json& e = conds[t];
    const auto& [cv, sense] = want[t];
    check(exact_number(field(e, "value", w), w + "/value") == cv && field(e, "sense", w).get<std::string>() == sense, w + ": not the condition the claim needs");
    // decided by σ_k >= 0 alone: σ_k >= c <= 0 holds, σ_k <= c < 0 fails
    const bool trivial = (sense == ">=" && cv <= 0) || (sense == "<=" && cv < 0);
    check(field(e, "trivial", w).get<bool>() == trivial, w + "/trivial: the condition is " + (trivial ? "" : "not ") + "decided by the sign of sigma alone");
    bool holds;
    if (sense == ">=" && cv <= 0) {
      holds = true;
    } else if (sense == "<=" && cv < 0) {
      holds = false;
    } else {
      // T = den² B − num² ρ I; its eigenvalues have the signs of σ² − c² (and −c² for the
      // structural zeros).  χ(λ) = det(λI − T), all roots real: Descartes' count is exact.
      const auto [positive, zero] = check_characteristic_polynomial(e, shifted_characteristic_polynomial(sg, cv), a0, F.q, w);
      check(integer<int>(field(e, "positive", w), w + "/positive") == positive && integer<int>(field(e, "zero", w), w + "/zero") == zero, w + ": the eigenvalue counts differ");
      holds = sense == ">=" ? positive + zero >= index : positive <= index - 1;
      note(w + ": sigma_" + std::to_string(index) + " " + sense + " " + cv.str() + ": characteristic polynomial recomputed (Laplace), " +
           std::to_string(positive) + " eigenvalue(s) above c^2, " + std::to_string(zero) + " at c^2 (Descartes, exact for real roots)");
    }
    ok = ok && holds;
  }
  // a refuted singular-value claim's counterexample is its point
  if (!ok) {
    const nlohmann::json& ce = field(cert, "counterexample", "");
    check(exact_number(field(ce, "a", "/counterexample"), "/counterexample/a") == a0, "/counterexample/a: not the claim's point");
    note("counterexample re-derived: the claim's point");
  } else {
    check(!cert.contains("counterexample"), "/counterexample: present although the claim holds");
  }
  check_verdict(cert, ok, note);
}

}  // namespace attncert::verify::checker
