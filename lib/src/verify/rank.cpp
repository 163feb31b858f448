// Rank certificates: the generic rank r of M(u) over ℚ(u) (upper bound by dimensions or kernel
// vectors, lower bound by nonzero r x r minors), the squarefree gcd g of those minors and its
// Sturm sequence, the drops (roots of g with u = e^{a/q}, a in the claim's range or at its
// point), the rank at each drop, and the verdict with its counterexample.  See checker.hpp.
#include <algorithm>

#include "checker.hpp"

namespace attncert::verify::checker {

namespace {

// A listed drop: u* in [lo, hi] (lo = hi: an exact rational root), the rank there.
struct drop {
  Q lo, hi;
  long rank;
};

// Are the kernel vectors N (polynomial columns) independent?  The rank of N(u0) over ℚ at
// u0 = 2, 3, 5, 7, 11 (one full-rank value suffices).
bool independent_at_some_integer(const std::vector<std::vector<zpoly>>& N, long cols) {
  bool independent = N.empty();
  for (int u0 : {2, 3, 5, 7, 11}) {
    if (independent) break;
    std::vector<std::vector<Q>> A;
    for (const auto& v : N) {
      std::vector<Q> row;
      for (const auto& p : v) row.push_back(evaluate(p, Q(u0)));
      A.push_back(row);
    }
    std::size_t rk = 0;
    for (std::size_t c = 0; c < static_cast<std::size_t>(cols) && rk < A.size(); ++c) {
      std::size_t piv = rk;
      while (piv < A.size() && A[piv][c] == 0) ++piv;
      if (piv == A.size()) continue;
      std::swap(A[piv], A[rk]);
      for (std::size_t i2 = rk + 1; i2 < A.size(); ++i2) {
        const Q f = A[i2][c] / A[rk][c];
        for (std::size_t c2 = c; c2 < static_cast<std::size_t>(cols); ++c2) A[i2][c2] -= f * A[rk][c2];
      }
      ++rk;
    }
    independent = rk == A.size();
  }
  return independent;
}

// /upper_bound method "kernel": cols − r vectors with M(u) v(u) = 0 identically, independent.
void check_kernel_vectors(const nlohmann::json& ub, const polynomial_matrix& F, long r, const note_fn& note) {
  const nlohmann::json& vs = field(ub, "vectors", "/upper_bound");
  if (!vs.is_array()) throw malformed("/upper_bound/vectors: expected an array");
  check(static_cast<long>(vs.size()) == F.cols - r, "/upper_bound/vectors: need cols - rank = " + std::to_string(F.cols - r) + " vectors");
  std::vector<std::vector<zpoly>> N;
  for (std::size_t t = 0; t < vs.size(); ++t) {
    if (!vs[t].is_array() || static_cast<long>(vs[t].size()) != F.cols) throw malformed("/upper_bound/vectors/" + std::to_string(t) + ": length");
    std::vector<zpoly> v;
    for (long i = 0; i < F.cols; ++i)
      v.push_back(integer_polynomial(vs[t][static_cast<std::size_t>(i)], "/upper_bound/vectors/" + std::to_string(t) + "/" + std::to_string(i)));
    for (long i = 0; i < F.rows; ++i) {
      zpoly acc;
      for (long j = 0; j < F.cols; ++j) acc = add(acc, mul(F.at(i, j), v[static_cast<std::size_t>(j)]));
      check(acc.empty(), "/upper_bound/vectors/" + std::to_string(t) + ": M(u) v(u) is not identically zero (row " + std::to_string(i) + ")");
    }
    N.push_back(v);
  }
  check(independent_at_some_integer(N, F.cols), "/upper_bound/vectors: not shown independent");
  note("rank over Q(u) <= " + std::to_string(r) + ": " + std::to_string(N.size()) + " kernel vectors, M N = 0 identically, independent");
}

// The stated generic rank r and its upper bound (/upper_bound); returns r.
long check_generic_rank_upper_bound(const nlohmann::json& cert, const polynomial_matrix& F, const note_fn& note) {
  const nlohmann::json& grj = field(cert, "generic_rank", "");
  if (!grj.is_number_unsigned()) throw malformed("/generic_rank: expected a non-negative integer");
  const long r = integer<long>(grj, "/generic_rank");
  const nlohmann::json& ub = field(cert, "upper_bound", "");
  const std::string method = field(ub, "method", "/upper_bound").get<std::string>();
  if (method == "dimensions") {
    check(r == std::min(F.rows, F.cols), "/upper_bound: rank " + std::to_string(r) + " is not min(rows, cols)");
    note("rank <= min(rows, cols) = " + std::to_string(r));
  } else if (method == "kernel") {
    check_kernel_vectors(ub, F, r, note);
  } else {
    throw malformed("/upper_bound/method: dimensions or kernel");
  }
  return r;
}

// The lower bound (/minors: nonzero r x r minors, recomputed), their squarefree gcd g (/gcd) and
// its Sturm sequence (/sturm, when stated); returns g.
zpoly check_generic_rank_lower_bound(const nlohmann::json& cert, const polynomial_matrix& F, long r, const note_fn& note) {
  const nlohmann::json& ms = field(cert, "minors", "");
  if (!ms.is_array()) throw malformed("/minors: expected an array");
  zpoly g;
  if (r == 0) {
    for (const auto& p : F.entries) check(p.empty(), "/generic_rank: 0 but M(u) has a nonzero entry");
    g = {Z(1)};
  }
  for (std::size_t t = 0; t < ms.size(); ++t) {
    const std::string w = "/minors/" + std::to_string(t);
    const auto rows = index_list(field(ms[t], "rows", w), w + "/rows", F.rows), cols = index_list(field(ms[t], "cols", w), w + "/cols", F.cols);
    if (static_cast<long>(rows.size()) != r || static_cast<long>(cols.size()) != r) throw malformed(w + ": not an r x r minor");
    const zpoly stated = integer_polynomial(field(ms[t], "poly", w), w + "/poly");
    const zpoly d = minor_of(F, rows, cols);
    check(d == stated, w + "/poly: differs from the recomputed minor");
    check(!d.empty(), w + ": the minor is identically zero");
    g = g.empty() ? d : primitive_gcd(g, d);
  }
  if (r > 0) check(!g.empty(), "/minors: no nonzero r x r minor given");
  g = squarefree_part(g);
  check(g == integer_polynomial(field(cert, "gcd", ""), "/gcd"), "/gcd: differs from the squarefree gcd of the listed minors");
  if (cert.contains("sturm")) {
    const auto s = sturm_sequence(g);
    const nlohmann::json& sj = cert["sturm"];
    check(sj.is_array() && sj.size() == s.size(), "/sturm: length differs from the recomputed Sturm sequence");
    for (std::size_t t = 0; t < s.size(); ++t)
      check(integer_polynomial(sj[t], "/sturm/" + std::to_string(t)) == s[t], "/sturm/" + std::to_string(t) + ": differs");
  }
  note("rank over Q(u) >= " + std::to_string(r) + ": " + std::to_string(ms.size()) + " recomputed nonzero minors; their gcd g has degree " +
       std::to_string(g.empty() ? 0 : g.size() - 1));
  return g;
}

// /drops as stated: each u in [lo, hi] with 0 < lo <= hi, its rank below r.
std::vector<drop> read_drops(const nlohmann::json& dj, long r) {
  if (!dj.is_array()) throw malformed("/drops: expected an array");
  std::vector<drop> drops;
  for (std::size_t t = 0; t < dj.size(); ++t) {
    const std::string w = "/drops/" + std::to_string(t);
    const auto& u = field(dj[t], "u", w);
    if (!u.is_array() || u.size() != 2) throw malformed(w + "/u: [lo, hi]");
    drop d{exact_number(u[0], w + "/u/0"), exact_number(u[1], w + "/u/1"), integer<long>(field(dj[t], "rank", w), w + "/rank")};
    if (d.lo > d.hi || d.lo <= 0) throw malformed(w + "/u: need 0 < lo <= hi");
    check(d.rank < r && d.rank >= 0, w + "/rank: must be below the generic rank");
    drops.push_back(d);
  }
  return drops;
}

bool is_drop_at_one(const drop& d) { return d.lo == 1 && d.hi == 1; }

// A point claim: no drop at a transcendental u; at a = 0 (u = 1) a drop exactly when g(1) = 0
// (the scores a·S0: to rank 0).  Returns whether the point has the generic rank.
bool check_drops_at_point(const nlohmann::json& cl, bool scores, long r, const zpoly& g, const std::vector<drop>& drops, const note_fn& note) {
  if (cl.contains("point_algebraic_nonzero")) {
    // only the form the prover emits: a = 1/sqrt(d), d a positive integer (algebraic, nonzero)
    const std::string ap = cl["point_algebraic_nonzero"].get<std::string>();
    const bool form = ap.size() > 8 && ap.rfind("1/sqrt(", 0) == 0 && ap.back() == ')' &&
                      ap.substr(7, ap.size() - 8).find_first_not_of("0123456789") == std::string::npos && ap[7] != '0';
    if (!form) throw malformed("/claim/point_algebraic_nonzero: expected 1/sqrt(d) with d a positive integer");
    check(drops.empty(), "/drops: at an algebraic a != 0, u = e^{a/q} is transcendental and no polynomial minor vanishes");
    note("a is algebraic and nonzero: u transcendental (Hermite-Lindemann), rank = generic rank");
    return true;
  }
  const Q a0 = exact_number(cl["point"], "/claim/point");
  if (a0 != 0) {
    check(drops.empty(), "/drops: at a rational a != 0, u = e^{a/q} is transcendental (Hermite-Lindemann): no drop");
    note("a = " + a0.str() + " != 0: u transcendental (Hermite-Lindemann), rank = generic rank");
  } else if (scores) {
    check(r == 0 ? drops.empty() : (drops.size() == 1 && drops[0].rank == 0 && is_drop_at_one(drops[0])), "/drops: S(0) = 0 has rank 0");
  } else {
    const bool root = g.size() > 1 && evaluate(g, Q(1)) == 0;
    check(root ? (drops.size() == 1 && is_drop_at_one(drops[0])) : drops.empty(), "/drops: g(1) " + std::string(root ? "= 0" : "!= 0"));
    note(std::string("a = 0: u = 1, g(1) ") + (root ? "= 0" : "!= 0"));
  }
  return drops.empty();
}

// A range claim: the listed drops are exactly the roots of g in the image of the range, each
// isolated (an interval with exactly one root, or an exact rational root); sorts `drops`.
void check_drops_in_range(const nlohmann::json& cl, bool scores, long r, const zpoly& g, const Z& q, std::vector<drop>& drops, const note_fn& note) {
  const range_t R = parse_range(field(cl, "range", "/claim").get<std::string>());
  if (scores) {
    const bool z = R.contains(Q(0)) && r > 0;
    check(z ? (drops.size() == 1 && drops[0].rank == 0 && is_drop_at_one(drops[0])) : drops.empty(),
          "/drops: the scores a*S0 drop (to 0) exactly at a = 0");
    return;
  }
  const range_image im = image_of_range(R, g, q, "roots of g");
  const bool one_in = R.contains(Q(0));
  check(static_cast<long>(drops.size()) == im.zeros,
        "/drops: the range contains " + std::to_string(im.zeros) + " roots of g, " + std::to_string(drops.size()) + " listed");
  std::sort(drops.begin(), drops.end(), [](const drop& a, const drop& b) { return a.lo < b.lo; });
  for (std::size_t t = 0; t < drops.size(); ++t) {
    const drop& d = drops[t];
    if (t > 0)
      check(drops[t - 1].hi <= d.lo && !(drops[t - 1].hi == d.lo && (drops[t - 1].lo == drops[t - 1].hi || d.lo == d.hi)), "/drops: overlapping intervals");
    if (d.lo == d.hi) {
      // an exact rational root: u = 1 (a = 0) when the range contains 0, or any other rational
      // root of g strictly inside the image of the range
      check(evaluate(g, d.lo) == 0, "/drops: a listed exact root is not a root of g");
      if (d.lo == 1) check(im.one_is_root && one_in, "/drops: u = 1 (a = 0) is not in the range");
      else check(d.lo > im.low && (!im.high || d.lo < *im.high), "/drops: an exact root outside the range's image");
    } else {
      check(evaluate(g, d.lo) != 0 && evaluate(g, d.hi) != 0 && roots_between(g, d.lo, d.hi) == 1, "/drops: an interval without exactly one root of g");
      check(d.lo >= im.low && (!im.high || d.hi <= *im.high), "/drops: an isolating interval not inside the range's image");
    }
  }
  note("Sturm: g has exactly " + std::to_string(im.zeros) + " root(s) u = e^{a/q} with a in " + field(cl, "range", "/claim").get<std::string>() +
       ", each isolated by a listed interval");
}

// The rank at each drop: every (k+1)-minor vanishes at u* and the listed k-minor (witness) does
// not (not for scores); the stated a-enclosure contains q·log u*.
void check_rank_at_drops(const nlohmann::json& dj, const rebuilt_claim& rc, const zpoly& g, const std::vector<drop>& drops, const note_fn& note) {
  const polynomial_matrix& F = rc.M;
  auto has_root_in = [&](const zpoly& h, const drop& d) {
    if (h.empty()) return true;
    if (d.lo == d.hi) return evaluate(h, d.lo) == 0;
    const zpoly c = primitive_gcd(g, h);
    return c.size() > 1 && roots_between(c, d.lo, d.hi) > 0;
  };
  for (std::size_t t = 0; t < drops.size(); ++t) {
    const drop& d = drops[t];
    // find the certificate entry again (sorted copy): match by interval
    const nlohmann::json* e = nullptr;
    for (const auto& x : dj)
      if (exact_number(x["u"][0], "/drops") == d.lo && exact_number(x["u"][1], "/drops") == d.hi) e = &x;
    const std::string w = "/drops (u in [" + d.lo.str() + ", " + d.hi.str() + "])";
    if (rc.scores) {  // the scores a·S0 drop (to rank 0) exactly at a = 0, u = 1 (checked above)
      const auto& aj = field(*e, "a", w);
      if (!aj.is_array() || aj.size() != 2) throw malformed(w + "/a: [lo, hi]");
      check(exact_number(aj[0], w + "/a/0") == 0 && exact_number(aj[1], w + "/a/1") == 0, w + "/a: the scores drop is exactly a = 0");
      continue;
    }
    bool all_vanish = true;
    for_each_subset(F.rows, d.rank + 1, [&](const std::vector<long>& rows) {
      if (!all_vanish) return;
      for_each_subset(F.cols, d.rank + 1, [&](const std::vector<long>& cols) {
        if (all_vanish && !has_root_in(minor_of(F, rows, cols), d)) all_vanish = false;
      });
    });
    check(all_vanish, w + ": some " + std::to_string(d.rank + 1) + "-minor is nonzero there: the rank is higher");
    if (d.rank > 0) {
      if (!e->contains("witness")) throw malformed(w + ": missing witness minor");
      const auto& wj = (*e)["witness"];
      const auto rows = index_list(field(wj, "rows", w), w + "/witness/rows", F.rows), cols = index_list(field(wj, "cols", w), w + "/witness/cols", F.cols);
      check(static_cast<long>(rows.size()) == d.rank && static_cast<long>(cols.size()) == d.rank, w + "/witness: wrong size");
      const zpoly wd = minor_of(F, rows, cols);
      check(wd == integer_polynomial(field(wj, "poly", w), w + "/witness/poly"), w + "/witness/poly: differs from the recomputed minor");
      check(!has_root_in(wd, d), w + "/witness: vanishes at the drop");
    }
    // the stated a-enclosure must contain q·log u*
    const auto& aj = field(*e, "a", w);
    if (!aj.is_array() || aj.size() != 2) throw malformed(w + "/a: [lo, hi]");
    const Q alo = exact_number(aj[0], w + "/a/0"), ahi = exact_number(aj[1], w + "/a/1");
    check(encloses_q_log(alo, ahi, d.lo, d.hi, F.q), w + "/a: the stated enclosure does not contain q log u");
    note("drop at a in [" + aj[0].get<std::string>() + ", " + aj[1].get<std::string>() + "]: rank exactly " + std::to_string(d.rank));
  }
}

// What the verdict rests on: the generic rank r (when a generic point is in the claim) and the drops.
struct rank_facts {
  long r = 0;
  zpoly g;
  std::vector<drop> drops;
  bool point = false, generic_present = true;
};

// The verdict: the relation holds at the generic rank (if present) and at every drop; a REFUTED
// certificate's counterexample must be a rank re-derived above.
void check_rank_verdict(const nlohmann::json& cert, const nlohmann::json& cl, const rebuilt_claim& rc, const rank_facts& f, const note_fn& note) {
  const std::string rel = field(cl, "relation", "/claim").get<std::string>();
  const long value = integer<long>(field(cl, "value", "/claim"), "/claim/value");
  auto holds = [&](long x) {
    if (rel == "=") return x == value;
    if (rel == "<=") return x <= value;
    if (rel == ">=") return x >= value;
    throw malformed("/claim/relation: =, <= or >=");
  };
  bool ok = true;
  if (f.generic_present && !holds(f.r)) ok = false;
  for (const auto& d : f.drops)
    if (!holds(d.rank)) ok = false;
  // The counterexample must be a rank re-derived above: a listed drop (same a-enclosure and
  // rank) or a generic point of the claim (rank r).
  if (!ok) {
    const nlohmann::json& ce = field(cert, "counterexample", "");
    const long crank = integer<long>(field(ce, "rank", "/counterexample"), "/counterexample/rank");
    check(!holds(crank), "/counterexample/rank: satisfies the claim");
    if (ce.contains("a_enclosure")) {
      bool found = false;
      for (const auto& x : cert["drops"])
        if (x.contains("a") && x["a"] == ce["a_enclosure"] && x["rank"] == ce["rank"]) found = true;
      check(found, "/counterexample/a_enclosure: not a listed drop with that rank");
    } else {
      const nlohmann::json& aj = field(ce, "a", "/counterexample");
      check(f.generic_present && crank == f.r, "/counterexample: a generic point has the generic rank, and none is in the claim here");
      if (cl.contains("point_algebraic_nonzero")) {
        check(aj == cl["point_algebraic_nonzero"], "/counterexample/a: not the claim's point");
      } else {
        const Q a = exact_number(aj, "/counterexample/a");
        if (f.point) check(a == exact_number(cl["point"], "/claim/point"), "/counterexample/a: not the claim's point");
        else check(parse_range(field(cl, "range", "/claim").get<std::string>()).contains(a), "/counterexample/a: outside the range");
        // a rational a ≠ 0 gives a transcendental u (no drop); a = 0 gives u = 1, a drop iff g(1) = 0
        if (a == 0) check(!rc.scores && (f.g.size() <= 1 || evaluate(f.g, Q(1)) != 0), "/counterexample/a: a = 0 is a drop, not a generic point");
      }
    }
    note("counterexample re-derived: rank " + std::to_string(crank));
  } else {
    check(!cert.contains("counterexample"), "/counterexample: present although the claim holds");
  }
  check_verdict(cert, ok, note);
}

}  // namespace

void verify_rank(const nlohmann::json& cert, const nlohmann::json& cl, const rebuilt_claim& rc, const note_fn& note) {
  rank_facts f;
  f.r = check_generic_rank_upper_bound(cert, rc.M, note);
  f.g = check_generic_rank_lower_bound(cert, rc.M, f.r, note);
  const nlohmann::json& dj = field(cert, "drops", "");
  f.drops = read_drops(dj, f.r);
  f.point = cl.contains("point_algebraic_nonzero") || cl.contains("point");
  if (f.point) {
    f.generic_present = check_drops_at_point(cl, rc.scores, f.r, f.g, f.drops, note);
  } else {
    check_drops_in_range(cl, rc.scores, f.r, f.g, rc.M.q, f.drops, note);
    f.generic_present = true;
  }
  check_rank_at_drops(dj, rc, f.g, f.drops, note);
  check_rank_verdict(cert, cl, rc, f, note);
}

}  // namespace attncert::verify::checker
