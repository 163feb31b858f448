// Claim files and the prover behind `attncert certify`: see attncert/proofs/claim.hpp.
#include "attncert/proofs/claim.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "attncert/io/bounded_input.hpp"
#include "attncert/io/matrix_input.hpp"
#include "attncert/verify/certificate.hpp"
#include "attncert/number/traits.hpp"
#include "attncert/rank/family.hpp"
#include "attncert/drift/recipe.hpp"
#include "attncert/rank/policy.hpp"
#include "attncert/linalg/spectra.hpp"

#include <flint/fmpq.h>
#include <flint/fmpq_mat.h>
#include <flint/fmpq_poly.h>

namespace attncert::proofs {

const char* to_string(claim_verdict v) {
  switch (v) {
    case claim_verdict::certified: return "CERTIFIED";
    case claim_verdict::refuted: return "REFUTED";
    default: return "UNDECIDED";
  }
}

namespace {

[[noreturn]] void fail(const std::string& ptr, const std::string& why) { throw input_error(ptr + ": " + why); }

const nlohmann::json* get(const nlohmann::json& j, const std::string& key) {
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

mpq_rational exact_number(const nlohmann::json& v, const std::string& ptr) {
  if (v.is_number_integer()) return mpq_rational(v.dump());
  if (v.is_string()) {
    try {
      return number_traits<mpq_rational>::from_string(v.get<std::string>());
    } catch (const std::exception& e) {
      fail(ptr, std::string("not a number: ") + e.what());  // e.g. beyond the digit or exponent limit
    }
  }
  if (v.is_number_float()) fail(ptr, "internal: float not preserved as text");
  fail(ptr, "not a number");
}

matrix<mpq_rational> read_matrix(const nlohmann::json& v, const std::string& ptr, const std::string& base) {
  if (v.is_string()) {
    std::filesystem::path p(v.get<std::string>());
    if (p.is_relative()) p = std::filesystem::path(base) / p;
    try {
      return io::read_exact_matrix(p.string(), ptr);
    } catch (const input_error& e) {
      throw input_error(e.what());
    }
  }
  if (!v.is_array() || v.empty()) fail(ptr, "expected a non-empty 2-D array or a .npy/.json path");
  const std::size_t cols = v[0].is_array() ? v[0].size() : 0;
  if (cols == 0) fail(ptr + "/0", "expected a non-empty row");
  matrix<mpq_rational> m(static_cast<Eigen::Index>(v.size()), static_cast<Eigen::Index>(cols));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string pi = ptr + "/" + std::to_string(i);
    if (!v[i].is_array()) fail(pi, "expected a row (array)");
    if (v[i].size() != cols) fail(pi, "row has " + std::to_string(v[i].size()) + " entries, row 0 has " + std::to_string(cols));
    for (std::size_t j = 0; j < cols; ++j)
      m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = exact_number(v[i][j], pi + "/" + std::to_string(j));
  }
  return m;
}

nlohmann::json matrix_json(const matrix<mpq_rational>& m) {
  nlohmann::json a = nlohmann::json::array();
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    nlohmann::json r = nlohmann::json::array();
    for (Eigen::Index j = 0; j < m.cols(); ++j) r.push_back(m(i, j).str());
    a.push_back(r);
  }
  return a;
}

nlohmann::json poly_json(const int_poly& p) { return to_strings(p); }

enum class rel { eq, le, ge };
rel parse_relation(const nlohmann::json& j) {
  if (!j.is_string()) fail("/relation", "expected one of \"=\", \"<=\", \">=\"");
  const std::string s = j.get<std::string>();
  if (s == "=" || s == "==") return rel::eq;
  if (s == "<=" || s == "≤") return rel::le;
  if (s == ">=" || s == "≥") return rel::ge;
  if (s == "within") fail("/relation", "'within' applies to real-valued quantities, not to ranks");
  fail("/relation", "unknown relation '" + s + "' (expected =, <=, >=)");
}
const char* rel_text(rel r) { return r == rel::eq ? "=" : r == rel::le ? "<=" : ">="; }
bool holds(rel r, std::size_t lhs, std::size_t v) {
  return r == rel::eq ? lhs == v : r == rel::le ? lhs <= v : lhs >= v;
}

certify_result undecided_result(const nlohmann::json& claim, const std::string& why) {
  certify_result res;
  res.summary = "UNDECIDED: " + why + "\n";
  res.report = {{"tool", "attncert"}, {"version", ATTNCERT_VERSION}, {"verdict", "UNDECIDED"}, {"why", why}, {"summary", res.summary}};
  if (claim.contains("title")) res.report["title"] = claim["title"];
  return res;
}

struct det_relation {
  std::string text;              ///< "=", "<=", ">=", "within"
  mpq_rational value, tolerance;
};
det_relation parse_det_relation(const nlohmann::json& r, const nlohmann::json& v, const nlohmann::json* tol) {
  det_relation d;
  if (!r.is_string()) fail("/relation", "expected one of \"=\", \"<=\", \">=\", \"within\"");
  d.text = r.get<std::string>();
  if (d.text == "==") d.text = "=";
  if (d.text == "≤") d.text = "<=";
  if (d.text == "≥") d.text = ">=";
  if (d.text != "=" && d.text != "<=" && d.text != ">=" && d.text != "within") fail("/relation", "unknown relation '" + d.text + "'");
  d.value = exact_number(v, "/value");
  if (d.text == "within") {
    if (!tol) fail("/tolerance", "missing (required by \"within\")");
    d.tolerance = exact_number(*tol, "/tolerance");
    if (d.tolerance < 0) fail("/tolerance", "must be >= 0");
  } else if (tol) {
    fail("/tolerance", "only with \"within\"");
  }
  return d;
}

// A rational point of the range other than 0 (its u = e^{a/q} is transcendental).
mpq_rational generic_point(const a_range& r) {
  mpq_rational a;
  if (r.lo && r.hi) a = (*r.lo + *r.hi) / 2;
  else if (r.lo) a = *r.lo + 1;
  else if (r.hi) a = *r.hi - 1;
  else a = 1;
  if (a == 0) a = r.hi ? *r.hi / 2 : mpq_rational(1);
  return a;
}

// Builds the DOM like nlohmann's own SAX DOM parser, but keeps floats as their text.
class exact_dom : public nlohmann::json_sax<nlohmann::json> {
 public:
  nlohmann::json root;
  std::string error;
  bool null() override { return put(nullptr); }
  bool boolean(bool v) override { return put(v); }
  bool number_integer(number_integer_t v) override { return put(v); }
  bool number_unsigned(number_unsigned_t v) override { return put(v); }
  bool number_float(number_float_t, const string_t& s) override { return put(s); }
  bool string(string_t& s) override { return put(s); }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override {
    if (too_deep()) return false;
    nlohmann::json* p = place(nlohmann::json::object());
    stack_.push_back(p);
    return true;
  }
  bool key(string_t& k) override {
    key_ = k;
    return true;
  }
  bool end_object() override {
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (too_deep()) return false;
    nlohmann::json* p = place(nlohmann::json::array());
    stack_.push_back(p);
    return true;
  }
  bool end_array() override {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& ex) override {
    error = "malformed JSON at byte " + std::to_string(pos) + ": " + one_line(std::string(ex.what()), 160);
    return false;
  }

 private:
  std::vector<nlohmann::json*> stack_;
  // Rejects a container nested deeper than io::max_json_depth before building it: the DOM
  // (copied and destroyed recursively later) stays shallow whatever the input.
  bool too_deep() {
    if (stack_.size() < io::max_json_depth) return false;
    error = "JSON nested deeper than " + std::to_string(io::max_json_depth) + " levels";
    return false;
  }
  std::string key_;
  nlohmann::json* place(nlohmann::json v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    nlohmann::json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    top[key_] = std::move(v);
    return &top[key_];
  }
  bool put(nlohmann::json v) {
    place(std::move(v));
    return true;
  }
};

nlohmann::json claim_objects_json(const family_input& in, layer_object object, const a_range& range, const std::string& algebraic_point,
                                  const nlohmann::json& claim) {
  nlohmann::json cl;
  if (const auto* t = get(claim, "title")) cl["title"] = *t;
  cl["S0"] = matrix_json(in.S0);
  if (in.M.type() == mask::kind::none) cl["mask"] = "none";
  else if (in.M.type() == mask::kind::causal) cl["mask"] = "causal";
  else {
    nlohmann::json mm = nlohmann::json::array();
    for (Eigen::Index i = 0; i < in.S0.rows(); ++i) {
      nlohmann::json r = nlohmann::json::array();
      for (Eigen::Index j = 0; j < in.S0.cols(); ++j) r.push_back(in.M.allows(i, j) ? 1 : 0);
      mm.push_back(r);
    }
    cl["mask"] = mm;
  }
  if (in.V) cl["V"] = matrix_json(*in.V);
  if (in.X) cl["X"] = matrix_json(*in.X);
  cl["object"] = to_string(object);
  if (!algebraic_point.empty()) cl["point_algebraic_nonzero"] = algebraic_point;
  else if (range.is_point()) cl["point"] = rational_string(*range.lo);
  else cl["range"] = range.describe();
  return cl;
}


// ---- determinant claims: det(object) = P(u)/R(u) with R = Π D_i > 0 on u > 0 ----------
certify_result certify_ratio(const nlohmann::json& claim, const family_input& in, layer_object object, const a_range& range,
                             const std::string& range_text, const std::string& algebraic_point, const det_relation& drel, unsigned max_bits,
                             long entry_row, long entry_col) {
  const bool entry = entry_row >= 0;
  certify_result res;
  nlohmann::json& rep = res.report;
  rep["tool"] = "attncert";
  rep["version"] = ATTNCERT_VERSION;
  if (const auto* t = get(claim, "title")) rep["title"] = *t;
  const std::string what = entry ? std::string(to_string(object)) + "[" + std::to_string(entry_row) + "][" + std::to_string(entry_col) + "]"
                                 : std::string("det ") + to_string(object);
  const std::string claim_text = what + " " + drel.text + " " + drel.value.str() +
                                 (drel.text == "within" ? " +- " + drel.tolerance.str() : std::string()) + " for " + range_text;
  rep["claim"] = claim_text;
  if (object == layer_object::scores) fail("/quantity/object", "determinants and values of the scores a*S0 are not supported yet");
  if (!algebraic_point.empty()) {
    res.summary = "UNDECIDED: determinant claims at a = 1/sqrt(d) (irrational) are not supported; use a rational scale\n";
    rep["verdict"] = "UNDECIDED";
    rep["why"] = res.summary;
    return res;
  }
  poly_family F;
  try {
    F = build_family(in);
  } catch (const family_too_large& e) {
    return undecided_result(claim, e.what());
  } catch (const input_error& e) {
    fail("/objects", e.what());
  }
  int_poly P, R;
  const std::vector<int_poly> Ds = row_normalizers(in);
  const mpz_int& L = F.value_scale;
  if (entry) {
    if (entry_row >= F.rows || entry_col >= F.cols)
      fail("/quantity", "entry (" + std::to_string(entry_row) + ", " + std::to_string(entry_col) + ") is outside the " + std::to_string(F.rows) + "x" +
                            std::to_string(F.cols) + " " + to_string(object));
    // entry = M_ik / (L·D_i)
    P = F.at(entry_row, entry_col);
    R = Ds[static_cast<std::size_t>(entry_row)];
    for (auto& c : R) c *= L;
  } else {
    if (F.rows != F.cols) fail("/quantity/object", "the determinant needs a square matrix, this one is " + std::to_string(F.rows) + "x" + std::to_string(F.cols));
    std::vector<long> all(static_cast<std::size_t>(F.rows));
    for (long i = 0; i < F.rows; ++i) all[static_cast<std::size_t>(i)] = i;
    P = minor_polynomial(F, all, all);
    // det = det M / (L^n Π D_i)
    R = {1};
    for (const auto& d : Ds) {
      int_poly t(R.size() + d.size() - 1);
      for (std::size_t i = 0; i < R.size(); ++i)
        for (std::size_t j = 0; j < d.size(); ++j) t[i + j] += R[i] * d[j] * L;
      R = t;
    }
  }
  // H = den(c)·P − num(c)·R has the sign of det − c.
  auto make_H = [&](const mpq_rational& c) {
    const mpz_int num = numerator(c), den = denominator(c);
    int_poly H(std::max(P.size(), R.size()));
    for (std::size_t i = 0; i < P.size(); ++i) H[i] += den * P[i];
    for (std::size_t i = 0; i < R.size(); ++i) H[i] -= num * R[i];
    while (!H.empty() && H.back() == 0) H.pop_back();
    return H;
  };
  struct condition {
    mpq_rational c;
    std::string sense;  // "=0", "<=0", ">=0"
    int_poly H;
    sign_analysis sa;
    bool holds = false;
    std::optional<std::size_t> violating;  // sample index
  };
  std::vector<condition> conds;
  if (drel.text == "within") {
    conds.push_back({drel.value + drel.tolerance, "<=0", {}, {}, false, {}});
    conds.push_back({drel.value - drel.tolerance, ">=0", {}, {}, false, {}});
  } else {
    conds.push_back({drel.value, drel.text == "=" ? "=0" : drel.text == "<=" ? "<=0" : ">=0", {}, {}, false, {}});
  }
  bool ok = true;
  for (auto& c : conds) {
    c.H = make_H(c.c);
    c.sa = analyze_sign(c.H, range, F.q, max_bits);
    if (!c.sa.decided) {
      res.summary = "UNDECIDED: " + c.sa.why_undecided + "\n";
      rep["verdict"] = "UNDECIDED";
      rep["why"] = c.sa.why_undecided;
      rep["precision_bits_reached"] = max_bits;
      return res;
    }
    c.holds = true;
    for (std::size_t k = 0; k < c.sa.signs.size(); ++k) {
      const int sg = c.sa.signs[k];
      const bool bad = c.sense == "=0" ? sg != 0 : c.sense == "<=0" ? sg > 0 : sg < 0;
      if (bad && !c.violating) { c.violating = k; c.holds = false; }
    }
    ok = ok && c.holds;
  }
  res.verdict = ok ? claim_verdict::certified : claim_verdict::refuted;
  nlohmann::json counter;
  for (const auto& c : conds)
    if (!c.holds) {
      const mpq_rational& s = c.sa.samples[*c.violating];
      if (range.is_point()) counter = {{"a", rational_string(*range.lo)}};
      else counter = {{"a_enclosure", nlohmann::json(a_enclosure({s, s}, F.q))}, {"u", rational_string(s)}};
      counter["sign_of_quantity_minus_value"] = c.sa.signs[*c.violating];
      counter["value"] = c.c.str();
      break;
    }
  std::ostringstream os;
  os << to_string(res.verdict) << ": " << claim_text << ".\n";
  for (const auto& c : conds) {
    os << "  " << (entry ? "value" : "det") << " - (" << c.c.str() << "): ";
    if (c.sa.identically_zero) os << "identically zero";
    else {
      os << c.sa.roots.size() << " zero(s) in the range; sign on the " << c.sa.signs.size() << " segment(s):";
      for (int sg : c.sa.signs) os << " " << (sg > 0 ? "+" : sg < 0 ? "-" : "0");
    }
    os << "\n";
  }
  if (!ok) os << "  counterexample: " << counter.dump() << "\n";
  res.summary = os.str();
  rep["verdict"] = to_string(res.verdict);
  if (!ok) rep["counterexample"] = counter;
  rep["summary"] = res.summary;
  nlohmann::json c = {{"format", "attncert-certificate/1"}, {"tool", "attncert"}, {"version", ATTNCERT_VERSION}};
  nlohmann::json cl = claim_objects_json(in, object, range, algebraic_point, claim);
  cl["quantity"] = entry ? "output_value" : "determinant";
  if (entry) {
    cl["row"] = entry_row;
    cl["col"] = entry_col;
  }
  cl["relation"] = drel.text;
  cl["value"] = drel.value.str();
  if (drel.text == "within") cl["tolerance"] = drel.tolerance.str();
  c["claim"] = cl;
  c["verdict"] = to_string(res.verdict);
  c["q"] = F.q.str();
  nlohmann::json cj = nlohmann::json::array();
  for (const auto& x : conds) {
    nlohmann::json e = {{"value", x.c.str()}, {"sense", x.sense}, {"H", poly_json(x.H)}};
    if (x.sa.sqfree.size() > 1 && !range.is_point()) {  // at a point the checker needs no Sturm sequence
      nlohmann::json st = nlohmann::json::array();
      for (const auto& p : sturm_sequence(x.sa.sqfree)) st.push_back(poly_json(p));
      e["sturm"] = st;
    }
    nlohmann::json roots = nlohmann::json::array(), samples = nlohmann::json::array();
    for (const auto& r : x.sa.roots) roots.push_back({rational_string(r.lo), rational_string(r.hi)});
    for (std::size_t k = 0; k < x.sa.samples.size(); ++k) samples.push_back({{"u", rational_string(x.sa.samples[k])}, {"sign", x.sa.signs[k]}});
    e["roots"] = roots;
    e["samples"] = samples;
    cj.push_back(e);
  }
  c["ratio"] = {{"kind", entry ? "entry" : "determinant"}, {"P", poly_json(P)}, {"R", poly_json(R)}, {"conditions", cj}};
  if (!ok) c["counterexample"] = counter;
  res.certificate = c;
  return res;
}


// ---- singular values at a point: σ_k ≥ c ⇔ at least k eigenvalues of OᵀO are ≥ c² --------
int_poly padd(const int_poly& a, const int_poly& b) {
  int_poly c(std::max(a.size(), b.size()));
  for (std::size_t i = 0; i < a.size(); ++i) c[i] += a[i];
  for (std::size_t i = 0; i < b.size(); ++i) c[i] += b[i];
  while (!c.empty() && c.back() == 0) c.pop_back();
  return c;
}
int_poly pmul(const int_poly& a, const int_poly& b) {
  if (a.empty() || b.empty()) return {};
  int_poly c(a.size() + b.size() - 1);
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < b.size(); ++j) c[i + j] += a[i] * b[j];
  while (!c.empty() && c.back() == 0) c.pop_back();
  return c;
}
int_poly pneg(int_poly a) {
  for (auto& x : a) x = -x;
  return a;
}

// Characteristic polynomial det(λI − T) of a square matrix over ℤ[u] by Berkowitz's
// division-free algorithm; coefficients of λ^0 .. λ^n.
std::vector<int_poly> charpoly(const std::vector<std::vector<int_poly>>& T) {
  const std::size_t n = T.size();
  std::vector<int_poly> chi = {int_poly{1}};  // descending powers of λ
  for (std::size_t r = 0; r < n; ++r) {
    std::vector<int_poly> t = {int_poly{1}, pneg(T[r][r])};
    // t_{k+2} = −R A_r^k C, R = T[r][0..r), C = T[0..r)[r]
    std::vector<int_poly> v(r);
    for (std::size_t i = 0; i < r; ++i) v[i] = T[i][r];
    for (std::size_t k = 0; k < r; ++k) {
      int_poly rc;
      for (std::size_t i = 0; i < r; ++i) rc = padd(rc, pmul(T[r][i], v[i]));
      t.push_back(pneg(rc));
      std::vector<int_poly> w(r);
      for (std::size_t i = 0; i < r; ++i)
        for (std::size_t j = 0; j < r; ++j) w[i] = padd(w[i], pmul(T[i][j], v[j]));
      v = w;
    }
    std::vector<int_poly> next(r + 2);
    for (std::size_t i = 0; i < r + 2; ++i)
      for (std::size_t j = 0; j <= std::min(i, r); ++j)
        if (i - j < t.size()) next[i] = padd(next[i], pmul(t[i - j], chi[j]));
    chi = next;
  }
  return std::vector<int_poly>(chi.rbegin(), chi.rend());
}

certify_result certify_singular_value(const nlohmann::json& claim, const family_input& in, layer_object object, const a_range& range,
                                      const std::string& range_text, const std::string& algebraic_point, const det_relation& drel,
                                      unsigned max_bits, long index) {
  certify_result res;
  nlohmann::json& rep = res.report;
  rep["tool"] = "attncert";
  rep["version"] = ATTNCERT_VERSION;
  if (const auto* t = get(claim, "title")) rep["title"] = *t;
  const std::string claim_text = "sigma_" + std::to_string(index) + "(" + to_string(object) + ") " + drel.text + " " + drel.value.str() +
                                 (drel.text == "within" ? " +- " + drel.tolerance.str() : std::string()) + " for " + range_text;
  rep["claim"] = claim_text;
  if (object == layer_object::scores) fail("/quantity/object", "singular values of the scores are not supported yet");
  auto undecided = [&](const std::string& why) {
    res.summary = "UNDECIDED: " + why + "\n";
    rep["verdict"] = "UNDECIDED";
    rep["why"] = why;
    return res;
  };
  if (!algebraic_point.empty()) return undecided("singular-value claims at a = 1/sqrt(d) (irrational) are not supported; use a rational scale");
  if (!range.is_point()) return undecided("singular-value claims over a parameter range are not supported yet; give a point (\"at\")");
  poly_family F;
  try {
    F = build_family(in);
  } catch (const family_too_large& e) {
    return undecided_result(claim, e.what());
  } catch (const input_error& e) {
    fail("/objects", e.what());
  }
  if (index > std::min(F.rows, F.cols)) fail("/quantity/index", "the matrix has only " + std::to_string(std::min(F.rows, F.cols)) + " singular values");
  if (F.cols > 8) fail("/quantity/object", "singular values are supported for at most 8 columns");
  // O = W M with W = diag(1/(L D_i)); ρ OᵀO = Mᵀ diag(Π_{l≠i} (L D_l)²) M =: B (polynomial).
  const std::vector<int_poly> Ds = row_normalizers(in);
  std::vector<int_poly> LD;
  for (const auto& d : Ds) {
    int_poly x = d;
    for (auto& c : x) c *= F.value_scale;
    LD.push_back(x);
  }
  int_poly rho = {1};
  for (const auto& x : LD) rho = pmul(rho, pmul(x, x));
  std::vector<int_poly> wt(LD.size());
  for (std::size_t i = 0; i < LD.size(); ++i) {
    int_poly w = {1};
    for (std::size_t l = 0; l < LD.size(); ++l)
      if (l != i) w = pmul(w, pmul(LD[l], LD[l]));
    wt[i] = w;
  }
  const std::size_t n = static_cast<std::size_t>(F.cols);
  std::vector<std::vector<int_poly>> B(n, std::vector<int_poly>(n));
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = a; b < n; ++b) {
      int_poly acc;
      for (Eigen::Index i = 0; i < F.rows; ++i)
        acc = padd(acc, pmul(wt[static_cast<std::size_t>(i)], pmul(F.at(i, static_cast<Eigen::Index>(a)), F.at(i, static_cast<Eigen::Index>(b)))));
      B[a][b] = B[b][a] = acc;
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
  std::vector<condition> conds;
  auto add = [&](const mpq_rational& v, const char* sense) {
    condition c;
    c.c = v;
    c.sense = sense;
    conds.push_back(c);
  };
  if (drel.text == "=" || drel.text == ">=") add(drel.value, ">=");
  if (drel.text == "=" || drel.text == "<=") add(drel.value, "<=");
  if (drel.text == "within") {
    add(drel.value - drel.tolerance, ">=");
    add(drel.value + drel.tolerance, "<=");
  }
  bool ok = true;
  for (auto& c : conds) {
    if (c.sense == ">=" && c.c <= 0) {
      c.trivial = c.holds = true;  // σ_k ≥ 0 ≥ c
      continue;
    }
    if (c.sense == "<=" && c.c < 0) {
      c.trivial = true;  // σ_k ≥ 0 > c
      c.holds = false;
      ok = false;
      continue;
    }
    const mpz_int num = numerator(c.c), den = denominator(c.c);
    std::vector<std::vector<int_poly>> T = B;
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = 0; b < n; ++b)
        for (auto& x : T[a][b]) x *= den * den;
      int_poly r = rho;
      for (auto& x : r) x *= num * num;
      T[a][a] = padd(T[a][a], pneg(r));
    }
    c.chi = charpoly(T);
    int last = 0;
    bool seen_nonzero = false;
    for (std::size_t j = 0; j < c.chi.size(); ++j) {
      c.signs.push_back(analyze_sign(c.chi[j], range, F.q, max_bits));
      if (!c.signs.back().decided) return undecided(c.signs.back().why_undecided);
      const int sg = c.signs.back().identically_zero ? 0 : c.signs.back().signs[0];
      if (sg == 0) {
        if (!seen_nonzero) ++c.zero;
        continue;
      }
      seen_nonzero = true;
      if (last != 0 && sg != last) ++c.positive;
      last = sg;
    }
    // the eigenvalues of the symmetric T are real, so Descartes' count is exact
    c.holds = c.sense == ">=" ? c.positive + c.zero >= index : c.positive <= index - 1;
    ok = ok && c.holds;
  }
  res.verdict = ok ? claim_verdict::certified : claim_verdict::refuted;
  std::ostringstream os;
  os << to_string(res.verdict) << ": " << claim_text << ".\n";
  for (const auto& c : conds) {
    os << "  sigma_" << index << " " << c.sense << " " << c.c.str() << ": ";
    if (c.trivial) os << (c.holds ? "trivially true (singular values are >= 0)" : "false (singular values are >= 0)");
    else os << c.positive << " eigenvalue(s) of O^T O above c^2, " << c.zero << " equal to c^2 (Descartes on the exact characteristic polynomial)";
    os << "\n";
  }
  res.summary = os.str();
  rep["verdict"] = to_string(res.verdict);
  rep["summary"] = res.summary;
  if (!ok) rep["counterexample"] = {{"a", rational_string(*range.lo)}};
  nlohmann::json cert = {{"format", "attncert-certificate/1"}, {"tool", "attncert"}, {"version", ATTNCERT_VERSION}};
  nlohmann::json cl = claim_objects_json(in, object, range, algebraic_point, claim);
  cl["quantity"] = "singular_value";
  cl["index"] = index;
  cl["relation"] = drel.text;
  cl["value"] = drel.value.str();
  if (drel.text == "within") cl["tolerance"] = drel.tolerance.str();
  cert["claim"] = cl;
  cert["verdict"] = to_string(res.verdict);
  cert["q"] = F.q.str();
  nlohmann::json cj = nlohmann::json::array();
  for (const auto& c : conds) {
    nlohmann::json e = {{"value", c.c.str()}, {"sense", c.sense}, {"trivial", c.trivial}};
    if (!c.trivial) {
      nlohmann::json co = nlohmann::json::array();
      for (std::size_t j = 0; j < c.chi.size(); ++j) {
        const auto& sa = c.signs[j];
        nlohmann::json x = {{"poly", poly_json(c.chi[j])}};
        if (!sa.identically_zero) x["sample"] = {{"u", rational_string(sa.samples[0])}, {"sign", sa.signs[0]}};
        co.push_back(x);
      }
      e["charpoly"] = co;
      e["positive"] = c.positive;
      e["zero"] = c.zero;
    }
    cj.push_back(e);
  }
  cert["singular_value"] = {{"B", "rho O^T O = M^T diag(prod_{l != i} (L D_l)^2) M"}, {"conditions", cj}};
  if (!ok) cert["counterexample"] = rep["counterexample"];
  res.certificate = cert;
  return res;
}


// ---- the output-error bound (P04) at a point --------------------------------------------
// ‖((Â − A)V)_i‖₂ ≤ ‖Â_i − A_i‖₁ · max_j ‖v_j‖₂ with A = softmax(a S0), Â = softmax(a Ŝ0).
// With one u = e^{a/q} for both (q over both), row i of Â − A is δ_j(u)/(D_i D̂_i), δ_j =
// N̂_j D_i − N_j D̂_i; the claim ⇔ G = L² μ_num (Σ_j s_j δ_j)² − μ_den Σ_k W_k² ≥ 0 at u₀, with
// s_j = sign δ_j(u₀), W_k = Σ_j δ_j L V_jk, μ = max_j ‖v_j‖².
certify_result certify_output_bound(const nlohmann::json& claim, const std::string& base_dir, unsigned max_bits) {
  const nlohmann::json& q = claim["quantity"];
  for (auto it = q.begin(); it != q.end(); ++it)
    if (it.key() != "kind" && it.key() != "row") fail("/quantity/" + it.key(), "unknown key (output_bound takes row)");
  const auto* rj = get(q, "row");
  if (!rj || !rj->is_number_integer() || rj->get<long>() < 0) fail("/quantity/row", "expected a non-negative integer (0-based)");
  const long row = rj->get<long>();
  const auto* relj = get(claim, "relation");
  if (!relj || !relj->is_string() || (relj->get<std::string>() != "<=" && relj->get<std::string>() != "≤"))
    fail("/relation", "output_bound claims are '<=' (the error is at most the bound)");
  const auto* valj = get(claim, "value");
  if (!valj || !valj->is_string() || valj->get<std::string>() != "bound")
    fail("/value", "for output_bound the value is \"bound\": ||A_hat_i - A_i||_1 * max_j ||v_j||_2");
  if (get(claim, "tolerance")) fail("/tolerance", "not used by output_bound");
  const nlohmann::json& objects = claim["objects"];
  for (auto it = objects.begin(); it != objects.end(); ++it)
    if (it.key() != "S" && it.key() != "S_hat" && it.key() != "V" && it.key() != "mask")
      fail("/objects/" + it.key(), "output_bound takes S, S_hat, V and an optional mask");
  const auto* Sj = get(objects, "S");
  const auto* Hj = get(objects, "S_hat");
  const auto* Vj = get(objects, "V");
  if (!Sj) fail("/objects/S", "missing");
  if (!Hj) fail("/objects/S_hat", "missing (the approximate scores)");
  if (!Vj) fail("/objects/V", "missing");
  const matrix<mpq_rational> S0 = read_matrix(*Sj, "/objects/S", base_dir), H0 = read_matrix(*Hj, "/objects/S_hat", base_dir),
                             V = read_matrix(*Vj, "/objects/V", base_dir);
  if (H0.rows() != S0.rows() || H0.cols() != S0.cols()) fail("/objects/S_hat", "must have the shape of S");
  if (V.rows() != S0.cols()) fail("/objects/V", "needs one row per key");
  if (row >= S0.rows()) fail("/quantity/row", "outside the matrix");
  mask M = mask::none();
  if (const auto* mj = get(objects, "mask")) {
    if (mj->is_string() && mj->get<std::string>() == "causal") M = mask::causal();
    else if (!(mj->is_string() && mj->get<std::string>() == "none")) fail("/objects/mask", "output_bound takes \"none\" or \"causal\"");
  }
  a_range range;
  range.lo = range.hi = mpq_rational(1);
  range.lo_open = range.hi_open = false;
  if (const auto* fam = get(claim, "family")) {
    if (get(*fam, "range")) {
      certify_result res = undecided_result(claim, "output_bound claims over a parameter range are not supported yet; give a point (\"at\")");
      return res;
    }
    const auto* aj = get(*fam, "at");
    if (!aj) fail("/family", "expected {\"at\": a}");
    range.lo = range.hi = exact_number(*aj, "/family/at");
  }
  const mpq_rational a0 = *range.lo;
  // q over both score matrices on the support; common row shift m_i
  mpz_int qd = 1;
  for (Eigen::Index j = 0; j < S0.cols(); ++j)
    if (M.allows(row, j)) {
      qd = boost::multiprecision::lcm(qd, denominator(S0(row, j)));
      qd = boost::multiprecision::lcm(qd, denominator(H0(row, j)));
    }
  std::vector<long> e, eh;
  std::vector<bool> sup;
  mpz_int lo = 0;
  bool any = false;
  for (Eigen::Index j = 0; j < S0.cols(); ++j) {
    sup.push_back(M.allows(row, j));
    if (!sup.back()) continue;
    const mpz_int xs[2] = {numerator(mpq_rational(S0(row, j) * mpq_rational(qd))), numerator(mpq_rational(H0(row, j) * mpq_rational(qd)))};
    for (const mpz_int& x : xs)
      if (!any || x < lo) lo = x, any = true;
  }
  if (!any) fail("/objects/mask", "the row is fully masked");
  for (Eigen::Index j = 0; j < S0.cols(); ++j) {
    if (!sup[static_cast<std::size_t>(j)]) {
      e.push_back(-1);
      eh.push_back(-1);
      continue;
    }
    const mpz_int x = numerator(mpq_rational(S0(row, j) * mpq_rational(qd))) - lo, y = numerator(mpq_rational(H0(row, j) * mpq_rational(qd))) - lo;
    if (x > 1000 || y > 1000) return undecided_result(claim, "the exponent spread of the row is above 1000: polynomials too large");
    e.push_back(x.convert_to<long>());
    eh.push_back(y.convert_to<long>());
  }
  auto mono = [](long k) {
    int_poly p(static_cast<std::size_t>(k) + 1);
    p[static_cast<std::size_t>(k)] = 1;
    return p;
  };
  int_poly D, Dh;
  for (std::size_t j = 0; j < e.size(); ++j)
    if (e[j] >= 0) {
      D = padd(D, mono(e[j]));
      Dh = padd(Dh, mono(eh[j]));
    }
  mpz_int L = 1;
  for (Eigen::Index j = 0; j < V.rows(); ++j)
    for (Eigen::Index k = 0; k < V.cols(); ++k) L = boost::multiprecision::lcm(L, denominator(V(j, k)));
  mpq_rational mu = 0;
  for (Eigen::Index j = 0; j < V.rows(); ++j) {
    mpq_rational n2 = 0;
    for (Eigen::Index k = 0; k < V.cols(); ++k) n2 += V(j, k) * V(j, k);
    mu = std::max(mu, n2);
  }
  std::vector<int_poly> delta;
  std::vector<sign_analysis> dsign;
  int_poly l1, G;
  for (std::size_t j = 0; j < e.size(); ++j) {
    int_poly d;
    if (e[j] >= 0) d = padd(pmul(mono(eh[j]), D), pneg(pmul(mono(e[j]), Dh)));
    delta.push_back(d);
    dsign.push_back(analyze_sign(d, range, qd, max_bits));
    if (!dsign.back().decided) return undecided_result(claim, dsign.back().why_undecided);
    const int sg = dsign.back().identically_zero ? 0 : dsign.back().signs[0];
    l1 = padd(l1, sg >= 0 ? d : pneg(d));
  }
  int_poly wsum;
  for (Eigen::Index k = 0; k < V.cols(); ++k) {
    int_poly W;
    for (std::size_t j = 0; j < delta.size(); ++j) {
      int_poly t = delta[j];
      const mpz_int c = numerator(mpq_rational(V(static_cast<Eigen::Index>(j), k) * mpq_rational(L)));
      for (auto& x : t) x *= c;
      W = padd(W, t);
    }
    wsum = padd(wsum, pmul(W, W));
  }
  int_poly rhs = pmul(l1, l1);
  for (auto& x : rhs) x *= L * L * numerator(mu);
  for (auto& x : wsum) x *= denominator(mu);
  G = padd(rhs, pneg(wsum));
  const sign_analysis gs = analyze_sign(G, range, qd, max_bits);
  if (!gs.decided) return undecided_result(claim, gs.why_undecided);
  const int gsign = gs.identically_zero ? 0 : gs.signs[0];
  certify_result res;
  res.verdict = gsign >= 0 ? claim_verdict::certified : claim_verdict::refuted;
  const std::string text = "||((A_hat - A) V)_" + std::to_string(row) + "||_2 <= ||A_hat_" + std::to_string(row) + " - A_" + std::to_string(row) +
                           "||_1 * max_j ||v_j||_2 at a = " + rational_string(a0);
  std::ostringstream os;
  os << to_string(res.verdict) << ": " << text << ".\n  bound^2 - error^2 has sign " << (gsign > 0 ? "+" : gsign < 0 ? "-" : "0")
     << " (exact: a polynomial in u = e^{a/" << qd.str() << "} at the point)\n";
  res.summary = os.str();
  res.report = {{"tool", "attncert"}, {"version", ATTNCERT_VERSION}, {"claim", text}, {"verdict", to_string(res.verdict)}, {"summary", res.summary}};
  nlohmann::json cl = {{"S0", matrix_json(S0)}, {"S_hat0", matrix_json(H0)}, {"V", matrix_json(V)}, {"mask", M.type() == mask::kind::causal ? "causal" : "none"},
                       {"quantity", "output_bound"}, {"row", row}, {"point", rational_string(a0)}, {"relation", "<="}, {"value", "bound"}};
  if (claim.contains("title")) cl["title"] = claim["title"];
  nlohmann::json dj = nlohmann::json::array();
  for (std::size_t j = 0; j < delta.size(); ++j) {
    nlohmann::json x = {{"poly", poly_json(delta[j])}};
    if (!dsign[j].identically_zero) x["sample"] = {{"u", rational_string(dsign[j].samples[0])}, {"sign", dsign[j].signs[0]}};
    dj.push_back(x);
  }
  nlohmann::json gj = {{"poly", poly_json(G)}};
  if (!gs.identically_zero) gj["sample"] = {{"u", rational_string(gs.samples[0])}, {"sign", gs.signs[0]}};
  res.certificate = {{"format", "attncert-certificate/1"}, {"tool", "attncert"}, {"version", ATTNCERT_VERSION}, {"claim", cl},
                     {"verdict", to_string(res.verdict)}, {"q", qd.str()},
                     {"output_bound", {{"delta", dj}, {"G", gj}, {"mu", mu.str()}, {"L", L.str()}}}};
  return res;
}

}  // namespace

// ---- numerical rank under a recipe and a policy, at a point ------------------------------
// The recipe forms M̂ (attention/recipe.hpp) from the claim's binary64 inputs at the point a;
// the numerical rank under a policy with threshold τ = max(α σ₁, β) (strict) is
// #{i : σ_i(M̂) > τ} for the EXACT singular values of the formed matrix.  With G the smaller
// Gram matrix of M̂ and count(t) = #{eigenvalues of G > t}: σ₁² ∈ (l, u] (count(l) ≥ 1,
// count(u) = 0) puts τ² in [T_lo, T_hi] = [max(α²l, β²), max(α²u, β²)], and the rank is
// decided when count(T_lo) = count(T_hi).  count is exact: Descartes' rule on the
// characteristic polynomial of G − tI (FLINT), exact because every root is real.
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

bool binary64_exact(const mpq_rational& x, double& out) {
  out = x.convert_to<double>();
  return std::isfinite(out) && mpq_rational(out) == x;
}

}  // namespace

certify_result certify_numerical_rank(const nlohmann::json& claim, const std::string& base_dir) {
  const nlohmann::json& q = claim["quantity"];
  for (auto it = q.begin(); it != q.end(); ++it)
    if (it.key() != "kind" && it.key() != "object" && it.key() != "recipe" && it.key() != "policy")
      fail("/quantity/" + it.key(), "unknown key (numerical_rank takes object, recipe, policy)");
  const auto* oj = get(q, "object");
  if (!oj || !oj->is_string()) fail("/quantity/object", "missing: scores, attention or output");
  const std::string object = oj->get<std::string>();
  if (object != "scores" && object != "attention" && object != "output")
    fail("/quantity/object", "a recipe forms scores, attention or output");
  const auto* rj = get(q, "recipe");
  if (!rj || !rj->is_string()) fail("/quantity/recipe", "missing, e.g. \"fp32\"");
  recipe rec;
  try {
    rec = parse_recipe(rj->get<std::string>());
  } catch (const input_error& e) {
    fail("/quantity/recipe", e.what());
  }
  if (rec.type == recipe::kind::mpfr) fail("/quantity/recipe", "mpfrN recipes are not supported yet by numerical_rank claims");
  const auto* pj = get(q, "policy");
  if (!pj || !pj->is_string()) fail("/quantity/policy", "missing, e.g. \"numpy\"");
  rank_policy pol;
  try {
    pol = rank_policy::parse(pj->get<std::string>());
  } catch (const input_error& e) {
    fail("/quantity/policy", e.what());
  }
  const auto* relj = get(claim, "relation");
  if (!relj) fail("/relation", "missing");
  const rel relation = parse_relation(*relj);
  const auto* valj = get(claim, "value");
  if (!valj || !valj->is_number_integer() || valj->get<long long>() < 0) fail("/value", "expected a non-negative integer rank");
  const std::size_t value = valj->get<std::size_t>();
  if (get(claim, "tolerance")) fail("/tolerance", "not used by numerical_rank");
  const nlohmann::json& objects = claim["objects"];
  for (auto it = objects.begin(); it != objects.end(); ++it)
    if (it.key() != "S" && it.key() != "Q" && it.key() != "K" && it.key() != "scale" && it.key() != "mask" && it.key() != "V")
      fail("/objects/" + it.key(), "numerical_rank takes S or Q, K (and scale), mask, V");
  // the point
  const auto* fam = get(claim, "family");
  mpq_rational a0 = 1;
  if (fam) {
    if (get(*fam, "range"))
      return undecided_result(claim, "numerical-rank claims over a parameter range are not decided by certify; sweep them "
                                     "with attncert drift (divergence intervals with bisected ends)");
    const auto* aj = get(*fam, "at");
    if (!aj) fail("/family", "expected {\"at\": a}");
    a0 = exact_number(*aj, "/family/at");
  }
  // binary64 inputs: Q = S0, K = I when S is given (exact in every accumulation format)
  recipe_input in;
  auto to_double_matrix = [&](const matrix<mpq_rational>& m, const std::string& ptr) {
    matrix<double> d(m.rows(), m.cols());
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      for (Eigen::Index j = 0; j < m.cols(); ++j)
        if (!binary64_exact(m(i, j), d(i, j)))
          fail(ptr + "/" + std::to_string(i) + "/" + std::to_string(j), "numerical_rank needs inputs that are binary64 numbers");
    return d;
  };
  mpq_rational scale = 1;
  const auto* Sj = get(objects, "S");
  if (Sj) {
    if (get(objects, "Q") || get(objects, "K") || get(objects, "scale")) fail("/objects", "give either S or Q, K (and scale)");
    in.Q = to_double_matrix(read_matrix(*Sj, "/objects/S", base_dir), "/objects/S");
    in.K = matrix<double>::Identity(in.Q.cols(), in.Q.cols());
  } else {
    const auto* Qj = get(objects, "Q");
    const auto* Kj = get(objects, "K");
    if (!Qj || !Kj) fail("/objects", "missing scores: give S, or Q and K");
    in.Q = to_double_matrix(read_matrix(*Qj, "/objects/Q", base_dir), "/objects/Q");
    in.K = to_double_matrix(read_matrix(*Kj, "/objects/K", base_dir), "/objects/K");
    if (in.Q.cols() != in.K.cols()) fail("/objects/K", "Q and K must have the same number of columns");
    const auto* sc = get(objects, "scale");
    if (!sc) fail("/objects/scale", "numerical_rank needs an explicit rational scale (1/sqrt(d) is not a binary64 number in general)");
    scale = exact_number(*sc, "/objects/scale");
  }
  if (!binary64_exact(mpq_rational(a0 * scale), in.scale)) fail("/family/at", "a times the scale must be a binary64 number");
  const long nk = static_cast<long>(in.K.rows());
  if (const auto* mj = get(objects, "mask")) {
    if (mj->is_string() && mj->get<std::string>() == "causal") in.M = mask::causal();
    else if (!(mj->is_string() && mj->get<std::string>() == "none")) fail("/objects/mask", "numerical_rank takes \"none\" or \"causal\"");
  }
  if (object == "output") {
    const auto* Vj = get(objects, "V");
    if (!Vj) fail("/objects/V", "the output needs values V");
    in.V = to_double_matrix(read_matrix(*Vj, "/objects/V", base_dir), "/objects/V");
    if (in.V->rows() != nk) fail("/objects/V", "needs one row per key");
  }
  in.object = object == "scores" ? layer_object::scores : object == "attention" ? layer_object::attention : layer_object::output;
  // form M̂
  matrix<mpq_rational> Mh;
  try {
    Mh = with_recipe(rec, [&]<class In, class Acc, class Sm, class OAcc, class Out>() {
      const matrix<Out> m = recipe_form<In, Acc, Sm, OAcc, Out>(in);
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
  double alpha_d = 0, beta_d = 0;
  if (!pol.linear_threshold(static_cast<long>(Mh.rows()), static_cast<long>(Mh.cols()), rec.result, alpha_d, beta_d))
    fail("/quantity/policy", "numerical_rank claims support numpy, torch, lapack, absolute and relative policies");
  const mpq_rational alpha(alpha_d), beta(beta_d);
  // Gram matrix (the smaller one)
  const matrix<mpq_rational> Mt = Mh.transpose();
  const matrix<mpq_rational> G = Mh.rows() <= Mh.cols() ? multiply(Mh, Mt) : multiply(Mt, Mh);
  // sigma_1^2 in (l, u]
  mpq_rational l = 0, u = 0;
  std::size_t rank = 0;
  bool decided = true;
  mpq_rational Tlo = 0, Thi = 0;
  if (eigen_count_above(G, 0) == 0) {
    rank = 0;  // M̂ = 0: no singular value exceeds any threshold >= 0
  } else {
    const double s1 = approx_singular_values(from_rational_matrix<double>(Mh))[0];
    double lo_d = s1 * s1 * (1 - 0x1p-30), hi_d = s1 * s1 * (1 + 0x1p-30);
    for (int tries = 0; tries < 60; ++tries) {
      l = mpq_rational(lo_d);
      u = mpq_rational(hi_d);
      if (eigen_count_above(G, l) >= 1 && eigen_count_above(G, u) == 0) break;
      lo_d *= 0.5;
      hi_d *= 2;
      if (tries == 59) return undecided_result(claim, "could not bracket the largest singular value");
    }
    Tlo = std::max(mpq_rational(alpha * alpha * l), mpq_rational(beta * beta));
    Thi = std::max(mpq_rational(alpha * alpha * u), mpq_rational(beta * beta));
    const std::size_t c_lo = eigen_count_above(G, Tlo), c_hi = eigen_count_above(G, Thi);
    decided = c_lo == c_hi;
    rank = c_lo;
  }
  const std::string stmt = "numerical rank of the " + object + " formed by recipe " + rec.name + " (" + rec.stages() +
                           ") under policy " + pol.name() + " at a = " + rational_string(a0);
  if (!decided)
    return undecided_result(claim, stmt + ": a singular value lies within the enclosure of the threshold (sigma_1^2 in (" +
                                       rational_string(l) + ", " + rational_string(u) + "])");
  const bool ok = holds(relation, rank, value);
  certify_result res;
  res.verdict = ok ? claim_verdict::certified : claim_verdict::refuted;
  res.summary = std::string(to_string(res.verdict)) + ": " + stmt + " is " + std::to_string(rank) + " (claimed " +
                rel_text(relation) + " " + std::to_string(value) + ")\n  exact singular values of the formed matrix against " +
                "the threshold max(alpha sigma_1, beta): eigenvalue counts of its Gram matrix (Descartes, exact)\n";
  res.report = {{"tool", "attncert"}, {"version", ATTNCERT_VERSION}, {"verdict", to_string(res.verdict)}, {"summary", res.summary},
                {"numerical_rank", rank}};
  if (claim.contains("title")) res.report["title"] = claim["title"];
  nlohmann::json cl = {{"quantity", "numerical_rank"}, {"object", object}, {"recipe", rec.name}, {"policy", pol.name()},
                       {"point", rational_string(a0)}, {"relation", rel_text(relation)}, {"value", value},
                       {"scale", rational_string(mpq_rational(in.scale))}, {"Q", matrix_json(from_double_matrix<mpq_rational>(in.Q))},
                       {"K", matrix_json(from_double_matrix<mpq_rational>(in.K))},
                       {"mask", in.M.type() == mask::kind::causal ? "causal" : "none"}};
  if (in.V) cl["V"] = matrix_json(from_double_matrix<mpq_rational>(*in.V));
  nlohmann::json cert = {{"format", "attncert-certificate/1"}, {"tool", "attncert"}, {"version", ATTNCERT_VERSION}};
  cert["claim"] = cl;
  cert["verdict"] = to_string(res.verdict);
  cert["numerical_rank"] = {{"formed", matrix_json(Mh)},
                            {"alpha", rational_string(alpha)},
                            {"beta", rational_string(beta)},
                            {"sigma1_squared_above", rational_string(l)},
                            {"sigma1_squared_at_most", rational_string(u)},
                            {"rank", rank}};
  if (!ok) cert["counterexample"] = {{"numerical_rank", rank}};
  res.certificate = cert;
  return res;
}

nlohmann::json parse_claim_text(const std::string& text) {
  exact_dom d;
  const bool ok = nlohmann::json::sax_parse(io::quote_huge_number_literals(text), &d);
  if (!ok || !d.error.empty()) throw input_error(d.error.empty() ? "malformed JSON" : d.error);
  return d.root;
}

namespace {

// The prover: a verdict and its certificate, not yet checked (certify() below checks it).
certify_result prove_claim(const nlohmann::json& claim, const std::string& base_dir, unsigned max_bits) {
  if (!claim.is_object()) fail("", "a claim is a JSON object");
  for (auto it = claim.begin(); it != claim.end(); ++it) {
    static const std::vector<std::string> known = {"title", "statement", "source", "objects", "family", "quantity", "relation", "value", "tolerance"};
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) fail("/" + it.key(), "unknown key");
  }
  const nlohmann::json* objects = get(claim, "objects");
  if (!objects || !objects->is_object()) fail("/objects", "missing object with the matrices");
  // ---- quantity
  const nlohmann::json* quantity = get(claim, "quantity");
  if (!quantity || !quantity->is_object()) fail("/quantity", "missing, e.g. {\"kind\": \"rank\", \"object\": \"attention\"}");
  const nlohmann::json* kind = get(*quantity, "kind");
  if (!kind || !kind->is_string()) fail("/quantity/kind", "missing");
  const std::string k = kind->get<std::string>();
  if (k != "rank" && k != "determinant" && k != "output_value" && k != "singular_value" && k != "output_bound" &&
      k != "numerical_rank")
    fail("/quantity/kind", "unknown quantity '" + k + "' (supported: rank, determinant, output_value, singular_value, output_bound, numerical_rank)");
  if (k == "output_bound") return certify_output_bound(claim, base_dir, max_bits);
  if (k == "numerical_rank") return certify_numerical_rank(claim, base_dir);
  const bool det_claim = k != "rank";  // real-valued: determinant, output_value, singular_value
  long entry_row = -1, entry_col = -1, sv_index = -1;
  if (k == "singular_value") {
    const auto* ij = get(*quantity, "index");
    if (!ij || !ij->is_number_integer() || ij->get<long>() < 1) fail("/quantity/index", "expected k >= 1 (sigma_1 is the largest)");
    sv_index = ij->get<long>();
  }
  if (k == "output_value") {
    const auto* rj = get(*quantity, "row");
    const auto* cj = get(*quantity, "col");
    if (!rj || !rj->is_number_integer() || rj->get<long>() < 0) fail("/quantity/row", "expected a non-negative integer (0-based)");
    if (!cj || !cj->is_number_integer() || cj->get<long>() < 0) fail("/quantity/col", "expected a non-negative integer (0-based)");
    entry_row = rj->get<long>();
    entry_col = cj->get<long>();
  }
  const nlohmann::json* obj = get(*quantity, "object");
  if (!obj || !obj->is_string()) fail("/quantity/object", "missing: scores, attention, output or residual");
  layer_object object;
  try {
    object = parse_layer_object(obj->get<std::string>());
  } catch (const input_error& e) {
    fail("/quantity/object", e.what());
  }
  // ---- relation and value
  const nlohmann::json* relj = get(claim, "relation");
  if (!relj) fail("/relation", "missing");
  const nlohmann::json* valj = get(claim, "value");
  if (!valj) fail("/value", "missing");
  det_relation drel;
  rel relation = rel::eq;
  std::size_t value = 0;
  if (det_claim) {
    drel = parse_det_relation(*relj, *valj, get(claim, "tolerance"));
  } else {
    if (get(claim, "tolerance")) fail("/tolerance", "applies to real-valued quantities (determinant), not to ranks");
    relation = parse_relation(*relj);
    if (!valj->is_number_integer() || valj->get<long long>() < 0) fail("/value", "expected a non-negative integer rank");
    value = valj->get<std::size_t>();
  }
  // ---- objects
  family_input in;
  for (auto it = objects->begin(); it != objects->end(); ++it) {
    static const std::vector<std::string> known = {"S", "Q", "K", "scale", "mask", "V", "X"};
    if (it.key() == "heads") fail("/objects/heads", "multi-head objects are not supported yet by attncert certify (one layer: S or Q, K; mask; V; X)");
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) fail("/objects/" + it.key(), "unknown object");
  }
  const nlohmann::json* S = get(*objects, "S");
  const nlohmann::json* Q = get(*objects, "Q");
  const nlohmann::json* K = get(*objects, "K");
  const nlohmann::json* scale = get(*objects, "scale");
  std::string algebraic_point;  // nonempty: the point is a = 1/sqrt(d), algebraic and nonzero
  if (S && (Q || K)) fail("/objects", "give either S or Q and K, not both");
  if (S) {
    if (scale) fail("/objects/scale", "applies to Q, K only (S is used as given)");
    in.S0 = read_matrix(*S, "/objects/S", base_dir);
  } else if (Q && K) {
    const matrix<mpq_rational> q = read_matrix(*Q, "/objects/Q", base_dir), kk = read_matrix(*K, "/objects/K", base_dir);
    if (q.cols() != kk.cols()) fail("/objects/K", "Q and K must have the same number of columns");
    in.S0 = q * kk.transpose();
    if (!scale || (scale->is_string() && (scale->get<std::string>() == "1/sqrt(d)"))) {
      const long d = static_cast<long>(q.cols());
      const long r = std::lround(std::sqrt(static_cast<double>(d)));
      if (r * r == d) in.S0 /= mpq_rational(r);
      else algebraic_point = "1/sqrt(" + std::to_string(d) + ")";
    } else {
      in.S0 *= exact_number(*scale, "/objects/scale");
    }
  } else {
    fail("/objects", "missing scores: give S, or Q and K");
  }
  if (const auto* mj = get(*objects, "mask")) {
    if (mj->is_string() && mj->get<std::string>() == "none") in.M = mask::none();
    else if (mj->is_string() && mj->get<std::string>() == "causal") in.M = mask::causal();
    else if (mj->is_array()) {
      io::bool_matrix b(static_cast<Eigen::Index>(mj->size()), mj->empty() || !(*mj)[0].is_array() ? 0 : static_cast<Eigen::Index>((*mj)[0].size()));
      for (std::size_t i = 0; i < mj->size(); ++i) {
        const auto& row = (*mj)[i];
        if (!row.is_array() || static_cast<Eigen::Index>(row.size()) != b.cols()) fail("/objects/mask/" + std::to_string(i), "ragged or not a row");
        for (std::size_t j = 0; j < row.size(); ++j) {
          const auto& e = row[j];
          const std::string p = "/objects/mask/" + std::to_string(i) + "/" + std::to_string(j);
          if (e.is_boolean()) b(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = e.get<bool>();
          else if (e.is_number_integer() && (e.get<long long>() == 0 || e.get<long long>() == 1)) b(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = e.get<long long>() == 1;
          else fail(p, "expected true/false or 0/1");
        }
      }
      in.M = mask::from_matrix(b);
    } else {
      fail("/objects/mask", "expected \"none\", \"causal\" or a boolean matrix");
    }
  }
  if (const auto* v = get(*objects, "V")) in.V = read_matrix(*v, "/objects/V", base_dir);
  if (const auto* x = get(*objects, "X")) in.X = read_matrix(*x, "/objects/X", base_dir);
  in.object = object;
  // ---- the parameter
  a_range range;
  range.lo = range.hi = mpq_rational(1);
  range.lo_open = range.hi_open = false;  // default: the scores as given (a = 1)
  std::string range_text = "a = 1 (scores as given)";
  if (const auto* fam = get(claim, "family")) {
    if (!fam->is_object()) fail("/family", "expected {\"range\": \"(0, inf)\"} or {\"at\": \"0\"}");
    if (const auto* sc = get(*fam, "scores"); sc && (!sc->is_string() || sc->get<std::string>() != "a*S"))
      fail("/family/scores", "only the family a*S (S from the objects) is supported");
    const auto* rj = get(*fam, "range");
    const auto* aj = get(*fam, "at");
    if ((rj != nullptr) == (aj != nullptr)) fail("/family", "give exactly one of range, at");
    if (rj) {
      if (!rj->is_string()) fail("/family/range", "expected a string such as \"(0, inf)\"");
      try {
        range = parse_a_range(rj->get<std::string>());
      } catch (const input_error& e) {
        fail("/family/range", e.what());
      }
    } else {
      const mpq_rational a = exact_number(*aj, "/family/at");
      range.lo = range.hi = a;
    }
    range_text = range.is_point() ? "a = " + rational_string(*range.lo) : "a in " + range.describe();
  }
  certify_result res;
  nlohmann::json& rep = res.report;
  rep["tool"] = "attncert";
  rep["version"] = ATTNCERT_VERSION;
  if (const auto* t = get(claim, "title")) rep["title"] = *t;
  const std::string claim_text = det_claim ? std::string("det ") + to_string(object) + " " + drel.text + " " + drel.value.str() +
                                                 (drel.text == "within" ? " +- " + drel.tolerance.str() : std::string()) + " for " +
                                                 (algebraic_point.empty() ? range_text : "S = " + algebraic_point + " * Q K^T")
                                           : std::string("rank ") + to_string(object) + " " + rel_text(relation) + " " + std::to_string(value) +
                                 " for " + (algebraic_point.empty() ? range_text : "S = " + algebraic_point + " * Q K^T");
  rep["claim"] = claim_text;
  if (!algebraic_point.empty() && get(claim, "family"))
    {
      res.verdict = claim_verdict::undecided;
      res.summary = "UNDECIDED: the family a * (1/sqrt(d)) * Q K^T with irrational scale is not of the form a * S0 with S0 rational; "
                    "only rational scales are supported for parameter ranges";
      rep["verdict"] = "UNDECIDED";
      rep["why"] = res.summary;
      return res;
    }
  if (sv_index > 0) return certify_singular_value(claim, in, object, range, range_text, algebraic_point, drel, max_bits, sv_index);
  if (det_claim) return certify_ratio(claim, in, object, range, range_text, algebraic_point, drel, max_bits, entry_row, entry_col);
  // ---- compute the rank function over the range
  poly_family F;
  family_rank_result fr;
  const bool scores = object == layer_object::scores;
  if (scores) {
    // a*S0: the same machinery on the constant matrix S0 (scaled to integers); rank 0 at a = 0.
    in.M.check_shape(in.S0.rows(), in.S0.cols());
    mpz_int L = 1;
    for (Eigen::Index i = 0; i < in.S0.rows(); ++i)
      for (Eigen::Index j = 0; j < in.S0.cols(); ++j) L = boost::multiprecision::lcm(L, denominator(in.S0(i, j)));
    F.rows = in.S0.rows();
    F.cols = in.S0.cols();
    for (Eigen::Index i = 0; i < F.rows; ++i)
      for (Eigen::Index j = 0; j < F.cols; ++j) {
        const mpz_int c = numerator(mpq_rational(in.S0(i, j) * mpq_rational(L)));
        F.entries.push_back(c == 0 ? int_poly{} : int_poly{c});
      }
    fr = family_rank(F, range, max_bits);
  } else {
    try {
      F = build_family(in);
    } catch (const family_too_large& e) {
      return undecided_result(claim, e.what());
    } catch (const input_error& e) {
      fail("/objects", e.what());
    }
    const a_range effective = algebraic_point.empty() ? range : a_range{};  // algebraic point: no roots can matter
    fr = family_rank(F, effective, max_bits);
    if (!algebraic_point.empty()) fr.drops.clear();  // u = e^{1/sqrt(d)} is transcendental: never a root of g
  }
  if (!fr.decided) {
    res.verdict = claim_verdict::undecided;
    res.summary = "UNDECIDED: " + fr.why_undecided + " (precision cap " + std::to_string(max_bits) + " bits)";
    rep["verdict"] = "UNDECIDED";
    rep["why"] = fr.why_undecided;
    rep["precision_bits_reached"] = max_bits;
    return res;
  }
  // scores: the drop at a = 0 (S(0) = 0)
  std::vector<drop_point> drops = fr.drops;
  const bool zero_in_range = range.contains(mpq_rational(0));
  if (scores && zero_in_range && fr.generic > 0) {
    drop_point z;
    z.u.lo = z.u.hi = 1;
    z.a = {"0", "0"};
    z.rank = 0;
    drops.push_back(z);
  }
  const bool point = range.is_point() || !algebraic_point.empty();
  const bool generic_present = !point || drops.empty();
  // ---- verdict
  bool ok = true;
  nlohmann::json counter;
  if (generic_present && !holds(relation, fr.generic, value)) {
    ok = false;
    const mpq_rational a = point ? *range.lo : generic_point(range);
    counter = {{"a", algebraic_point.empty() ? rational_string(a) : algebraic_point},
               {"rank", fr.generic},
               {"why", "u = e^{a/q} is not a root of the minors' gcd (a transcendental u is a root of no nonzero integer polynomial)"}};
  }
  for (const auto& d : drops)
    if (ok && !holds(relation, d.rank, value)) {
      ok = false;
      counter = {{"a_enclosure", {d.a.first, d.a.second}}, {"rank", d.rank}, {"why", "a root of the minors' gcd lies in the range"}};
    }
  res.verdict = ok ? claim_verdict::certified : claim_verdict::refuted;
  // ---- summary
  std::ostringstream os;
  os << to_string(res.verdict) << ": " << claim_text << ".\n  rank of the " << to_string(object) << " is " << fr.generic;
  if (!point) os << " for all a in " << range.describe();
  else os << " at " << (algebraic_point.empty() ? range_text : "a = " + algebraic_point);
  if (!drops.empty()) {
    os << (point ? "" : " except at");
    if (point) os.str(""), os << to_string(res.verdict) << ": " << claim_text << ".\n  rank of the " << to_string(object) << " at " << range_text << " is " << drops[0].rank;
    else
      for (std::size_t i = 0; i < drops.size(); ++i)
        os << (i ? ";" : "") << " a* in [" << drops[i].a.first << ", " << drops[i].a.second << "] where the rank is " << drops[i].rank;
  }
  os << "\n";
  if (!ok) os << "  counterexample: " << counter.dump() << "\n";
  res.summary = os.str();
  rep["verdict"] = to_string(res.verdict);
  rep["generic_rank"] = fr.generic;
  nlohmann::json dj = nlohmann::json::array();
  for (const auto& d : drops) dj.push_back({{"a", {d.a.first, d.a.second}}, {"u", {rational_string(d.u.lo), rational_string(d.u.hi)}}, {"rank", d.rank}});
  rep["drops"] = dj;
  if (!ok) rep["counterexample"] = counter;
  rep["summary"] = res.summary;
  // ---- certificate
  nlohmann::json c;
  c["format"] = "attncert-certificate/1";
  c["tool"] = "attncert";
  c["version"] = ATTNCERT_VERSION;
  nlohmann::json cl = claim_objects_json(in, object, range, algebraic_point, claim);
  cl["relation"] = rel_text(relation);
  cl["value"] = value;
  c["claim"] = cl;
  c["verdict"] = to_string(res.verdict);
  c["q"] = F.q.str();
  c["generic_rank"] = fr.generic;
  const std::size_t dim = static_cast<std::size_t>(std::min(F.rows, F.cols));
  if (fr.generic == dim) c["upper_bound"] = {{"method", "dimensions"}};
  else {
    nlohmann::json ks = nlohmann::json::array();
    for (const auto& v : kernel_basis(F)) {
      nlohmann::json vj = nlohmann::json::array();
      for (const auto& p : v) vj.push_back(poly_json(p));
      ks.push_back(vj);
    }
    c["upper_bound"] = {{"method", "kernel"}, {"vectors", ks}};
  }
  nlohmann::json ms = nlohmann::json::array();
  for (const auto& [r, cc] : fr.minors) ms.push_back({{"rows", r}, {"cols", cc}, {"poly", poly_json(minor_polynomial(F, r, cc))}});
  c["minors"] = ms;
  c["gcd"] = poly_json(fr.g);
  if (fr.g.size() > 1) {
    nlohmann::json st = nlohmann::json::array();
    for (const auto& p : sturm_sequence(fr.g)) st.push_back(poly_json(p));
    c["sturm"] = st;
  }
  nlohmann::json rj = nlohmann::json::array();
  for (const auto& d : drops) {
    nlohmann::json x = {{"u", {rational_string(d.u.lo), rational_string(d.u.hi)}}, {"a", {d.a.first, d.a.second}}, {"rank", d.rank}};
    if (d.rank > 0 && !d.witness_rows.empty())
      x["witness"] = {{"rows", d.witness_rows}, {"cols", d.witness_cols}, {"poly", poly_json(minor_polynomial(F, d.witness_rows, d.witness_cols))}};
    rj.push_back(x);
  }
  c["drops"] = rj;
  if (!ok) c["counterexample"] = counter;
  res.certificate = c;
  return res;
}

}  // namespace

// Translation validation (as CompCert does it): every CERTIFIED or REFUTED verdict of the prover
// is re-derived by the independent checker from the certificate just written, before anyone
// sees it.  A rejected certificate turns the verdict into UNDECIDED ("internal disagreement"),
// keeping the prover's verdict, the certificate and the checker's notes in the report.
certify_result certify(const nlohmann::json& claim, const std::string& base_dir, unsigned max_bits, double max_seconds) {
  certify_result res;
  {
    deadline_scope limit(max_seconds);
    try {
      res = prove_claim(claim, base_dir, max_bits);
    } catch (const time_limit_reached& e) {
      res = undecided_result(claim, std::string(e.what()) + " (raise it with --max-seconds)");
      res.report["max_seconds"] = max_seconds;
      return res;
    } catch (const method_limit& e) {
      return undecided_result(claim, e.what());
    }
  }
  return validate_with_checker(std::move(res), max_bits);
}

certify_result validate_with_checker(certify_result res, unsigned max_bits) {
  if (res.verdict == claim_verdict::undecided) return res;
  const auto t0 = std::chrono::steady_clock::now();
  verify_options vo;
  vo.max_precision_bits = std::max(8192u, max_bits > (1u << 30) ? max_bits : 2 * max_bits);
  const verification v = verify_certificate(res.certificate, vo);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const char* status = v.result == verification::status::valid       ? "VALID"
                       : v.result == verification::status::invalid   ? "INVALID"
                       : v.result == verification::status::malformed ? "MALFORMED"
                                                                     : "UNCHECKED";
  res.report["certificate_check"] = {{"status", status}, {"seconds", secs}, {"checker_precision_cap_bits", vo.max_precision_bits}};
  res.check_seconds = secs;
  if (v.result == verification::status::valid) return res;
  const std::string prover = to_string(res.verdict);
  const std::string why_checker = v.notes.empty() ? std::string("no reason given") : v.notes.back();
  std::string why;
  if (v.result == verification::status::unchecked) {
    why = "the prover answered " + prover + " but the independent checker could not re-check the certificate within its cap (" +
          why_checker + ")";
  } else {
    res.disagreement = true;
    why = "internal disagreement: the prover answered " + prover + " but the independent checker calls its certificate " + status + " (" +
          why_checker + ")";
  }
  res.verdict = claim_verdict::undecided;
  res.report["prover_verdict"] = prover;
  res.report["verdict"] = "UNDECIDED";
  res.report["why"] = why;
  res.report["checker_notes"] = v.notes;
  res.report["rejected_certificate"] = res.certificate;
  res.summary = "UNDECIDED: " + why + "\n  the prover's summary was:\n" + res.summary;
  res.report["summary"] = res.summary;
  return res;
}

}  // namespace attncert::proofs
