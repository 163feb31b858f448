// Rank claims over a parameter family S(a) = a·S0 (scores, attention, output, residual).
// The rank function is decided exactly by family_rank (rank/family.hpp): a generic rank over
// ℚ(u), u = e^{a/q}, and the drops at the roots of the minors' gcd that lie in the range.
// Proof sketch: proofs/P09-parameter-families.md.
#include <sstream>

#include "provers.hpp"

namespace attncert::proofs::detail {

namespace {

// The family of the scores a·S0: the constant matrix S0 scaled to integers (by the layer
// model's lcm of its denominators), q = 1.  The scores object has no exponential M(u).
poly_family scores_family(const family_input& in) {
  in.M.check_shape(in.S0.rows(), in.S0.cols());
  const mpz_int L = lcm_of_denominators(in.S0);
  poly_family F;
  F.rows = in.S0.rows();
  F.cols = in.S0.cols();
  for (Eigen::Index i = 0; i < F.rows; ++i)
    for (Eigen::Index j = 0; j < F.cols; ++j) {
      const mpz_int c = numerator(mpq_rational(in.S0(i, j) * mpq_rational(L)));
      F.entries.push_back(c == 0 ? int_poly{} : int_poly{c});
    }
  return F;
}

// The rank function over the claim's range, with the drop of the scores at a = 0 (S(0) = 0)
// added to the family's drops.
struct rank_function {
  poly_family family;
  family_rank_result ranks;  ///< generic rank, minors, gcd and the family's drops
  std::vector<drop_point> drops;
};

rank_function rank_over_range(const layer_claim& c, unsigned max_bits) {
  rank_function r;
  const bool scores = c.object == layer_object::scores;
  if (scores) {
    // a*S0: the same machinery on the constant matrix S0; rank 0 at a = 0.
    r.family = scores_family(c.in);
    r.ranks = family_rank(r.family, c.range, max_bits);
  } else {
    r.family = build_claim_family(c.in);
    const a_range effective = c.algebraic_point.empty() ? c.range : a_range{};  // algebraic point: no roots can matter
    r.ranks = family_rank(r.family, effective, max_bits);
    if (!c.algebraic_point.empty()) r.ranks.drops.clear();  // u = e^{1/sqrt(d)} is transcendental: never a root of g
  }
  r.drops = r.ranks.drops;
  if (r.ranks.decided && scores && c.range.contains(mpq_rational(0)) && r.ranks.generic > 0) {
    drop_point z;
    z.u.lo = z.u.hi = 1;
    z.a = {"0", "0"};
    z.rank = 0;
    r.drops.push_back(z);
  }
  return r;
}

// A generic point of the range other than 0 (its u = e^{a/q} is transcendental).
mpq_rational generic_point(const a_range& r) {
  mpq_rational a;
  if (r.lo && r.hi) a = (*r.lo + *r.hi) / 2;
  else if (r.lo) a = *r.lo + 1;
  else if (r.hi) a = *r.hi - 1;
  else a = 1;
  if (a == 0) a = r.hi ? *r.hi / 2 : mpq_rational(1);
  return a;
}

bool is_single_point(const layer_claim& c) { return c.range.is_point() || !c.algebraic_point.empty(); }

// The counterexample to the claimed relation, or null when the claim holds.
nlohmann::json rank_counterexample(const layer_claim& c, const rank_function& r) {
  const bool point = is_single_point(c);
  const bool generic_present = !point || r.drops.empty();
  if (generic_present && !relation_holds(c.rank_rel, r.ranks.generic, c.rank_value)) {
    const mpq_rational a = point ? *c.range.lo : generic_point(c.range);
    return {{"a", c.algebraic_point.empty() ? rational_string(a) : c.algebraic_point},
            {"rank", r.ranks.generic},
            {"why", "u = e^{a/q} is not a root of the minors' gcd (a transcendental u is a root of no nonzero integer polynomial)"}};
  }
  for (const auto& d : r.drops)
    if (!relation_holds(c.rank_rel, d.rank, c.rank_value))
      return {{"a_enclosure", {d.a.first, d.a.second}}, {"rank", d.rank}, {"why", "a root of the minors' gcd lies in the range"}};
  return nullptr;
}

std::string rank_summary(const layer_claim& c, claim_verdict verdict, const std::string& claim_text, const rank_function& r,
                         const nlohmann::json& counter) {
  const bool point = is_single_point(c);
  std::ostringstream os;
  os << to_string(verdict) << ": " << claim_text << ".\n  rank of the " << to_string(c.object);
  if (point && !r.drops.empty()) {
    os << " at " << c.range_text << " is " << r.drops[0].rank;
  } else {
    os << " is " << r.ranks.generic;
    if (!point) os << " for all a in " << c.range.describe();
    else os << " at " << (c.algebraic_point.empty() ? c.range_text : "a = " + c.algebraic_point);
    if (!r.drops.empty()) {
      os << " except at";
      for (std::size_t i = 0; i < r.drops.size(); ++i)
        os << (i ? ";" : "") << " a* in [" << r.drops[i].a.first << ", " << r.drops[i].a.second << "] where the rank is " << r.drops[i].rank;
    }
  }
  os << "\n";
  if (verdict == claim_verdict::refuted) os << "  counterexample: " << counter.dump() << "\n";
  return os.str();
}

// The upper bound of the rank: the dimensions, or a basis of the kernel over ℚ(u).
nlohmann::json rank_upper_bound(const rank_function& r) {
  const std::size_t dim = static_cast<std::size_t>(std::min(r.family.rows, r.family.cols));
  if (r.ranks.generic == dim) return {{"method", "dimensions"}};
  nlohmann::json ks = nlohmann::json::array();
  for (const auto& v : kernel_basis(r.family)) {
    nlohmann::json vj = nlohmann::json::array();
    for (const auto& p : v) vj.push_back(poly_json(p));
    ks.push_back(vj);
  }
  return {{"method", "kernel"}, {"vectors", ks}};
}

nlohmann::json rank_certificate(const layer_claim& c, const nlohmann::json& claim, claim_verdict verdict, const rank_function& r,
                                const nlohmann::json& counter) {
  nlohmann::json cl = layer_claim_json(c, claim);
  cl["relation"] = relation_text(c.rank_rel);
  cl["value"] = c.rank_value;
  nlohmann::json cert = certificate_header(cl, verdict);
  cert["q"] = r.family.q.str();
  cert["generic_rank"] = r.ranks.generic;
  cert["upper_bound"] = rank_upper_bound(r);
  nlohmann::json ms = nlohmann::json::array();
  for (const auto& [rows, cols] : r.ranks.minors) ms.push_back({{"rows", rows}, {"cols", cols}, {"poly", poly_json(minor_polynomial(r.family, rows, cols))}});
  cert["minors"] = ms;
  cert["gcd"] = poly_json(r.ranks.g);
  if (r.ranks.g.size() > 1) cert["sturm"] = sturm_json(r.ranks.g);
  nlohmann::json dj = nlohmann::json::array();
  for (const auto& d : r.drops) {
    nlohmann::json x = {{"u", {rational_string(d.u.lo), rational_string(d.u.hi)}}, {"a", {d.a.first, d.a.second}}, {"rank", d.rank}};
    if (d.rank > 0 && !d.witness_rows.empty())
      x["witness"] = {{"rows", d.witness_rows}, {"cols", d.witness_cols}, {"poly", poly_json(minor_polynomial(r.family, d.witness_rows, d.witness_cols))}};
    dj.push_back(x);
  }
  cert["drops"] = dj;
  if (verdict == claim_verdict::refuted) cert["counterexample"] = counter;
  return cert;
}

}  // namespace

std::string layer_claim_text(const layer_claim& c) {
  const std::string where = c.algebraic_point.empty() ? c.range_text : "S = " + c.algebraic_point + " * Q K^T";
  if (c.kind == quantity_kind::rank)
    return std::string("rank ") + to_string(c.object) + " " + relation_text(c.rank_rel) + " " + std::to_string(c.rank_value) + " for " + where;
  return std::string("det ") + to_string(c.object) + " " + c.real_rel.describe() + " for " + where;
}

certify_result prove_rank(const layer_claim& c, const nlohmann::json& claim, unsigned max_bits) {
  certify_result res;
  res.report = report_header(claim);
  const std::string claim_text = layer_claim_text(c);
  res.report["claim"] = claim_text;
  const rank_function r = rank_over_range(c, max_bits);
  if (!r.ranks.decided) {
    mark_undecided(res, "UNDECIDED: " + r.ranks.why_undecided + " (precision cap " + std::to_string(max_bits) + " bits)", r.ranks.why_undecided);
    res.report["precision_bits_reached"] = max_bits;
    return res;
  }
  const nlohmann::json counter = rank_counterexample(c, r);
  res.verdict = counter.is_null() ? claim_verdict::certified : claim_verdict::refuted;
  res.summary = rank_summary(c, res.verdict, claim_text, r, counter);
  res.report["verdict"] = to_string(res.verdict);
  res.report["generic_rank"] = r.ranks.generic;
  nlohmann::json dj = nlohmann::json::array();
  for (const auto& d : r.drops) dj.push_back({{"a", {d.a.first, d.a.second}}, {"u", {rational_string(d.u.lo), rational_string(d.u.hi)}}, {"rank", d.rank}});
  res.report["drops"] = dj;
  if (!counter.is_null()) res.report["counterexample"] = counter;
  res.report["summary"] = res.summary;
  res.certificate = rank_certificate(c, claim, res.verdict, r, counter);
  return res;
}

}  // namespace attncert::proofs::detail
