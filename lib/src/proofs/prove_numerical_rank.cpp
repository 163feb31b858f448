// Numerical rank under a recipe and a policy, at a point.
// The recipe forms M̂ (drift/recipe.hpp) from the claim's binary64 inputs at the point a;
// the numerical rank under a policy with threshold τ = max(α σ₁, β) (strict) is
// #{i : σ_i(M̂) > τ} for the EXACT singular values of the formed matrix.  With G the smaller
// Gram matrix of M̂ and count(t) = #{eigenvalues of G > t}: σ₁² ∈ (l, u] (count(l) ≥ 1,
// count(u) = 0) puts τ² in [T_lo, T_hi] = [max(α²l, β²), max(α²u, β²)], and the rank is
// decided when count(T_lo) = count(T_hi).  count is exact: Descartes' rule on the
// characteristic polynomial of G − tI (FLINT), exact because every root is real.
#include <cmath>

#include "attncert/error.hpp"
#include "attncert/linalg/spectra.hpp"
#include "provers.hpp"

#include <flint/fmpq.h>
#include <flint/fmpq_mat.h>
#include <flint/fmpq_poly.h>

namespace attncert::proofs::detail {

namespace {

std::size_t eigen_count_above(const matrix<mpq_rational>& G, const mpq_rational& t) {
  const long n = static_cast<long>(G.rows());
  fmpq_mat_t M;
  fmpq_mat_init(M, n, n);
  for (long i = 0; i < n; ++i)
    for (long j = 0; j < n; ++j) {
      const mpq_rational v = i == j ? mpq_rational(G(i, j) - t) : G(i, j);
      fmpq_set_mpq(fmpq_mat_entry(M, i, j), v.backend().data());
    }
  fmpq_poly_t chi;
  fmpq_poly_init(chi);
  fmpq_mat_charpoly(chi, M);
  std::size_t changes = 0;
  int last = 0;
  fmpz_t c;
  fmpz_init(c);
  for (long k = 0; k <= fmpq_poly_degree(chi); ++k) {
    fmpq_poly_get_coeff_fmpz(c, chi, k);  // the numerators share one positive denominator
    const int sg = fmpz_sgn(c);
    if (sg == 0) continue;
    if (last != 0 && sg != last) ++changes;
    last = sg;
  }
  fmpz_clear(c);
  fmpq_poly_clear(chi);
  fmpq_mat_clear(M);
  return changes;
}

// M̂: the matrix the recipe forms, exactly (every stage format lies inside binary64).
// Errors: input_error at "/quantity/recipe" when the recipe cannot form it.
matrix<mpq_rational> formed_matrix(const numerical_rank_claim& c) {
  try {
    return with_recipe(c.rec, [&]<class In, class Acc, class Sm, class OAcc, class Out>() {
      const matrix<Out> m = recipe_form<In, Acc, Sm, OAcc, Out>(c.in);
      matrix<mpq_rational> r(m.rows(), m.cols());
      for (Eigen::Index i = 0; i < m.rows(); ++i)
        for (Eigen::Index j = 0; j < m.cols(); ++j) {
          const double v = static_cast<double>(m(i, j));  // exact: every stage format is inside binary64
          if (!std::isfinite(v)) throw input_error("the recipe formed a non-finite entry");
          r(i, j) = mpq_rational(v);
        }
      return r;
    });
  } catch (const input_error& e) {
    fail("/quantity/recipe", std::string("the recipe cannot form the matrix: ") + e.what());
  }
}

// The decided (or not) count of singular values above the threshold.
struct threshold_count {
  std::size_t rank = 0;
  bool decided = true;
  bool bracketed = true;    ///< false: σ₁² could not be bracketed
  mpq_rational l = 0, u = 0;  ///< σ₁² ∈ (l, u]
};

// σ₁² ∈ (l, u]: rational brackets around the double estimate, widened until the exact
// counts confirm them (at most 60 widenings).
threshold_count count_above_threshold(const matrix<mpq_rational>& formed, const matrix<mpq_rational>& G, const mpq_rational& alpha,
                                      const mpq_rational& beta) {
  threshold_count t;
  if (eigen_count_above(G, 0) == 0) return t;  // M̂ = 0: no singular value exceeds any threshold >= 0
  const double s1 = approx_singular_values(from_rational_matrix<double>(formed))[0];
  double lo_d = s1 * s1 * (1 - 0x1p-30), hi_d = s1 * s1 * (1 + 0x1p-30);
  for (int tries = 0; tries < 60; ++tries) {
    t.l = mpq_rational(lo_d);
    t.u = mpq_rational(hi_d);
    if (eigen_count_above(G, t.l) >= 1 && eigen_count_above(G, t.u) == 0) break;
    lo_d *= 0.5;
    hi_d *= 2;
    if (tries == 59) {
      t.bracketed = false;
      return t;
    }
  }
  const mpq_rational T_lo = std::max(mpq_rational(alpha * alpha * t.l), mpq_rational(beta * beta));
  const mpq_rational T_hi = std::max(mpq_rational(alpha * alpha * t.u), mpq_rational(beta * beta));
  const std::size_t c_lo = eigen_count_above(G, T_lo), c_hi = eigen_count_above(G, T_hi);
  t.decided = c_lo == c_hi;
  t.rank = c_lo;
  return t;
}

nlohmann::json numerical_rank_certificate(const numerical_rank_claim& c, claim_verdict verdict, const matrix<mpq_rational>& formed,
                                          const mpq_rational& alpha, const mpq_rational& beta, const threshold_count& t) {
  nlohmann::json cl = {{"quantity", "numerical_rank"}, {"object", c.object}, {"recipe", c.rec.name}, {"policy", c.policy.name()},
                       {"point", rational_string(c.a0)}, {"relation", relation_text(c.rel)}, {"value", c.value},
                       {"scale", rational_string(mpq_rational(c.in.scale))}, {"Q", matrix_json(from_double_matrix<mpq_rational>(c.in.Q))},
                       {"K", matrix_json(from_double_matrix<mpq_rational>(c.in.K))},
                       {"mask", c.in.M.type() == mask::kind::causal ? "causal" : "none"}};
  if (c.in.V) cl["V"] = matrix_json(from_double_matrix<mpq_rational>(*c.in.V));
  nlohmann::json cert = certificate_header(cl, verdict);
  cert["numerical_rank"] = {{"formed", matrix_json(formed)},
                            {"alpha", rational_string(alpha)},
                            {"beta", rational_string(beta)},
                            {"sigma1_squared_above", rational_string(t.l)},
                            {"sigma1_squared_at_most", rational_string(t.u)},
                            {"rank", t.rank}};
  if (verdict == claim_verdict::refuted) cert["counterexample"] = {{"numerical_rank", t.rank}};
  return cert;
}

}  // namespace

certify_result prove_numerical_rank(const numerical_rank_claim& c, const nlohmann::json& claim) {
  const matrix<mpq_rational> formed = formed_matrix(c);
  double alpha_d = 0, beta_d = 0;
  if (!c.policy.linear_threshold(static_cast<long>(formed.rows()), static_cast<long>(formed.cols()), c.rec.result, alpha_d, beta_d))
    fail("/quantity/policy", "numerical_rank claims support numpy, torch, lapack, absolute and relative policies");
  const mpq_rational alpha(alpha_d), beta(beta_d);
  // the Gram matrix (the smaller one)
  const matrix<mpq_rational> formed_t = formed.transpose();
  const matrix<mpq_rational> G = formed.rows() <= formed.cols() ? multiply(formed, formed_t) : multiply(formed_t, formed);
  const threshold_count t = count_above_threshold(formed, G, alpha, beta);
  if (!t.bracketed) return undecided_result(claim, "could not bracket the largest singular value");
  const std::string stmt = "numerical rank of the " + c.object + " formed by recipe " + c.rec.name + " (" + c.rec.stages() + ") under policy " +
                           c.policy.name() + " at a = " + rational_string(c.a0);
  if (!t.decided)
    return undecided_result(claim, stmt + ": a singular value lies within the enclosure of the threshold (sigma_1^2 in (" + rational_string(t.l) +
                                       ", " + rational_string(t.u) + "])");
  const bool ok = relation_holds(c.rel, t.rank, c.value);
  certify_result res;
  res.verdict = ok ? claim_verdict::certified : claim_verdict::refuted;
  res.summary = std::string(to_string(res.verdict)) + ": " + stmt + " is " + std::to_string(t.rank) + " (claimed " + relation_text(c.rel) + " " +
                std::to_string(c.value) + ")\n  exact singular values of the formed matrix against " +
                "the threshold max(alpha sigma_1, beta): eigenvalue counts of its Gram matrix (Descartes, exact)\n";
  res.report = report_header(claim);
  res.report["verdict"] = to_string(res.verdict);
  res.report["summary"] = res.summary;
  res.report["numerical_rank"] = t.rank;
  res.certificate = numerical_rank_certificate(c, res.verdict, formed, alpha, beta, t);
  return res;
}

}  // namespace attncert::proofs::detail
