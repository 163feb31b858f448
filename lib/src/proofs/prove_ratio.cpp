// Determinant and output_value claims.  The quantity is a ratio P(u)/R(u) of integer
// polynomials in u = e^{a/q} with R > 0 for u > 0:
//   det(object) = det M(u) / (L^n Π_i D_i(u)),   entry (i, k) = M_ik(u) / (L·D_i(u)).
// A comparison with c = num/den is the sign of H = den·P − num·R over the range, decided
// exactly by analyze_sign (root isolation, one sample per segment).  Proof sketch:
// proofs/P09-parameter-families.md.
#include <sstream>

#include "provers.hpp"

namespace attncert::proofs::detail {

namespace {

struct ratio {
  int_poly numer, denom;  ///< the quantity is numer(u) / denom(u), denom > 0
};

// numer and denom of the claimed entry or determinant.  Errors: an entry outside the matrix, a
// determinant of a non-square matrix.
ratio ratio_polynomials(const layer_claim& c, const poly_family& F) {
  const std::vector<int_poly> Ds = row_normalizers(c.in);
  const mpz_int& L = F.value_scale;
  ratio r;
  if (c.kind == quantity_kind::output_value) {
    if (c.row >= F.rows || c.col >= F.cols)
      fail("/quantity", "entry (" + std::to_string(c.row) + ", " + std::to_string(c.col) + ") is outside the " + std::to_string(F.rows) + "x" +
                            std::to_string(F.cols) + " " + to_string(c.object));
    // entry = M_ik / (L·D_i)
    r.numer = F.at(c.row, c.col);
    r.denom = poly_scale(Ds[static_cast<std::size_t>(c.row)], L);
    return r;
  }
  if (F.rows != F.cols)
    fail("/quantity/object", "the determinant needs a square matrix, this one is " + std::to_string(F.rows) + "x" + std::to_string(F.cols));
  std::vector<long> all(static_cast<std::size_t>(F.rows));
  for (long i = 0; i < F.rows; ++i) all[static_cast<std::size_t>(i)] = i;
  r.numer = minor_polynomial(F, all, all);
  // det = det M / (L^n Π D_i)
  r.denom = {1};
  for (const auto& d : Ds) {
    int_poly t(r.denom.size() + d.size() - 1);
    for (std::size_t i = 0; i < r.denom.size(); ++i)
      for (std::size_t j = 0; j < d.size(); ++j) t[i + j] += r.denom[i] * d[j] * L;
    r.denom = t;
  }
  return r;
}

// H = den(c)·numer − num(c)·denom has the sign of the quantity − c.
int_poly difference_polynomial(const ratio& r, const mpq_rational& c) {
  const mpz_int num = numerator(c), den = denominator(c);
  int_poly H(std::max(r.numer.size(), r.denom.size()));
  for (std::size_t i = 0; i < r.numer.size(); ++i) H[i] += den * r.numer[i];
  for (std::size_t i = 0; i < r.denom.size(); ++i) H[i] -= num * r.denom[i];
  while (!H.empty() && H.back() == 0) H.pop_back();
  return H;
}

// One sign condition "quantity − c  SENSE  0" over the range.
struct condition {
  mpq_rational c;
  std::string sense;  // "=0", "<=0", ">=0"
  int_poly H;
  sign_analysis sa;
  bool holds = false;
  std::optional<std::size_t> violating;  // sample index
};

std::vector<condition> conditions_of(const real_relation& rel) {
  std::vector<condition> conds;
  if (rel.text == "within") {
    conds.push_back({rel.value + rel.tolerance, "<=0", {}, {}, false, {}});
    conds.push_back({rel.value - rel.tolerance, ">=0", {}, {}, false, {}});
  } else {
    conds.push_back({rel.value, rel.text == "=" ? "=0" : rel.text == "<=" ? "<=0" : ">=0", {}, {}, false, {}});
  }
  return conds;
}

// Records whether the decided sign analysis of `cond` satisfies its sense, and the first
// violating sample.
void judge(condition& cond) {
  cond.holds = true;
  for (std::size_t k = 0; k < cond.sa.signs.size(); ++k) {
    const int sg = cond.sa.signs[k];
    const bool bad = cond.sense == "=0" ? sg != 0 : cond.sense == "<=0" ? sg > 0 : sg < 0;
    if (bad && !cond.violating) {
      cond.violating = k;
      cond.holds = false;
    }
  }
}

nlohmann::json counterexample_of(const std::vector<condition>& conds, const a_range& range, const mpz_int& q) {
  nlohmann::json counter;
  for (const auto& c : conds)
    if (!c.holds) {
      const mpq_rational& s = c.sa.samples[*c.violating];
      if (range.is_point()) counter = {{"a", rational_string(*range.lo)}};
      else counter = {{"a_enclosure", nlohmann::json(a_enclosure({s, s}, q))}, {"u", rational_string(s)}};
      counter["sign_of_quantity_minus_value"] = c.sa.signs[*c.violating];
      counter["value"] = c.c.str();
      break;
    }
  return counter;
}

std::string ratio_summary(claim_verdict verdict, const std::string& claim_text, bool entry, const std::vector<condition>& conds,
                          const nlohmann::json& counter) {
  std::ostringstream os;
  os << to_string(verdict) << ": " << claim_text << ".\n";
  for (const auto& c : conds) {
    os << "  " << (entry ? "value" : "det") << " - (" << c.c.str() << "): ";
    if (c.sa.identically_zero) os << "identically zero";
    else {
      os << c.sa.roots.size() << " zero(s) in the range; sign on the " << c.sa.signs.size() << " segment(s):";
      for (int sg : c.sa.signs) os << " " << (sg > 0 ? "+" : sg < 0 ? "-" : "0");
    }
    os << "\n";
  }
  if (verdict == claim_verdict::refuted) os << "  counterexample: " << counter.dump() << "\n";
  return os.str();
}

nlohmann::json ratio_certificate(const layer_claim& c, const nlohmann::json& claim, claim_verdict verdict, const poly_family& F,
                                 const ratio& r, const std::vector<condition>& conds, const nlohmann::json& counter) {
  const bool entry = c.kind == quantity_kind::output_value;
  nlohmann::json cl = layer_claim_json(c, claim);
  cl["quantity"] = entry ? "output_value" : "determinant";
  if (entry) {
    cl["row"] = c.row;
    cl["col"] = c.col;
  }
  cl["relation"] = c.real_rel.text;
  cl["value"] = c.real_rel.value.str();
  if (c.real_rel.text == "within") cl["tolerance"] = c.real_rel.tolerance.str();
  nlohmann::json cert = certificate_header(cl, verdict);
  cert["q"] = F.q.str();
  nlohmann::json cj = nlohmann::json::array();
  for (const auto& x : conds) {
    nlohmann::json e = {{"value", x.c.str()}, {"sense", x.sense}, {"H", poly_json(x.H)}};
    if (x.sa.sqfree.size() > 1 && !c.range.is_point()) e["sturm"] = sturm_json(x.sa.sqfree);  // at a point the checker needs no Sturm sequence
    nlohmann::json roots = nlohmann::json::array(), samples = nlohmann::json::array();
    for (const auto& root : x.sa.roots) roots.push_back({rational_string(root.lo), rational_string(root.hi)});
    for (std::size_t k = 0; k < x.sa.samples.size(); ++k) samples.push_back({{"u", rational_string(x.sa.samples[k])}, {"sign", x.sa.signs[k]}});
    e["roots"] = roots;
    e["samples"] = samples;
    cj.push_back(e);
  }
  cert["ratio"] = {{"kind", entry ? "entry" : "determinant"}, {"P", poly_json(r.numer)}, {"R", poly_json(r.denom)}, {"conditions", cj}};
  if (verdict == claim_verdict::refuted) cert["counterexample"] = counter;
  return cert;
}

}  // namespace

certify_result prove_ratio(const layer_claim& c, const nlohmann::json& claim, unsigned max_bits) {
  const bool entry = c.kind == quantity_kind::output_value;
  certify_result res;
  res.report = report_header(claim);
  const std::string what = entry ? std::string(to_string(c.object)) + "[" + std::to_string(c.row) + "][" + std::to_string(c.col) + "]"
                                 : std::string("det ") + to_string(c.object);
  const std::string claim_text = what + " " + c.real_rel.describe() + " for " + c.range_text;
  res.report["claim"] = claim_text;
  if (c.object == layer_object::scores) fail("/quantity/object", "determinants and values of the scores a*S0 are not supported yet");
  if (!c.algebraic_point.empty()) {
    const std::string summary = "UNDECIDED: determinant claims at a = 1/sqrt(d) (irrational) are not supported; use a rational scale\n";
    return mark_undecided(res, summary, summary);
  }
  const poly_family F = build_claim_family(c.in);
  const ratio r = ratio_polynomials(c, F);
  std::vector<condition> conds = conditions_of(c.real_rel);
  bool ok = true;
  for (auto& cond : conds) {
    cond.H = difference_polynomial(r, cond.c);
    cond.sa = analyze_sign(cond.H, c.range, F.q, max_bits);
    if (!cond.sa.decided) {
      mark_undecided(res, "UNDECIDED: " + cond.sa.why_undecided + "\n", cond.sa.why_undecided);
      res.report["precision_bits_reached"] = max_bits;
      return res;
    }
    judge(cond);
    ok = ok && cond.holds;
  }
  res.verdict = ok ? claim_verdict::certified : claim_verdict::refuted;
  const nlohmann::json counter = ok ? nlohmann::json() : counterexample_of(conds, c.range, F.q);
  res.summary = ratio_summary(res.verdict, claim_text, entry, conds, counter);
  res.report["verdict"] = to_string(res.verdict);
  if (!ok) res.report["counterexample"] = counter;
  res.report["summary"] = res.summary;
  res.certificate = ratio_certificate(c, claim, res.verdict, F, r, conds, counter);
  return res;
}

}  // namespace attncert::proofs::detail
