// Exact rank of one attention layer by the transcendence method: see exact_rank.hpp and
// proofs/P08-transcendence-rank.md.
#include "attncert/rank/exact_rank.hpp"

#include "attncert/number/c_handles.hpp"

#include <boost/multiprecision/integer.hpp>

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
  bool whole = false;  ///< the minor is the whole (square) matrix
};

// Rank of A over F_p (p = A's modulus, a prime) with a witness minor: for a square A first
// det(A) by one elimination on a copy (det ≠ 0: the whole matrix is the witness); otherwise
// the pivot columns of rref(A), the pivot rows of rref of those columns' transpose, and the
// determinant of that minor, recomputed (never claim without a witness).  try_det = false
// skips the determinant when the rank is known to be short of full.
void witnessed_rank(const nmod_mat_t A, modular_rank& out, bool try_det = true) {
  const slong rows = nmod_mat_nrows(A), cols = nmod_mat_ncols(A);
  const ulong p = A->mod.n;
  out.rank = 0;
  out.rows.clear();
  out.cols.clear();
  out.minor = 0;
  out.whole = false;
  if (rows == 0 || cols == 0) return;
  if (try_det && rows == cols) {
    // A triangular matrix (E under a causal mask) has det = Π diag: O(n²) instead of O(n³).
    bool lower = true, upper = true;
    for (slong i = 0; i < rows && (lower || upper); ++i)
      for (slong j = 0; j < cols && (lower || upper); ++j)
        if (nmod_mat_entry(A, i, j) != 0) {
          if (j > i) lower = false;
          if (j < i) upper = false;
        }
    ulong det = 1;
    if (lower || upper)
      for (slong i = 0; i < rows; ++i) det = nmod_mul(det, nmod_mat_entry(A, i, i), A->mod);
    else
      det = nmod_mat_det(A);
    if (det != 0) {
      out.rank = rows;
      for (slong i = 0; i < rows; ++i) out.rows.push_back(i);
      out.cols = out.rows;
      out.minor = det;
      out.whole = true;
      return;
    }
  }
  // Pivot columns from the rref of A.
  std::vector<slong> pc, pr;
  slong r = 0;
  {
    nmod_mat_var R(rows, cols, p);
    nmod_mat_set(R.v, A);
    r = nmod_mat_rref(R.v);
    if (r == 0) return;
    for (slong i = 0; i < r; ++i)
      for (slong j = 0; j < cols; ++j)
        if (nmod_mat_entry(R.v, i, j) != 0) { pc.push_back(j); break; }
  }
  // Pivot rows: rref of the transpose of the selected columns.
  nmod_mat_var T(r, rows, p);
  for (slong a = 0; a < r; ++a)
    for (slong i = 0; i < rows; ++i) nmod_mat_entry(T.v, a, i) = nmod_mat_entry(A, i, pc[static_cast<std::size_t>(a)]);
  nmod_mat_rref(T.v);
  for (slong a = 0; a < r; ++a)
    for (slong i = 0; i < rows; ++i)
      if (nmod_mat_entry(T.v, a, i) != 0) { pr.push_back(i); break; }
  nmod_mat_var W(r, r, p);
  for (slong a = 0; a < r; ++a)
    for (slong b = 0; b < r; ++b)
      nmod_mat_entry(W.v, a, b) = nmod_mat_entry(A, pr[static_cast<std::size_t>(a)], pc[static_cast<std::size_t>(b)]);
  const ulong minor = nmod_mat_det(W.v);
  if (minor == 0 || pr.size() != pc.size()) return;  // cannot happen; never claim without a witness
  out.rank = r;
  out.rows = std::move(pr);
  out.cols = std::move(pc);
  out.minor = minor;
  out.whole = r == rows && r == cols;
}

// Rank of M(t0) mod p with a witness minor (pivot rows and columns, its determinant ≠ 0).
modular_rank evaluate_rank(const poly_matrix& M, flint_rand_t state) {
  modular_rank out;
  const ulong p = n_randprime(state, 62, 1);
  const ulong t0 = 2 + n_randint(state, p - 3);
  const ulong pinv = n_preinvert_limb(p);
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
  witnessed_rank(A.v, out);
  out.p = p;
  out.t0 = t0;
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

// ---------------------------------------------------------------------------------------------
// layer_rank_from_factors: see exact_rank.hpp and proofs/P08, "Scores in factored form".

namespace {

// The prime's size for matrices whose dimensions (hence dot-product lengths) are at most len.
// FLINT accumulates a modular dot product in one 64-bit limb when len·(p − 1)² < 2^64
// (_nmod_vec_dot_bound_limbs), i.e. for p < 2^b with b = ⌊(64 − ⌈log₂ len⌉)/2⌋; nmod_mat_det,
// _rref and _mul are then 2–3× faster than with a 62-bit prime (measured at n = 1024: det
// 0.16 s with a 27-bit p, 0.46 s with a 62-bit p).  Any prime gives a sound lower bound; a
// smaller one only makes an unlucky point (hence a retry) likelier, heuristically ~1/p per
// minor.  Floor 20 bits (one limb is out of reach beyond 2^24 tokens anyway), cap 62.
ulong factored_prime_bits(slong len) {
  int lg = 0;
  while (lg < 62 && (slong(1) << lg) < len) ++lg;
  return static_cast<ulong>(std::clamp((64 - lg) / 2, 20, 62));
}

// t0^e mod p for many e ∈ [0, p − 1) and one base t0: with T_m[c] = t0^{c·256^m} (c < 256,
// m < bytes ≤ 8, at most 2048 entries), t0^e = Π_m T_m[byte m of e]: at most 7 modular
// products per power instead of a square-and-multiply chain of ~2·log₂ p.
class power_table {
 public:
  power_table(ulong t0, ulong p) : p_(p), pinv_(n_preinvert_limb(p)) {
    while (bytes_ < 8 && ((p - 1) >> (8 * bytes_)) != 0) ++bytes_;  // every e < p − 1 fits in `bytes_` bytes
    table_.resize(256 * static_cast<std::size_t>(bytes_));
    ulong base = t0;  // t0^{256^m}
    for (unsigned m = 0; m < bytes_; ++m) {
      ulong* t = &table_[256 * m];
      t[0] = 1;
      for (unsigned c = 1; c < 256; ++c) t[c] = n_mulmod2_preinv(t[c - 1], base, p_, pinv_);
      base = n_mulmod2_preinv(t[255], base, p_, pinv_);
    }
  }
  /// t0^e mod p.  Precondition: e < p − 1 (an exponent already reduced mod p − 1).
  ulong operator()(ulong e) const {
    ulong v = table_[e & 255];
    for (unsigned m = 1; m < bytes_; ++m) v = n_mulmod2_preinv(v, table_[256 * m + ((e >> (8 * m)) & 255)], p_, pinv_);
    return v;
  }

 private:
  ulong p_, pinv_;
  unsigned bytes_ = 1;
  std::vector<ulong> table_;
};

// "2^k" for a power of two, else the decimal digits.
std::string describe_integer(const mpz_int& x) {
  const auto* z = x.backend().data();
  if (mpz_sgn(z) > 0 && mpz_popcount(z) == 1) return "2^" + std::to_string(mpz_sizeinbase(z, 2) - 1);
  return x.str();
}

// out = l·x, an integer.  Precondition: l is a multiple of x's denominator.
void scaled_integer(fmpz_t out, const mpq_rational& x, const mpz_int& l, mpz_int& tmp) {
  const auto* q = x.backend().data();
  mpz_divexact(tmp.backend().data(), l.backend().data(), mpq_denref(q));
  mpz_mul(tmp.backend().data(), tmp.backend().data(), mpq_numref(q));
  fmpz_set_mpz(out, tmp.backend().data());
}

// The integer matrix l·A (l = lcm of A's denominators).
void integer_matrix(fmpz_mat_t out, const matrix<mpq_rational>& A, const mpz_int& l) {
  mpz_int tmp;
  for (Eigen::Index i = 0; i < A.rows(); ++i)
    for (Eigen::Index j = 0; j < A.cols(); ++j) scaled_integer(fmpz_mat_entry(out, i, j), A(i, j), l, tmp);
}

// Entrywise A mod (out's modulus), non-negative residues.
void reduce_matrix(nmod_mat_t out, const fmpz_mat_t A, bool transposed) {
  const ulong q = out->mod.n;
  for (slong i = 0; i < fmpz_mat_nrows(A); ++i)
    for (slong j = 0; j < fmpz_mat_ncols(A); ++j) {
      const ulong v = fmpz_fdiv_ui(fmpz_mat_entry(A, i, j), q);
      if (transposed) nmod_mat_entry(out, j, i) = v;
      else nmod_mat_entry(out, i, j) = v;
    }
}

// The scores as σ·N with N an integer matrix: N = Qi·Kiᵀ (Qi = lQ·Q, Ki = lK·K), or N = lS·S₀,
// or N = 0 when c = 0.  N itself is formed only on demand (the fallback).
class integer_scores {
 public:
  explicit integer_scores(const score_factors& F) : F_(F) {
    zero_ = F.scale == 0;
    if (F.S) {
      m_ = F.S->rows();
      n_ = F.S->cols();
      if (zero_) return;
      lq_ = lcm_of_denominators(*F.S);
      left_.emplace(m_, n_);
      integer_matrix(left_->v, *F.S, lq_);
    } else {
      m_ = F.Q->rows();
      n_ = F.K->rows();
      d_ = F.Q->cols();
      if (zero_) return;
      lq_ = lcm_of_denominators(*F.Q);
      lk_ = lcm_of_denominators(*F.K);
      left_.emplace(m_, d_);
      right_.emplace(n_, d_);
      integer_matrix(left_->v, *F.Q, lq_);
      integer_matrix(right_->v, *F.K, lk_);
    }
  }
  slong rows() const { return m_; }
  slong cols() const { return n_; }
  slong width() const { return d_; }  ///< d for Q·Kᵀ, 0 for given scores
  bool zero() const { return zero_; }

  /// N mod q (q = out's modulus, any q ≥ 2: a ring homomorphism ℤ → ℤ/q, so
  /// (Qi mod q)·(Ki mod q)ᵀ mod q = N mod q).  out: rows × cols.
  void reduce(nmod_mat_t out) const {
    if (zero_) {
      nmod_mat_zero(out);
    } else if (F_.S) {
      reduce_matrix(out, left_->v, false);
    } else {
      nmod_mat_var A(m_, d_, out->mod.n), B(d_, n_, out->mod.n);
      reduce_matrix(A.v, left_->v, false);
      reduce_matrix(B.v, right_->v, true);
      nmod_mat_mul(out, A.v, B.v);
    }
  }

  /// N exactly (fmpz_mat_mul), as rationals: scores σ·N, the same layer for the fallback.
  matrix<mpq_rational> exact() const {
    if (zero_) return matrix<mpq_rational>::Zero(m_, n_);
    if (F_.S) return *F_.S;  // scores c·S₀ with c ≠ 0: the same layer
    fmpz_mat_var N(m_, n_), Kt(d_, n_);
    fmpz_mat_transpose(Kt.v, right_->v);
    fmpz_mat_mul(N.v, left_->v, Kt.v);
    matrix<mpq_rational> B(m_, n_);
    mpz_int tmp;
    for (slong i = 0; i < m_; ++i)
      for (slong j = 0; j < n_; ++j) {
        fmpz_get_mpz(tmp.backend().data(), fmpz_mat_entry(N.v, i, j));
        B(i, j) = mpq_rational(tmp);
      }
    return B;
  }

  /// "N = lQ lK Q K^T with lQ = 2^a, lK = 2^b" (or lS S, or 0).
  std::string describe_n() const {
    if (zero_) return "N = 0 (c = 0)";
    if (F_.S) return "N = lS S with lS = " + describe_integer(lq_) + " (lcm of the denominators of S)";
    return "N = lQ lK Q K^T with lQ = " + describe_integer(lq_) + ", lK = " + describe_integer(lk_) +
           " (lcms of the denominators of Q and K)";
  }
  /// c as text.
  std::string describe_c() const {
    if (!F_.inv_sqrt_d) return F_.scale.str();
    const std::string r = "sqrt(" + std::to_string(d_) + ")";
    return F_.scale == 1 ? "1/" + r : "(" + F_.scale.str() + ")/" + r;
  }
  /// Why t = exp(σ) is transcendental (or why no t is needed).
  std::string describe_t() const {
    if (zero_) return "c = 0: every exponent is 0, so E is the 0/1 support matrix and the minor is an integer";
    const std::string den = F_.S ? "lS" : "lQ lK";
    return "t = exp(sigma) with sigma = c/(" + den + "), c = " + describe_c() + " (nonzero, algebraic), " + den + " = " +
           describe_integer(mpz_int(lq_ * lk_)) + ", is transcendental (Hermite-Lindemann)";
  }

 private:
  const score_factors& F_;
  slong m_ = 0, n_ = 0, d_ = 0;
  bool zero_ = false;
  mpz_int lq_ = 1, lk_ = 1;
  std::optional<fmpz_mat_var> left_, right_;
};

// V·L and X·L as integer matrices (L = lcm of V's and, for the residual, X's denominators:
// the same L as build_layer_matrix).
struct integer_values {
  mpz_int L = 1;
  std::optional<fmpz_mat_var> V, X;
  integer_values(layer_object object, const std::optional<matrix<mpq_rational>>& Vq,
                 const std::optional<matrix<mpq_rational>>& Xq) {
    if (object != layer_object::output && object != layer_object::residual) return;
    L = lcm_of_denominators(*Vq);
    if (object == layer_object::residual) L = boost::multiprecision::lcm(L, lcm_of_denominators(*Xq));
    V.emplace(Vq->rows(), Vq->cols());
    integer_matrix(V->v, *Vq, L);
    if (object == layer_object::residual) {
      X.emplace(Xq->rows(), Xq->cols());
      integer_matrix(X->v, *Xq, L);
    }
  }
};

// One evaluation: a proved prime p of `bits` bits, t0 a random primitive root of p (order
// p − 1, so exponents distinct mod p − 1 give distinct powers), and the rank of M(t0) mod p
// with its witness minor.
modular_rank evaluate_factored(const integer_scores& N, const integer_values& vals, const mask& M,
                               layer_object object, bool try_det, ulong bits, flint_rand_t state) {
  modular_rank out;
  const ulong p = n_randprime(state, bits, 1);
  const slong m = N.rows(), n = N.cols();
  if (object == layer_object::scores) {  // the integer matrix N itself: no t
    nmod_mat_var A(m, n, p);
    N.reduce(A.v);
    witnessed_rank(A.v, out, try_det);
    out.p = p;
    return out;
  }
  const ulong pinv = n_preinvert_limb(p), g = n_primitive_root_prime(p);
  ulong k = 0;
  do k = 1 + n_randint(state, p - 2);  // k ∈ [1, p − 2] prime to p − 1: g^k is a primitive root
  while (n_gcd(k, p - 1) != 1);
  const ulong t0 = n_powmod2_ui_preinv(g, k, p, pinv);
  // E(t0): N mod (p − 1) (any modulus is fine for nmod_mat_mul), then entrywise t0^e on the
  // support and 0 off it; the entries are then residues mod p and the matrix's modulus becomes p.
  nmod_mat_var E(m, n, p - 1);
  N.reduce(E.v);
  const power_table pw(t0, p);
  for (slong i = 0; i < m; ++i) {
    ulong* row = E.v->rows[i];
    for (slong j = 0; j < n; ++j) row[j] = M.allows(i, j) ? pw(row[j]) : 0;
  }
  _nmod_mat_set_mod(E.v, p);
  if (object == layer_object::attention) {
    witnessed_rank(E.v, out);
  } else {
    // Output: E·(L V); residual: D·(L X) + E·(L V), D = diag(row sums of E).
    const slong dv = fmpz_mat_ncols(vals.V->v);
    nmod_mat_var Vp(n, dv, p), A(m, dv, p);
    reduce_matrix(Vp.v, vals.V->v, false);
    nmod_mat_mul(A.v, E.v, Vp.v);
    if (object == layer_object::residual) {
      nmod_mat_var Xp(m, dv, p);
      reduce_matrix(Xp.v, vals.X->v, false);
      for (slong i = 0; i < m; ++i) {
        ulong s = 0;
        for (slong j = 0; j < n; ++j) s = n_addmod(s, nmod_mat_entry(E.v, i, j), p);
        for (slong c = 0; c < dv; ++c)
          nmod_mat_entry(A.v, i, c) =
              n_addmod(nmod_mat_entry(A.v, i, c), n_mulmod2_preinv(s, nmod_mat_entry(Xp.v, i, c), p, pinv), p);
      }
    }
    witnessed_rank(A.v, out);
  }
  out.p = p;
  out.t0 = t0;
  return out;
}

std::string factored_lower_witness(const modular_rank& b, layer_object object, const integer_scores& N,
                                   const integer_values& vals) {
  if (b.rank == 0) return "trivial (rank >= 0)";
  std::ostringstream os;
  const std::string where = b.whole ? std::string("all rows and columns") : "rows " + join(b.rows) + ", cols " + join(b.cols);
  if (object == layer_object::scores) {
    os << "nonzero " << b.rank << "x" << b.rank << " minor of N mod p = " << b.p << " (" << where << ", value " << b.minor
       << "), " << N.describe_n() << ": a nonzero integer minor, and the scores are c N/(lcms) with c = " << N.describe_c()
       << " != 0";
    return os.str();
  }
  os << "nonzero " << b.rank << "x" << b.rank << " minor of M(t) mod p = " << b.p << " at t = " << b.t0 << " (" << where
     << ", value " << b.minor << "), where M(t) = ";
  if (object == layer_object::attention) os << "E(t)";
  else if (object == layer_object::output) os << "E(t) V L with L = " << describe_integer(vals.L);
  else os << "(D(t) X + E(t) V) L with D = diag(row sums of E), L = " << describe_integer(vals.L);
  os << ", E_ij = t^N_ij on the mask's support and 0 off it, " << N.describe_n()
     << " (exponents reduced mod p - 1); " << N.describe_t();
  return os.str();
}

}  // namespace

rank_interval layer_rank_from_factors(const score_factors& F, const mask& M, layer_object object,
                                      const std::optional<matrix<mpq_rational>>& V,
                                      const std::optional<matrix<mpq_rational>>& X, const rank_options& opt) {
  if (!F.S && !(F.Q && F.K)) throw input_error("the rank from factors needs either the scores S or both Q and K");
  if (F.S && F.inv_sqrt_d) throw input_error("the scale 1/sqrt(d) needs Q and K (d is Q's width), not given scores");
  if (!F.S && F.Q->cols() != F.K->cols())
    throw input_error("Q has " + std::to_string(F.Q->cols()) + " columns but K has " + std::to_string(F.K->cols()));
  const Eigen::Index m = F.S ? F.S->rows() : F.Q->rows(), n = F.S ? F.S->cols() : F.K->rows();
  validate_layer_shapes(m, n, M, object, V, X);

  const integer_scores N(F);
  const integer_values vals(object, V, X);
  const auto mm = static_cast<std::size_t>(m), nn = static_cast<std::size_t>(n);
  const std::size_t dv = V ? static_cast<std::size_t>(V->cols()) : 0;
  rank_interval out;
  // The cheap structural upper bound.
  switch (object) {
    case layer_object::scores:
      if (N.zero()) {
        out.hi = 0;
        out.hi_witness = "c = 0: the scores are 0";
      } else if (F.S) {
        out.hi = std::min(mm, nn);
        out.hi_witness = "structure: min(rows, cols) = " + std::to_string(out.hi);
      } else {
        out.hi = std::min({mm, nn, static_cast<std::size_t>(N.width())});
        out.hi_witness = "structure: rank(Q K^T) <= min(rows, cols, d) = " + std::to_string(out.hi);
      }
      break;
    case layer_object::attention:
      out.hi = std::min(mm, nn);
      out.hi_witness = "structure: min(rows, cols) = " + std::to_string(out.hi);
      break;
    case layer_object::output:
      out.hi = std::min(mm, dv);
      out.hi_witness = "structure: rank(AV) <= min(rows, cols) = " + std::to_string(out.hi);
      break;
    default:
      out.hi = std::min(mm, dv);
      out.hi_witness = "structure: min(rows, cols) = " + std::to_string(out.hi);
  }

  // Lower bound: one (p, t0) pair, more only while short of the bound.
  flint_rand_var rnd(opt.seed);
  const ulong bits = factored_prime_bits(static_cast<slong>(std::max({mm, nn, dv, static_cast<std::size_t>(N.width())})));
  // A determinant is worth one elimination only when full rank is possible (not for the
  // scores Q·Kᵀ of width d < n).
  const bool try_det = !(object == layer_object::scores && out.hi < std::min(mm, nn));
  modular_rank best;
  for (int k = 0; k < opt.evaluations && static_cast<std::size_t>(best.rank) < out.hi; ++k) {
    modular_rank r = evaluate_factored(N, vals, M, object, try_det, bits, rnd.v);
    if (r.rank > best.rank || best.p == 0) best = std::move(r);
  }
  out.lo = static_cast<std::size_t>(best.rank);
  out.lo_witness = factored_lower_witness(best, object, N, vals);
  if (out.lo >= out.hi) {
    if (out.lo > out.hi) throw std::logic_error("attention rank from factors: lower bound exceeds upper bound (bug)");
    return out;
  }

  // Short of the cheap bound: the exact answers.
  if (object == layer_object::scores) {
    rank_interval ex;
    if (F.S) {
      ex = exact_rank_rational(*F.S);
    } else {
      const matrix<mpq_rational> B = N.exact();
      ex = exact_rank_rational(B);
      ex.lo_witness = ex.hi_witness = "exact elimination over Q of " + N.describe_n() + " (FLINT fmpz_mat_rank); c != 0";
    }
    if (ex.lo < out.lo || ex.hi > out.hi) throw std::logic_error("attention rank from factors: inconsistent scores rank (bug)");
    return ex;
  }
  if (object == layer_object::output) {
    const std::size_t rv = exact_rank_rational(*V).hi;
    if (rv < out.hi) {
      out.hi = rv;
      out.hi_witness = "structure: rank(AV) <= rank V = " + std::to_string(rv) + " (exact over Q)";
    }
    if (out.lo == out.hi) return out;
  }
  // Fall back to the polynomial method on B = N (scores σ·N with σ ≠ 0 algebraic: the same
  // layer): structure of E, an exact kernel over ℚ[t], more evaluation points.
  const rank_interval old = layer_rank(N.exact(), M, object, V, X, opt);
  const std::string via = F.S ? "layer_rank on B = S (scores c B): "
                              : "layer_rank on B = N (scores sigma B, sigma = c/(lQ lK), " + N.describe_n() + "): ";
  if (old.lo > out.lo) {
    out.lo = old.lo;
    out.lo_witness = via + old.lo_witness;
  }
  if (old.hi < out.hi) {
    out.hi = old.hi;
    out.hi_witness = via + old.hi_witness;
  }
  if (out.lo > out.hi) throw std::logic_error("attention rank from factors: lower bound exceeds upper bound (bug)");
  return out;
}

}  // namespace attncert
