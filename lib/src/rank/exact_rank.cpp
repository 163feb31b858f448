// Exact rank of one attention layer by the transcendence method: see attention_rank.hpp and
// proofs/P08-transcendence-rank.md.
#include "attncert/rank/exact_rank.hpp"

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

namespace attncert {

namespace {

using boost::multiprecision::mpz_int;

// An entry: exponent -> integer coefficient (no zero coefficients).
using poly = std::map<mpz_int, mpz_int>;

struct poly_matrix {
  Eigen::Index rows = 0, cols = 0;
  std::vector<poly> e;  // row-major
  poly& at(Eigen::Index i, Eigen::Index j) { return e[static_cast<std::size_t>(i * cols + j)]; }
  const poly& at(Eigen::Index i, Eigen::Index j) const { return e[static_cast<std::size_t>(i * cols + j)]; }
};

mpz_int lcm_of_denominators(const matrix<mpq_rational>& M, const mask* support) {
  mpz_int l = 1;
  for (Eigen::Index i = 0; i < M.rows(); ++i)
    for (Eigen::Index j = 0; j < M.cols(); ++j) {
      if (support && !support->allows(i, j)) continue;
      const mpz_int d = denominator(M(i, j));
      l = boost::multiprecision::lcm(l, d);
    }
  return l;
}

mpz_int as_integer(const mpq_rational& x) {
  // Precondition: x is an integer.
  return numerator(x);
}

// RAII wrappers for FLINT objects.
struct nmod_mat_guard {
  nmod_mat_t m;
  nmod_mat_guard(slong r, slong c, mp_limb_t p) { nmod_mat_init(m, r, c, p); }
  ~nmod_mat_guard() { nmod_mat_clear(m); }
};
struct fmpz_poly_mat_guard {
  fmpz_poly_mat_t m;
  fmpz_poly_mat_guard(slong r, slong c) { fmpz_poly_mat_init(m, r, c); }
  ~fmpz_poly_mat_guard() { fmpz_poly_mat_clear(m); }
};
struct flint_rand_guard {
  flint_rand_t s;
  explicit flint_rand_guard(std::uint64_t seed) {
    flint_randinit(s);
    flint_randseed(s, static_cast<ulong>(seed), static_cast<ulong>(seed * 0x9E3779B97F4A7C15ull + 1));
  }
  ~flint_rand_guard() { flint_randclear(s); }
};

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
  nmod_mat_guard A(M.rows, M.cols, p);
  for (Eigen::Index i = 0; i < M.rows; ++i)
    for (Eigen::Index j = 0; j < M.cols; ++j) {
      ulong v = 0;
      for (const auto& [ex, co] : M.at(i, j)) {
        const ulong pw = n_powmod2_ui_preinv(t0, mod_ui(ex, p - 1), p, pinv);
        v = n_addmod(v, n_mulmod2_preinv(mod_ui(co, p), pw, p, pinv), p);
      }
      nmod_mat_entry(A.m, i, j) = v;
    }
  // Pivot columns from the rref of A.
  nmod_mat_guard R(M.rows, M.cols, p);
  nmod_mat_set(R.m, A.m);
  const slong r = nmod_mat_rref(R.m);
  out.rank = r;
  if (r == 0) return out;
  for (slong i = 0; i < r; ++i)
    for (slong j = 0; j < M.cols; ++j)
      if (nmod_mat_entry(R.m, i, j) != 0) { out.cols.push_back(j); break; }
  // Pivot rows: rref of the transpose of the selected columns.
  nmod_mat_guard T(r, M.rows, p);
  for (slong a = 0; a < r; ++a)
    for (slong i = 0; i < M.rows; ++i) nmod_mat_entry(T.m, a, i) = nmod_mat_entry(A.m, i, out.cols[static_cast<std::size_t>(a)]);
  nmod_mat_rref(T.m);
  for (slong a = 0; a < r; ++a)
    for (slong i = 0; i < M.rows; ++i)
      if (nmod_mat_entry(T.m, a, i) != 0) { out.rows.push_back(i); break; }
  nmod_mat_guard W(r, r, p);
  for (slong a = 0; a < r; ++a)
    for (slong b = 0; b < r; ++b)
      nmod_mat_entry(W.m, a, b) = nmod_mat_entry(A.m, out.rows[static_cast<std::size_t>(a)], out.cols[static_cast<std::size_t>(b)]);
  out.minor = nmod_mat_det(W.m);
  if (out.minor == 0) out.rank = 0;  // cannot happen; never claim without a witness
  return out;
}

// Exact right kernel over Q[t] when degrees are moderate; returns nullity or -1 if skipped.
long kernel_dimension(const poly_matrix& M, const rank_options& opt, std::string& witness) {
  if (M.rows > opt.max_kernel_size || M.cols > opt.max_kernel_size) return -1;
  long maxdeg = 0;
  for (const auto& e : M.e)
    for (const auto& [ex, co] : e) {
      if (ex < 0 || ex > opt.max_kernel_degree) return -1;
      maxdeg = std::max(maxdeg, ex.convert_to<long>());
    }
  fmpz_poly_mat_guard A(M.rows, M.cols);
  fmpz_t c;
  fmpz_init(c);
  for (Eigen::Index i = 0; i < M.rows; ++i)
    for (Eigen::Index j = 0; j < M.cols; ++j)
      for (const auto& [ex, co] : M.at(i, j)) {
        fmpz_set_mpz(c, co.backend().data());
        fmpz_poly_set_coeff_fmpz(fmpz_poly_mat_entry(A.m, i, j), ex.convert_to<slong>(), c);
      }
  fmpz_clear(c);
  fmpz_poly_mat_guard N(M.cols, M.cols);
  const slong nullity = fmpz_poly_mat_nullspace(N.m, A.m);
  // Verify: A·N_k = 0 for the first `nullity` columns, and those columns are independent.
  fmpz_poly_mat_guard K(M.cols, nullity);
  for (slong i = 0; i < M.cols; ++i)
    for (slong k = 0; k < nullity; ++k) fmpz_poly_set(fmpz_poly_mat_entry(K.m, i, k), fmpz_poly_mat_entry(N.m, i, k));
  fmpz_poly_mat_guard P(M.rows, nullity);
  if (nullity > 0) fmpz_poly_mat_mul(P.m, A.m, K.m);
  const bool zero = nullity == 0 || fmpz_poly_mat_is_zero(P.m);
  const slong rk = nullity == 0 ? 0 : fmpz_poly_mat_rank(K.m);
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

layer_object parse_layer_object(const std::string& s) {
  if (s == "scores") return layer_object::scores;
  if (s == "attention") return layer_object::attention;
  if (s == "output") return layer_object::output;
  if (s == "residual") return layer_object::residual;
  throw input_error("unknown object '" + s + "' (expected scores, attention, output or residual)");
}

const char* to_string(layer_object o) {
  switch (o) {
    case layer_object::scores: return "scores";
    case layer_object::attention: return "attention";
    case layer_object::output: return "output";
    default: return "residual";
  }
}

rank_interval exact_rank_rational(const matrix<mpq_rational>& M) {
  rank_interval r;
  if (M.size() == 0) {
    r.lo_witness = r.hi_witness = "empty matrix";
    return r;
  }
  const mpz_int l = lcm_of_denominators(M, nullptr);
  fmpz_mat_t A;
  fmpz_mat_init(A, M.rows(), M.cols());
  for (Eigen::Index i = 0; i < M.rows(); ++i)
    for (Eigen::Index j = 0; j < M.cols(); ++j) {
      const mpz_int v = as_integer(mpq_rational(M(i, j) * mpq_rational(l)));
      fmpz_set_mpz(fmpz_mat_entry(A, i, j), v.backend().data());
    }
  const slong rk = fmpz_mat_rank(A);
  fmpz_mat_clear(A);
  r.lo = r.hi = static_cast<std::size_t>(rk);
  r.lo_witness = r.hi_witness = "exact elimination over Q (FLINT fmpz_mat_rank)";
  return r;
}

rank_interval layer_rank(const matrix<mpq_rational>& B, const mask& M, layer_object object,
                         const std::optional<matrix<mpq_rational>>& V, const std::optional<matrix<mpq_rational>>& X,
                         const rank_options& opt) {
  if (object == layer_object::scores) return exact_rank_rational(B);
  M.check_shape(B.rows(), B.cols());
  const Eigen::Index m = B.rows(), n = B.cols();
  if ((object == layer_object::output || object == layer_object::residual) && !V)
    throw input_error(std::string("the ") + to_string(object) + " rank needs values V");
  if (V && V->rows() != n)
    throw input_error("V has " + std::to_string(V->rows()) + " rows but there are " + std::to_string(n) + " keys");
  if (object == layer_object::residual) {
    if (!X) throw input_error("the residual rank needs X");
    if (X->rows() != m || X->cols() != V->cols())
      throw input_error("X must have shape (" + std::to_string(m) + ", " + std::to_string(V->cols()) + ")");
  }
  // Integer exponents on the support, shifted per row to start at 0.
  const mpz_int q = lcm_of_denominators(B, &M);
  std::vector<std::vector<mpz_int>> e(static_cast<std::size_t>(m), std::vector<mpz_int>(static_cast<std::size_t>(n)));
  std::vector<std::vector<bool>> s(static_cast<std::size_t>(m), std::vector<bool>(static_cast<std::size_t>(n), false));
  for (Eigen::Index i = 0; i < m; ++i) {
    bool any = false;
    mpz_int lo = 0;
    for (Eigen::Index j = 0; j < n; ++j) {
      if (!M.allows(i, j)) continue;
      const auto ii = static_cast<std::size_t>(i), jj = static_cast<std::size_t>(j);
      s[ii][jj] = true;
      e[ii][jj] = as_integer(mpq_rational(B(i, j) * mpq_rational(q)));
      if (!any || e[ii][jj] < lo) lo = e[ii][jj];
      any = true;
    }
    if (!any) throw input_error("row " + std::to_string(i) + " is fully masked: softmax is undefined");
    for (Eigen::Index j = 0; j < n; ++j)
      if (s[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]) e[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] -= lo;
  }
  // Divide the exponents by their gcd G: t ↦ t^G maps one transcendental number to another
  // (t^G = e^{G·c/q}), so the rank over Q(t) is unchanged, while the degrees (and the exact
  // kernel's cost) shrink: scores multiplied by 10^4 get the same polynomials as the original.
  mpz_int G = 0;
  for (std::size_t i = 0; i < e.size(); ++i)
    for (std::size_t j = 0; j < e[i].size(); ++j)
      if (s[i][j] && e[i][j] != 0) G = G == 0 ? mpz_int(e[i][j]) : mpz_int(boost::multiprecision::gcd(G, e[i][j]));
  if (G > 1)
    for (std::size_t i = 0; i < e.size(); ++i)
      for (std::size_t j = 0; j < e[i].size(); ++j)
        if (s[i][j]) e[i][j] /= G;
  // The polynomial matrix whose rank over Q(t) is the answer.
  poly_matrix P;
  P.rows = m;
  std::size_t hi = 0;
  std::string hi_witness;
  if (object == layer_object::attention) {
    P.cols = n;
    P.e.resize(static_cast<std::size_t>(m * n));
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index j = 0; j < n; ++j)
        if (s[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]) P.at(i, j)[e[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]] = 1;
    // Structure: proportional rows / columns of E.
    std::vector<std::vector<mpz_int>> et(static_cast<std::size_t>(n), std::vector<mpz_int>(static_cast<std::size_t>(m)));
    std::vector<std::vector<bool>> st(static_cast<std::size_t>(n), std::vector<bool>(static_cast<std::size_t>(m)));
    for (std::size_t i = 0; i < static_cast<std::size_t>(m); ++i)
      for (std::size_t j = 0; j < static_cast<std::size_t>(n); ++j) { et[j][i] = e[i][j]; st[j][i] = s[i][j]; }
    const std::size_t rc = row_classes(e, s), cc = row_classes(et, st);
    hi = std::min<std::size_t>({static_cast<std::size_t>(m), static_cast<std::size_t>(n), rc, cc});
    hi_witness = "structure: min(rows, cols, " + std::to_string(rc) + " distinct row patterns, " + std::to_string(cc) +
                 " distinct column patterns of E) = " + std::to_string(hi);
  } else {
    const Eigen::Index d = V->cols();
    const mpz_int L = boost::multiprecision::lcm(lcm_of_denominators(*V, nullptr),
                                                 X ? lcm_of_denominators(*X, nullptr) : mpz_int(1));
    P.cols = d;
    P.e.resize(static_cast<std::size_t>(m * d));
    for (Eigen::Index i = 0; i < m; ++i)
      for (Eigen::Index k = 0; k < d; ++k) {
        poly& p = P.at(i, k);
        for (Eigen::Index j = 0; j < n; ++j) {
          if (!s[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]) continue;
          mpq_rational c = (*V)(j, k);
          if (X) c += (*X)(i, k);  // D(t) X + E(t) V: coefficient of t^{e_ij} is X_ik + V_jk
          const mpz_int ci = as_integer(mpq_rational(c * mpq_rational(L)));
          if (ci == 0) continue;
          auto& slot = p[e[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]];
          slot += ci;
          if (slot == 0) p.erase(e[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]);
        }
      }
    if (object == layer_object::output) {
      const std::size_t rv = exact_rank_rational(*V).hi;
      hi = std::min<std::size_t>({static_cast<std::size_t>(m), static_cast<std::size_t>(d), rv});
      hi_witness = "structure: rank(AV) <= min(rows, cols, rank V = " + std::to_string(rv) + ") = " + std::to_string(hi);
    } else {
      hi = std::min<std::size_t>(static_cast<std::size_t>(m), static_cast<std::size_t>(d));
      hi_witness = "structure: min(rows, cols) = " + std::to_string(hi);
    }
  }
  rank_interval out;
  out.hi = hi;
  out.hi_witness = hi_witness;
  flint_rand_guard rnd(opt.seed);
  modular_rank best;
  auto try_lower = [&](int times) {
    for (int k = 0; k < times && static_cast<std::size_t>(best.rank) < out.hi; ++k) {
      modular_rank r = evaluate_rank(P, rnd.s);
      if (r.rank > best.rank || best.p == 0) best = r;
    }
  };
  try_lower(opt.evaluations);
  if (static_cast<std::size_t>(best.rank) < out.hi) {
    std::string w;
    const long nullity = kernel_dimension(P, opt, w);
    if (nullity >= 0 && static_cast<std::size_t>(P.cols - nullity) < out.hi) {
      out.hi = static_cast<std::size_t>(P.cols - nullity);
      out.hi_witness = w;
    }
    try_lower(4 * opt.evaluations);  // a rank drop at a random point is unlikely; retry
  }
  out.lo = static_cast<std::size_t>(best.rank);
  std::ostringstream os;
  if (best.rank == 0) {
    os << "trivial (rank >= 0)";
  } else {
    os << "nonzero " << best.rank << "x" << best.rank << " minor mod p = " << best.p << " at t = " << best.t0
       << " (rows " << join(best.rows) << ", cols " << join(best.cols) << ", value " << best.minor
       << "); with q = " << q.str() << (G > 1 ? " and exponents divided by their gcd " + G.str() + ", t = exp(" + G.str() + "c/q)" : std::string(", t = exp(c/q)"))
       << " (c != 0 algebraic) is transcendental (Hermite-Lindemann)";
  }
  out.lo_witness = os.str();
  if (out.lo > out.hi) throw std::logic_error("attention rank: lower bound exceeds upper bound (bug)");
  return out;
}

}  // namespace attncert
