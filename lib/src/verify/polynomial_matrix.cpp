// M(u), rebuilt from the claim's own data (S0, mask, V, X), u = e^{a/q}.  See checker.hpp.
//   scores:     M = L·S0 (constant in u; the scores are a·S0)
//   attention:  A_ij = u^{e_ij} / D_i(u), e_ij = q·S0_ij − min_j q·S0_ij, D_i = Σ_j u^{e_ij}
//   output:     (A V)_ik = Σ_j u^{e_ij} L V_jk / (L D_i(u))     (residual: V_jk + X_ik)
// where only unmasked entries enter, q is the lcm of their denominators and L that of V (and X).
#include <algorithm>

#include "checker.hpp"

namespace attncert::verify::checker {

namespace {

using mask_t = std::vector<std::vector<bool>>;  // true: the entry is not masked

std::size_t z(long i) { return static_cast<std::size_t>(i); }

// /claim/mask: "none", "causal" or a 0/1 matrix of the shape of S0.
mask_t unmasked_entries(const nlohmann::json& claim, long m, long n) {
  mask_t allow(z(m), std::vector<bool>(z(n), true));
  const nlohmann::json& mk = field(claim, "mask", "/claim");
  if (mk.is_string() && mk.get<std::string>() == "causal") {
    for (long i = 0; i < m; ++i)
      for (long j = 0; j < n; ++j) allow[z(i)][z(j)] = j <= i;
  } else if (mk.is_array()) {
    if (static_cast<long>(mk.size()) != m) throw malformed("/claim/mask: shape");
    for (long i = 0; i < m; ++i) {
      if (!mk[z(i)].is_array() || static_cast<long>(mk[z(i)].size()) != n) throw malformed("/claim/mask: shape");
      for (long j = 0; j < n; ++j) {
        const auto& e = mk[z(i)][z(j)];
        if (!e.is_number_integer() || (e != 0 && e != 1)) throw malformed("/claim/mask: 0/1 entries");
        allow[z(i)][z(j)] = e == 1;
      }
    }
  } else if (!(mk.is_string() && mk.get<std::string>() == "none")) {
    throw malformed("/claim/mask: none, causal or a 0/1 matrix");
  }
  return allow;
}

// p += c·u^k
void add_monomial(zpoly& p, long k, const Z& c) {
  if (static_cast<long>(p.size()) <= k) p.resize(z(k + 1));
  p[z(k)] += c;
}

// scores: the integer matrix L·S0 (L the lcm of the denominators), constant polynomials
void build_scores_matrix(const qmatrix& S0, polynomial_matrix& F) {
  Z L = 1;
  for (const auto& r : S0)
    for (const auto& x : r) L = boost::multiprecision::lcm(L, denominator(x));
  F.cols = static_cast<long>(S0[0].size());
  for (const auto& r : S0)
    for (const auto& x : r) {
      const Z c = numerator(Q(x * Q(L)));
      F.entries.push_back(c == 0 ? zpoly{} : zpoly{c});
    }
}

// The exponents e_ij of the row-normalized exponentials (sets F.q) and the row sums D_i(u).
std::vector<std::vector<long>> softmax_exponents(const qmatrix& S0, const mask_t& allow, polynomial_matrix& F, std::vector<zpoly>& row_sums) {
  const long m = static_cast<long>(S0.size()), n = static_cast<long>(S0[0].size());
  Z qd = 1;
  for (long i = 0; i < m; ++i)
    for (long j = 0; j < n; ++j)
      if (allow[z(i)][z(j)]) qd = boost::multiprecision::lcm(qd, denominator(S0[z(i)][z(j)]));
  F.q = qd;
  std::vector<std::vector<long>> ex(z(m), std::vector<long>(z(n), 0));
  for (long i = 0; i < m; ++i) {
    std::optional<Z> lo;
    for (long j = 0; j < n; ++j)
      if (allow[z(i)][z(j)]) {
        const Z e = numerator(Q(S0[z(i)][z(j)] * Q(qd)));
        if (!lo || e < *lo) lo = e;
      }
    if (!lo) throw malformed("/claim/mask: a fully masked row");
    for (long j = 0; j < n; ++j)
      if (allow[z(i)][z(j)]) {
        const Z d = numerator(Q(S0[z(i)][z(j)] * Q(qd))) - *lo;
        if (d > 1000) throw malformed("/claim/S0: exponent spread too large (limit 1000)");
        ex[z(i)][z(j)] = d.convert_to<long>();
      }
    zpoly Di;
    for (long j = 0; j < n; ++j)
      if (allow[z(i)][z(j)]) add_monomial(Di, ex[z(i)][z(j)], Z(1));
    row_sums.push_back(Di);
  }
  return ex;
}

// output / residual: M_ik = Σ_j u^{e_ij} L (V_jk [+ X_ik]); sets the value scale L
void build_value_matrix(const rebuilt_claim& rc, const std::optional<qmatrix>& V, const std::optional<qmatrix>& X, const mask_t& allow,
                        const std::vector<std::vector<long>>& ex, polynomial_matrix& F, Z& value_scale) {
  const long m = F.rows, n = static_cast<long>(allow[0].size());
  const bool residual = rc.object == "residual";
  if (!V || static_cast<long>(V->size()) != n) throw malformed("/claim/V: needed, with one row per key");
  const long d = static_cast<long>((*V)[0].size());
  if (residual && (!X || static_cast<long>(X->size()) != m || static_cast<long>((*X)[0].size()) != d))
    throw malformed("/claim/X: needed, shape (queries, value width)");
  Z L = 1;
  for (const auto& r : *V)
    for (const auto& x : r) L = boost::multiprecision::lcm(L, denominator(x));
  if (residual)
    for (const auto& r : *X)
      for (const auto& x : r) L = boost::multiprecision::lcm(L, denominator(x));
  value_scale = L;
  F.cols = d;
  F.entries.assign(z(m * d), {});
  for (long i = 0; i < m; ++i)
    for (long k = 0; k < d; ++k)
      for (long j = 0; j < n; ++j) {
        if (!allow[z(i)][z(j)]) continue;
        Q c = (*V)[z(j)][z(k)];
        if (residual) c += (*X)[z(i)][z(k)];
        add_monomial(F.entries[z(i * d + k)], ex[z(i)][z(j)], numerator(Q(c * Q(L))));
      }
  for (auto& p : F.entries) trim(p);
}

}  // namespace

rebuilt_claim rebuild_claim_matrix(const nlohmann::json& cert, const nlohmann::json& cl, const note_fn& note) {
  const qmatrix S0 = rational_matrix(field(cl, "S0", "/claim"), "/claim/S0");
  const long m = static_cast<long>(S0.size()), n = static_cast<long>(S0[0].size());
  const mask_t allow = unmasked_entries(cl, m, n);
  rebuilt_claim rc;
  rc.object = field(cl, "object", "/claim").get<std::string>();
  std::optional<qmatrix> V, X;
  if (cl.contains("V")) V = rational_matrix(cl["V"], "/claim/V");
  if (cl.contains("X")) X = rational_matrix(cl["X"], "/claim/X");
  polynomial_matrix& F = rc.M;
  F.rows = m;
  rc.scores = rc.object == "scores";
  if (rc.scores) {
    build_scores_matrix(S0, F);
  } else {
    if (rc.object != "attention" && rc.object != "output" && rc.object != "residual") throw malformed("/claim/object: unknown");
    const auto ex = softmax_exponents(S0, allow, F, rc.row_sums);
    if (rc.object == "attention") {
      F.cols = n;
      F.entries.assign(z(m * n), {});
      for (long i = 0; i < m; ++i)
        for (long j = 0; j < n; ++j)
          if (allow[z(i)][z(j)]) add_monomial(F.entries[z(i * n + j)], ex[z(i)][z(j)], Z(1));
    } else {
      build_value_matrix(rc, V, X, allow, ex, F, rc.value_scale);
    }
  }
  if (std::min(F.rows, F.cols) > 8) throw malformed("/claim: the checker handles matrices with min(rows, cols) <= 8");
  check(parse_integer(field(cert, "q", "").get<std::string>(), "/q") == F.q, "/q: the common denominator is " + F.q.str());
  note("rebuilt M(u) (" + std::to_string(F.rows) + "x" + std::to_string(F.cols) + ", " + rc.object + ") from the claim; q = " + F.q.str());
  return rc;
}

}  // namespace attncert::verify::checker
