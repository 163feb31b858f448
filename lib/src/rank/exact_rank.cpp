// Exact rank of one attention layer by the transcendence method: see attention_rank.hpp and
// proofs/P08-transcendence-rank.md.
#include "attncert/rank/exact_rank.hpp"

#include "attncert/number/c_handles.hpp"

#include <flint/flint.h>
#include <flint/fmpz.h>
#include <flint/fmpz_mat.h>
#include <flint/fmpz_poly.h>
#include <flint/fmpz_poly_mat.h>
#include <flint/nmod_mat.h>
#include <flint/ulong_extras.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

namespace attncert {

namespace {

using poly_matrix = layer_polynomial_matrix;

mpz_int as_integer(const mpq_rational& x) {
  // Precondition: x is an integer.
  return numerator(x);
}

ulong mod_ui(const mpz_int& x, ulong p) {
  // Non-negative residue of x mod p.
  return static_cast<ulong>(mpz_fdiv_ui(x.backend().data(), p));
}

std::string join(const std::vector<slong>& v) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  os << "]";
  return os.str();
}

struct modular_rank {
  slong rank = 0;
  ulong p = 0, t0 = 0;
  std::vector<slong> rows, cols;
  ulong minor = 0;
};

// Rank of M(t0) mod p with a witness minor (pivot rows and columns, its determinant ≠ 0).
modular_rank evaluate_rank(const poly_matrix& M, flint_rand_t state) {
  modular_rank out;
  const ulong p = n_randprime(state, 62, 1);
  const ulong t0 = 2 + n_randint(state, p - 3);
  const ulong pinv = n_preinvert_limb(p);
  out.p = p;
  out.t0 = t0;
  const auto rows = static_cast<slong>(M.rows), cols = static_cast<slong>(M.cols);
  nmod_mat_var A(rows, cols, p);
  for (slong i = 0; i < rows; ++i)
    for (slong j = 0; j < cols; ++j) {
      ulong v = 0;
      for (const auto& [ex, co] : M.at(static_cast<std::size_t>(i), static_cast<std::size_t>(j))) {
        const ulong pw = n_powmod2_ui_preinv(t0, mod_ui(ex, p - 1), p, pinv);
        v = n_addmod(v, n_mulmod2_preinv(mod_ui(co, p), pw, p, pinv), p);
      }
      nmod_mat_entry(A.v, i, j) = v;
    }
  // Pivot columns from the rref of A.
  nmod_mat_var R(rows, cols, p);
  nmod_mat_set(R.v, A.v);
  const slong r = nmod_mat_rref(R.v);
  out.rank = r;
  if (r == 0) return out;
  for (slong i = 0; i < r; ++i)
    for (slong j = 0; j < cols; ++j)
      if (nmod_mat_entry(R.v, i, j) != 0) { out.cols.push_back(j); break; }
  // Pivot rows: rref of the transpose of the selected columns.
  nmod_mat_var T(r, rows, p);
  for (slong a = 0; a < r; ++a)
    for (slong i = 0; i < rows; ++i) nmod_mat_entry(T.v, a, i) = nmod_mat_entry(A.v, i, out.cols[static_cast<std::size_t>(a)]);
  nmod_mat_rref(T.v);
  for (slong a = 0; a < r; ++a)
    for (slong i = 0; i < rows; ++i)
      if (nmod_mat_entry(T.v, a, i) != 0) { out.rows.push_back(i); break; }
  nmod_mat_var W(r, r, p);
  for (slong a = 0; a < r; ++a)
    for (slong b = 0; b < r; ++b)
      nmod_mat_entry(W.v, a, b) = nmod_mat_entry(A.v, out.rows[static_cast<std::size_t>(a)], out.cols[static_cast<std::size_t>(b)]);
  out.minor = nmod_mat_det(W.v);
  if (out.minor == 0) out.rank = 0;  // cannot happen; never claim without a witness
  return out;
}

// Exact right kernel over Q[t] when degrees are moderate; returns nullity or -1 if skipped.
long kernel_dimension(const poly_matrix& M, const rank_options& opt, std::string& witness) {
  const auto rows = static_cast<slong>(M.rows), cols = static_cast<slong>(M.cols);
  if (rows > opt.max_kernel_size || cols > opt.max_kernel_size) return -1;
  long maxdeg = 0;
  for (const auto& e : M.entries)
    for (const auto& [ex, co] : e) {
      if (ex < 0 || ex > opt.max_kernel_degree) return -1;
      maxdeg = std::max(maxdeg, ex.convert_to<long>());
    }
  fmpz_poly_mat_var A(rows, cols);
  fmpz_var c;
  for (slong i = 0; i < rows; ++i)
    for (slong j = 0; j < cols; ++j)
      for (const auto& [ex, co] : M.at(static_cast<std::size_t>(i), static_cast<std::size_t>(j))) {
        fmpz_set_mpz(c.v, co.backend().data());
        fmpz_poly_set_coeff_fmpz(fmpz_poly_mat_entry(A.v, i, j), ex.convert_to<slong>(), c.v);
      }
  fmpz_poly_mat_var N(cols, cols);
  const slong nullity = fmpz_poly_mat_nullspace(N.v, A.v);
  // Verify: A·N_k = 0 for the first `nullity` columns, and those columns are independent.
  fmpz_poly_mat_var K(cols, nullity);
  for (slong i = 0; i < cols; ++i)
    for (slong k = 0; k < nullity; ++k) fmpz_poly_set(fmpz_poly_mat_entry(K.v, i, k), fmpz_poly_mat_entry(N.v, i, k));
  fmpz_poly_mat_var P(rows, nullity);
  if (nullity > 0) fmpz_poly_mat_mul(P.v, A.v, K.v);
  const bool zero = nullity == 0 || fmpz_poly_mat_is_zero(P.v);
  const slong rk = nullity == 0 ? 0 : fmpz_poly_mat_rank(K.v);
  if (!zero || rk != nullity) return -1;  // never claim an unverified kernel
  std::ostringstream os;
  os << "exact kernel over Q[t]: " << nullity << " independent polynomial vectors N(t) (degree <= " << maxdeg
     << " entries) with M(t) N(t) = 0 verified (FLINT)";
  witness = os.str();
  return nullity;
}

// Number of proportionality classes of the rows / columns of E (support + exponent pattern).
std::size_t row_classes(const std::vector<std::vector<mpz_int>>& e, const std::vector<std::vector<bool>>& s) {
  std::set<std::pair<std::vector<bool>, std::vector<mpz_int>>> k;
  for (std::size_t i = 0; i < e.size(); ++i) {
    std::vector<mpz_int> row;
    mpz_int base = 0;
    bool first = true;
    for (std::size_t j = 0; j < e[i].size(); ++j)
      if (s[i][j]) {
        if (first) { base = e[i][j]; first = false; }
        row.push_back(e[i][j] - base);
      }
    k.insert({s[i], row});
  }
  return k.size();
}

}  // namespace

rank_interval exact_rank_rational(const matrix<mpq_rational>& M) {
  rank_interval r;
  if (M.size() == 0) {
    r.lo_witness = r.hi_witness = "empty matrix";
    return r;
  }
  const mpz_int l = lcm_of_denominators(M, nullptr);
  fmpz_mat_var A(M.rows(), M.cols());
  for (Eigen::Index i = 0; i < M.rows(); ++i)
    for (Eigen::Index j = 0; j < M.cols(); ++j) {
      const mpz_int v = as_integer(mpq_rational(M(i, j) * mpq_rational(l)));
      fmpz_set_mpz(fmpz_mat_entry(A.v, i, j), v.backend().data());
    }
  const slong rk = fmpz_mat_rank(A.v);
  r.lo = r.hi = static_cast<std::size_t>(rk);
  r.lo_witness = r.hi_witness = "exact elimination over Q (FLINT fmpz_mat_rank)";
  return r;
}

namespace {

// Upper bound from structure: for the attention object, proportional rows / columns of E;
// for output, min(rows, cols, rank V); for residual, min(rows, cols).
std::pair<std::size_t, std::string> structural_upper_bound(const layer_model& layer, const layer_exponents& ex,
                                                           const poly_matrix& P) {
  const std::size_t m = P.rows, d = P.cols;
  if (layer.object == layer_object::attention) {
    const std::size_t n = d;
    std::vector<std::vector<mpz_int>> et(n, std::vector<mpz_int>(m));
    std::vector<std::vector<bool>> st(n, std::vector<bool>(m));
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        et[j][i] = ex.e[i][j];
        st[j][i] = ex.support[i][j];
      }
    const std::size_t rc = row_classes(ex.e, ex.support), cc = row_classes(et, st);
    const std::size_t hi = std::min<std::size_t>({m, n, rc, cc});
    return {hi, "structure: min(rows, cols, " + std::to_string(rc) + " distinct row patterns, " + std::to_string(cc) +
                    " distinct column patterns of E) = " + std::to_string(hi)};
  }
  if (layer.object == layer_object::output) {
    const std::size_t rv = exact_rank_rational(*layer.V).hi;
    const std::size_t hi = std::min<std::size_t>({m, d, rv});
    return {hi, "structure: rank(AV) <= min(rows, cols, rank V = " + std::to_string(rv) + ") = " + std::to_string(hi)};
  }
  const std::size_t hi = std::min(m, d);
  return {hi, "structure: min(rows, cols) = " + std::to_string(hi)};
}

std::string lower_witness(const modular_rank& best, const mpz_int& q, const mpz_int& G) {
  std::ostringstream os;
  if (best.rank == 0) {
    os << "trivial (rank >= 0)";
  } else {
    os << "nonzero " << best.rank << "x" << best.rank << " minor mod p = " << best.p << " at t = " << best.t0
       << " (rows " << join(best.rows) << ", cols " << join(best.cols) << ", value " << best.minor
       << "); with q = " << q.str() << (G > 1 ? " and exponents divided by their gcd " + G.str() + ", t = exp(" + G.str() + "c/q)" : std::string(", t = exp(c/q)"))
       << " (c != 0 algebraic) is transcendental (Hermite-Lindemann)";
  }
  return os.str();
}

}  // namespace

rank_interval layer_rank(const layer_model& layer, const rank_options& opt) {
  if (layer.object == layer_object::scores) return exact_rank_rational(layer.B);
  layer.validate();
  layer_exponents ex = row_normalized_exponents(layer);
  // Divide the exponents by their gcd G: t ↦ t^G maps one transcendental number to another
  // (t^G = e^{G·c/q}), so the rank over Q(t) is unchanged, while the degrees (and the exact
  // kernel's cost) shrink: scores multiplied by 10^4 get the same polynomials as the original.
  const mpz_int G = ex.gcd();
  if (G > 1) ex.divide_by(G);
  const poly_matrix P = build_layer_matrix(layer, ex);  // the matrix whose rank over Q(t) is the answer
  rank_interval out;
  std::tie(out.hi, out.hi_witness) = structural_upper_bound(layer, ex, P);
  flint_rand_var rnd(opt.seed);
  modular_rank best;
  auto try_lower = [&](int times) {
    for (int k = 0; k < times && static_cast<std::size_t>(best.rank) < out.hi; ++k) {
      modular_rank r = evaluate_rank(P, rnd.v);
      if (r.rank > best.rank || best.p == 0) best = r;
    }
  };
  try_lower(opt.evaluations);
  if (static_cast<std::size_t>(best.rank) < out.hi) {
    std::string w;
    const long nullity = kernel_dimension(P, opt, w);
    if (nullity >= 0 && P.cols - static_cast<std::size_t>(nullity) < out.hi) {
      out.hi = P.cols - static_cast<std::size_t>(nullity);
      out.hi_witness = w;
    }
    try_lower(4 * opt.evaluations);  // a rank drop at a random point is unlikely; retry
  }
  out.lo = static_cast<std::size_t>(best.rank);
  out.lo_witness = lower_witness(best, ex.q, G);
  if (out.lo > out.hi) throw std::logic_error("attention rank: lower bound exceeds upper bound (bug)");
  return out;
}

rank_interval layer_rank(const matrix<mpq_rational>& B, const mask& M, layer_object object,
                         const std::optional<matrix<mpq_rational>>& V, const std::optional<matrix<mpq_rational>>& X,
                         const rank_options& opt) {
  return layer_rank(layer_model{B, M, object, V, X}, opt);
}

}  // namespace attncert
