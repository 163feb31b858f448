// Determinant and output-value certificates: the quantity is P(u)/R(u) with R > 0 for u > 0
// (det(object) = det M / (L^n Π D_i); an entry = M_ik / (L D_i)).  For each condition the claim
// needs (quantity − c = 0, <= 0 or >= 0) the sign of H = den(c)·P − num(c)·R is re-derived: at
// the claim's point from one sample on the same side as u0 = e^{a/q}, on a range from the
// zeros of H in the range's image (Sturm) and one sample per segment.  See checker.hpp.
#include <algorithm>

#include "checker.hpp"

namespace attncert::verify::checker {

namespace {

// The ratio P/R of the claim's quantity, recomputed from M(u), and its name for the notes.
struct ratio {
  zpoly P, R;
  std::string kind;  // /ratio/kind: "determinant" or "entry"
  std::string what;
};

ratio ratio_of_claim(const nlohmann::json& cl, const rebuilt_claim& rc) {
  const polynomial_matrix& F = rc.M;
  ratio q;
  if (cl.value("quantity", "rank") == "determinant") {
    check(F.rows == F.cols, "/claim: the determinant needs a square matrix");
    std::vector<long> all;
    for (long i = 0; i < F.rows; ++i) all.push_back(i);
    q.P = minor_of(F, all, all);  // det(object) = det M / (L^n Π D_i)
    q.R = {Z(1)};
    for (const auto& d : rc.row_sums) q.R = mul(q.R, mul(zpoly{rc.value_scale}, d));
    q.kind = "determinant";
    q.what = "det(" + rc.object + ")";
  } else {
    const long i = integer<long>(field(cl, "row", "/claim"), "/claim/row"), k = integer<long>(field(cl, "col", "/claim"), "/claim/col");
    if (i < 0 || k < 0 || i >= F.rows || k >= F.cols) throw malformed("/claim/row: entry outside the matrix");
    q.P = F.at(i, k);  // entry = M_ik / (L D_i)
    q.R = mul(zpoly{rc.value_scale}, rc.row_sums[static_cast<std::size_t>(i)]);
    q.kind = "entry";
    q.what = rc.object + "[" + std::to_string(i) + "][" + std::to_string(k) + "]";
  }
  return q;
}

// The conditions the claim's relation needs: (c, "=0" | "<=0" | ">=0") for quantity − c.
std::vector<std::pair<Q, std::string>> conditions_of_claim(const nlohmann::json& cl) {
  const std::string rel = field(cl, "relation", "/claim").get<std::string>();
  const Q c = exact_number(field(cl, "value", "/claim"), "/claim/value");
  if (rel == "within") {
    const Q t = exact_number(field(cl, "tolerance", "/claim"), "/claim/tolerance");
    if (t < 0) throw malformed("/claim/tolerance: negative");
    return {{c + t, "<=0"}, {c - t, ">=0"}};
  }
  if (rel == "=" || rel == "<=" || rel == ">=") return {{c, rel == "=" ? "=0" : rel == "<=" ? "<=0" : ">=0"}};
  throw malformed("/claim/relation: =, <=, >= or within");
}

// One condition's stated zeros of H ([lo, hi] pairs) and samples (u, sign of H there, checked).
struct zeros_and_samples {
  std::vector<std::pair<Q, Q>> roots;
  std::vector<Q> samples;
  std::vector<int> signs;
};

zeros_and_samples read_zeros_and_samples(const nlohmann::json& e, const zpoly& H, const std::string& w) {
  const nlohmann::json& rj = field(e, "roots", w);
  const nlohmann::json& sj = field(e, "samples", w);
  if (!rj.is_array() || !sj.is_array()) throw malformed(w + ": roots and samples are arrays");
  zeros_and_samples z;
  for (std::size_t k = 0; k < rj.size(); ++k) {
    if (!rj[k].is_array() || rj[k].size() != 2) throw malformed(w + "/roots: [lo, hi] pairs");
    z.roots.push_back({exact_number(rj[k][0], w + "/roots"), exact_number(rj[k][1], w + "/roots")});
    if (z.roots.back().first > z.roots.back().second || z.roots.back().first <= 0) throw malformed(w + "/roots: need 0 < lo <= hi");
  }
  for (std::size_t k = 0; k < sj.size(); ++k) {
    z.samples.push_back(exact_number(field(sj[k], "u", w + "/samples"), w + "/samples/u"));
    z.signs.push_back(integer<int>(field(sj[k], "sign", w + "/samples"), w + "/samples/sign"));
    check(sign_of(evaluate(H, z.samples.back())) == z.signs.back(), w + "/samples/" + std::to_string(k) + ": the sign of H there is not the stated one");
  }
  return z;
}

// The listed zeros of H are exactly those in the range's image, isolated and increasing.
void check_zeros_in_range(const zeros_and_samples& z, const zpoly& g, const range_image& im, bool one_in, const std::string& w) {
  const auto& roots = z.roots;
  check(static_cast<long>(roots.size()) == im.zeros,
        w + "/roots: the range contains " + std::to_string(im.zeros) + " zeros of H, " + std::to_string(roots.size()) + " listed");
  for (std::size_t k = 0; k < roots.size(); ++k) {
    const auto& r = roots[k];
    if (k > 0)
      check(roots[k - 1].second < r.first || (roots[k - 1].second == r.first && roots[k - 1].first != roots[k - 1].second && r.first != r.second),
            w + "/roots: not increasing and disjoint");
    if (r.first == r.second) {
      // an exact rational zero: u = 1 (a = 0) when the range contains 0, or any other
      // rational zero strictly inside the image (a rational u ≠ 1 is e^{a/q} for the real
      // a = q log u; it never equals a transcendental range end)
      check(evaluate(g, r.first) == 0, w + "/roots: a listed exact zero is not a zero of H");
      if (r.first == 1) check(one_in, w + "/roots: u = 1 (a = 0) is not in the range");
      else check(r.first > im.low && (!im.high || r.first < *im.high), w + "/roots: an exact zero outside the range");
    } else {
      check(evaluate(g, r.first) != 0 && evaluate(g, r.second) != 0 && roots_between(g, r.first, r.second) == 1, w + "/roots: an interval without exactly one zero");
      check(r.first >= im.low && (!im.high || r.second <= *im.high), w + "/roots: an interval outside the range");
    }
  }
}

// The samples interleave with the zeros, one per open segment, all inside the range's image.
void check_samples_on_segments(const zeros_and_samples& z, const range_t& Rg, const Z& q, const std::string& w) {
  const auto& roots = z.roots;
  const bool root_at_low = !roots.empty() && roots.front().first == roots.front().second && Rg.lo && *Rg.lo == 0;
  const bool root_at_high = !roots.empty() && roots.back().first == roots.back().second && Rg.hi && *Rg.hi == 0;
  const std::size_t segments = roots.size() + 1 - (root_at_low ? 1 : 0) - (root_at_high ? 1 : 0);
  check(z.samples.size() == segments, w + "/samples: expected one per segment (" + std::to_string(segments) + ")");
  auto inside_image = [&](const Q& x) {
    if (x <= 0) return false;
    if (Rg.lo && (*Rg.lo == 0 ? x <= 1 : exp_below(*Rg.lo, q, x) == false)) return false;
    if (Rg.hi && (*Rg.hi == 0 ? x >= 1 : exp_below(*Rg.hi, q, x) == true)) return false;
    return true;
  };
  std::size_t si = 0;
  for (std::size_t k = 0; k <= roots.size(); ++k) {
    if ((k == 0 && root_at_low) || (k == roots.size() && root_at_high)) continue;
    const Q& x = z.samples[si];
    check(z.signs[si] != 0, w + "/samples: a sample at a zero");
    check(inside_image(x), w + "/samples: a sample outside the range");
    if (k > 0) check(x >= roots[k - 1].second, w + "/samples: not after the previous zero");
    if (k < roots.size()) check(x <= roots[k].first, w + "/samples: not before the next zero");
    ++si;
  }
}

// The signs of H (nonzero) re-derived: at the claim's point, or on every segment of its range.
void check_signs_of_condition(const nlohmann::json& cl, const nlohmann::json& e, const zpoly& H, const zeros_and_samples& z, const Z& q,
                              const Q& cv, const std::string& w, const note_fn& note) {
  // the squarefree part only where it is needed: at a point the interval filter on H itself
  // usually decides (Euclid over Q on a degree-500 H takes tens of seconds)
  const bool at_point = cl.contains("point");
  const zpoly g = at_point ? zpoly{} : squarefree_part(H);
  if (e.contains("sturm")) {
    const auto s = sturm_sequence(at_point ? squarefree_part(H) : g);
    check(e["sturm"].is_array() && e["sturm"].size() == s.size(), w + "/sturm: length differs");
    for (std::size_t k = 0; k < s.size(); ++k)
      check(integer_polynomial(e["sturm"][k], w + "/sturm") == s[k], w + "/sturm/" + std::to_string(k) + ": differs");
  }
  if (at_point) {
    const Q a0 = exact_number(cl["point"], "/claim/point");
    check(z.roots.empty() && z.samples.size() == 1, w + ": a point needs exactly one sample and no roots");
    const Q s0 = z.samples[0];
    if (a0 == 0) check(s0 == 1, w + ": at a = 0 the sample is u = 1");
    else check_sign_at_point(H, a0, s0, q, w);  // no root of H between the sample and u0 = e^{a0/q}
    note(w + ": at the point, sign(det - " + cv.str() + ") = " + std::to_string(z.signs[0]));
    return;
  }
  const range_t Rg = parse_range(field(cl, "range", "/claim").get<std::string>());
  const range_image im = image_of_range(Rg, g, q, "zeros");
  check_zeros_in_range(z, g, im, im.one_is_root && Rg.contains(Q(0)), w);
  check_samples_on_segments(z, Rg, q, w);
  note(w + ": H has exactly " + std::to_string(im.zeros) + " zero(s) in the range (Sturm); signs on the segments re-derived");
}

// A sign of quantity − c that violates the claim, at a sample u (or at the claim's point).
struct violation {
  Q value, u;
  int sign;
  bool exact_point;  // the claim's point (a stated as "a"), not a sample u
};

// The counterexample must be one of the violations re-derived (and its a-enclosure must contain
// q·log u): a REFUTED certificate states nothing unchecked.
void check_ratio_counterexample(const nlohmann::json& cert, const nlohmann::json& cl, const std::vector<violation>& violations, const Z& q,
                                const note_fn& note) {
  const nlohmann::json& ce = field(cert, "counterexample", "");
  const Q cval = exact_number(field(ce, "value", "/counterexample"), "/counterexample/value");
  const int csign = integer<int>(field(ce, "sign_of_quantity_minus_value", "/counterexample"), "/counterexample/sign_of_quantity_minus_value");
  bool found = false;
  for (const auto& v : violations) {
    if (v.value != cval || v.sign != csign) continue;
    if (v.exact_point) {
      found = exact_number(field(ce, "a", "/counterexample"), "/counterexample/a") == exact_number(cl["point"], "/claim/point");
    } else {
      const Q u = exact_number(field(ce, "u", "/counterexample"), "/counterexample/u");
      const auto& aj = field(ce, "a_enclosure", "/counterexample");
      if (!aj.is_array() || aj.size() != 2) throw malformed("/counterexample/a_enclosure: [lo, hi]");
      found = u == v.u && encloses_q_log(exact_number(aj[0], "/counterexample/a_enclosure/0"), exact_number(aj[1], "/counterexample/a_enclosure/1"), u, u, q);
    }
    if (found) break;
  }
  check(found, "/counterexample: not a violation re-derived from the certificate (or its a-enclosure misses q log u)");
  note("counterexample re-derived: sign(quantity - " + cval.str() + ") = " + std::to_string(csign) + " there");
}

}  // namespace

void verify_ratio(const nlohmann::json& cert, const nlohmann::json& cl, const rebuilt_claim& rc, const note_fn& note) {
  const ratio rq = ratio_of_claim(cl, rc);
  const nlohmann::json& dj = field(cert, "ratio", "");
  check(field(dj, "kind", "/ratio").get<std::string>() == rq.kind, "/ratio/kind: the claim's quantity is a " + rq.kind);
  check(integer_polynomial(field(dj, "P", "/ratio"), "/ratio/P") == rq.P, "/ratio/P: differs from the recomputed numerator");
  check(integer_polynomial(field(dj, "R", "/ratio"), "/ratio/R") == rq.R, "/ratio/R: differs from the recomputed denominator");
  note(rq.what + " = P(u)/R(u), R > 0: P (degree " + std::to_string(rq.P.empty() ? 0 : rq.P.size() - 1) + ") and R recomputed from the claim");
  const auto want = conditions_of_claim(cl);
  // the claim's range, read even where no condition needs it (H identically zero)
  if (!cl.contains("point")) (void)parse_range(field(cl, "range", "/claim").get<std::string>());
  const nlohmann::json& conds = field(dj, "conditions", "/ratio");
  if (!conds.is_array() || conds.size() != want.size()) throw malformed("/ratio/conditions: expected " + std::to_string(want.size()));
  bool ok = true;
  std::vector<violation> violations;
  for (std::size_t t = 0; t < want.size(); ++t) {
    const std::string w = "/ratio/conditions/" + std::to_string(t);
    const nlohmann::json& e = conds[t];
    const auto& [cv, sense] = want[t];
    check(exact_number(field(e, "value", w), w + "/value") == cv && field(e, "sense", w).get<std::string>() == sense, w + ": not the condition the claim needs");
    // H = den(c)·P − num(c)·R: the sign of det − c (R > 0 for u > 0).
    const zpoly H = add(mul(zpoly{denominator(cv)}, rq.P), neg(mul(zpoly{numerator(cv)}, rq.R)));
    check(integer_polynomial(field(e, "H", w), w + "/H") == H, w + "/H: differs from den(c) P - num(c) R");
    const zeros_and_samples z = read_zeros_and_samples(e, H, w);
    if (H.empty()) {
      check(z.roots.empty() && z.samples.empty(), w + ": H is identically zero");
      note(w + ": det - " + cv.str() + " is identically zero");
    } else {
      check_signs_of_condition(cl, e, H, z, rc.M.q, cv, w, note);
    }
    for (std::size_t k = 0; k < z.signs.size(); ++k) {
      const int sg = z.signs[k];
      if (sense == "=0" ? sg != 0 : sense == "<=0" ? sg > 0 : sg < 0) {
        ok = false;
        violations.push_back({cv, z.samples[k], sg, cl.contains("point")});
      }
    }
  }
  if (!ok) check_ratio_counterexample(cert, cl, violations, rc.M.q, note);
  else check(!cert.contains("counterexample"), "/counterexample: present although the claim holds");
  check_verdict(cert, ok, note);
}

}  // namespace attncert::verify::checker
