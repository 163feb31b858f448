// The k smallest singular values escalated on a deflated subspace: refinement at p bits (approx
// tier), then the bound of proofs/P16-fast-singular-values.md, part D (enclosure tier).  Every
// bound below names its step there.
#include "attncert/linalg/deflated_svd.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "attncert/error.hpp"
#include "attncert/deadline.hpp"
#include "attncert/linalg/lapack.hpp"
#include "attncert/linalg/spectra.hpp"
#include "attncert/number/interval.hpp"
#include "attncert/number/outward.hpp"
#include "attncert/number/parallel.hpp"

namespace attncert {

// ---- split products (P16 part D, "Split products") -------------------------------------------

namespace detail::split {

int slice_bits(Eigen::Index inner) {
  int L = 0;
  while (L < 62 && (Eigen::Index{1} << L) < inner) ++L;  // L = ceil(log2 inner)
  return (53 - L) / 2;
}

int slice_count(long p, int beta) { return static_cast<int>((p + 8 + beta - 1) / beta); }

slices slice(const matrix<mpfr_float>& M, int S, int beta, unsigned threads, bool per_column) {
  slices out;
  out.m.assign(static_cast<std::size_t>(S), matrix<double>::Zero(M.rows(), M.cols()));
  constexpr long none = std::numeric_limits<long>::min();
  long e = none;
  std::vector<long> ecol(static_cast<std::size_t>(M.cols()), none);
  mpfr_prec_t prec = MPFR_PREC_MIN;
  for (Eigen::Index j = 0; j < M.cols(); ++j)
    for (Eigen::Index i = 0; i < M.rows(); ++i) {
      mpfr_srcptr x = M(i, j).backend().data();
      if (mpfr_regular_p(x)) ecol[static_cast<std::size_t>(j)] = std::max<long>(ecol[static_cast<std::size_t>(j)], mpfr_get_exp(x));  // |x| < 2^exp
      prec = std::max(prec, mpfr_get_prec(x));
    }
  for (long v : ecol) e = std::max(e, v);
  if (e == none) return out;
  out.e = e;
  out.zero = false;
  if (per_column) {
    for (long& v : ecol)
      if (v == none) v = e;  // a zero column: its slices are 0 whatever the exponent
    out.ecol = ecol;
  }
  parallel_for(static_cast<std::size_t>(M.cols()), threads, [&](std::size_t jj) {
    const Eigen::Index j = static_cast<Eigen::Index>(jj);
    mpfr_t r;
    mpfr_init2(r, prec);
    for (Eigen::Index i = 0; i < M.rows(); ++i) {
      mpfr_srcptr x = M(i, j).backend().data();
      if (!mpfr_regular_p(x)) continue;
      mpfr_mul_2si(r, x, -(per_column ? out.ecol[jj] : e), MPFR_RNDN);  // exact, |r| < 1
      for (int s = 0; s < S && !mpfr_zero_p(r); ++s) {
        mpfr_mul_2si(r, r, beta, MPFR_RNDN);         // exact, |r| < 2^beta
        const long v = mpfr_get_si(r, MPFR_RNDZ);    // its integer part
        mpfr_sub_si(r, r, v, MPFR_RNDN);             // exact: the fraction, |r| < 1
        out.m[static_cast<std::size_t>(s)](i, j) = static_cast<double>(v);  // exact, |v| < 2^beta
      }
    }
    mpfr_clear(r);
  });
  return out;
}

slices slice(const matrix<double>& M, int S, int beta) {
  slices out;
  out.m.assign(static_cast<std::size_t>(S), matrix<double>::Zero(M.rows(), M.cols()));
  int e = std::numeric_limits<int>::min();
  for (Eigen::Index i = 0; i < M.size(); ++i) {
    if (!std::isfinite(M(i))) throw input_error("split product: a non-finite entry");
    if (M(i) != 0) {
      int ex = 0;
      std::frexp(M(i), &ex);  // |x| < 2^ex
      e = std::max(e, ex);
    }
  }
  if (e == std::numeric_limits<int>::min()) return out;
  out.e = e;
  out.zero = false;
  if (static_cast<long>(S) * beta > 1000) throw std::invalid_argument("split product: too many slices for binary64");
  for (Eigen::Index i = 0; i < M.size(); ++i) {
    // r·2^(e − s·beta) is what remains of M(i) before slice s.  An entry below 2^(e − S·beta)
    // has only zero slices (it is its own remainder).  Otherwise every step is exact in binary64:
    // the first scaling by 2^(beta − e) gives a normal number (its exponent is above
    // −(S − 1)·beta >= −1000), the later ones scale up by 2^beta and stay below 2^beta in
    // magnitude, and the integer part and the fraction of a binary64 number are binary64 numbers.
    double r = M(i);
    int ex = 0;
    std::frexp(r, &ex);
    if (r == 0 || ex <= e - S * beta) continue;
    int shift = beta - e;
    for (int s = 0; s < S && r != 0; ++s) {
      const double scaled = std::ldexp(r, shift);
      const double v = std::trunc(scaled);
      out.m[static_cast<std::size_t>(s)](i) = v;
      r = scaled - v;  // exact
      shift = beta;
    }
  }
  return out;
}

namespace {

using levels = std::vector<std::vector<long>>;  // levels[q][j·rows + i]

// What the bounds assume: inner·2^(2·beta) <= 2^53 (exact slice products), beta >= 8 and
// 1 <= S <= 125 (the factor S + 3, and level sums below S·2^53 <= 2^63).
void check_plan(Eigen::Index inner, int S, int beta) {
  if (beta < 8 || beta > slice_bits(inner) || S < 1 || S > 125)
    throw std::invalid_argument("split product: beta or S outside what its bound assumes");
}

// levels[q] = sum over s + t = q < S of op(A_s)·B_t: integers below S·2^53 <= 2^63 in magnitude
// (each slice product is exact: integer entries, every partial sum below 2^53).
levels level_sums(const slices& A, bool transpose_a, const slices& B, Eigen::Index inner, int S) {
  static_assert(sizeof(long) == 8, "the level sums are held in long");
  const matrix<double>& a0 = A.m.at(0);
  const Eigen::Index rows = transpose_a ? a0.cols() : a0.rows(), k = B.m.at(0).cols();
  if ((transpose_a ? a0.rows() : a0.cols()) != inner || B.m[0].rows() != inner)
    throw std::invalid_argument("split product: inner dimensions differ");
  levels G(static_cast<std::size_t>(S), std::vector<long>(static_cast<std::size_t>(rows * k), 0));
  auto add_level = [&](int s, int t, const matrix<double>& P, Eigen::Index r0, Eigen::Index c0) {
    std::vector<long>& g = G[static_cast<std::size_t>(s + t)];
    for (Eigen::Index j = 0; j < k; ++j)
      for (Eigen::Index i = 0; i < rows; ++i) g[static_cast<std::size_t>(j * rows + i)] += static_cast<long>(P(r0 + i, c0 + j));
  };
  // One dgemm per slice of the side that is copied less: op(A_s)·[B_0 … B_{S−1−s}] when B is
  // narrow, [op(A_0); …; op(A_{S−1−t})]·B_t when op(A) has few rows.
  if (rows <= k) {
    for (int t = 0; t < S; ++t) {
      const int pairs = S - t;  // s = 0 .. S − 1 − t
      matrix<double> P;
      if (transpose_a) {
        matrix<double> Aw(inner, rows * pairs);
        for (int s = 0; s < pairs; ++s) Aw.middleCols(s * rows, rows) = A.m[static_cast<std::size_t>(s)];
        P = approx_product_blas(Aw, B.m[static_cast<std::size_t>(t)], true);
      } else {
        matrix<double> Aw(rows * pairs, inner);
        for (int s = 0; s < pairs; ++s) Aw.middleRows(s * rows, rows) = A.m[static_cast<std::size_t>(s)];
        P = approx_product_blas(Aw, B.m[static_cast<std::size_t>(t)], false);
      }
      for (int s = 0; s < pairs; ++s) add_level(s, t, P, s * rows, 0);
    }
  } else {
    for (int s = 0; s < S; ++s) {
      const int pairs = S - s;  // t = 0 .. S − 1 − s
      matrix<double> Bw(inner, k * pairs);
      for (int t = 0; t < pairs; ++t) Bw.middleCols(t * k, k) = B.m[static_cast<std::size_t>(t)];
      const matrix<double> P = approx_product_blas(A.m[static_cast<std::size_t>(s)], Bw, transpose_a);
      for (int t = 0; t < pairs; ++t) add_level(s, t, P, 0, t * k);
    }
  }
  return G;
}

// Y_ij = RN_p(sum over parts, q of part.G[q]_ij·2^(part.base − (q + 2)·beta)): each term exact at
// 64 bits, one rounding (mpfr_sum).
struct level_part {
  levels G;
  std::vector<long> base;  // by column
};

matrix<mpfr_float> combine(const std::vector<level_part>& parts, Eigen::Index rows, Eigen::Index k, int S, int beta,
                           unsigned threads) {
  matrix<mpfr_float> Y(rows, k);
  const std::size_t nt = parts.size() * static_cast<std::size_t>(S);
  parallel_for(static_cast<std::size_t>(k), threads, [&](std::size_t jj) {
    const Eigen::Index j = static_cast<Eigen::Index>(jj);
    std::vector<mpfr_t> terms(nt);
    std::vector<mpfr_ptr> ptrs(nt);
    for (std::size_t q = 0; q < nt; ++q) {
      mpfr_init2(terms[q], 64);
      ptrs[q] = terms[q];
    }
    for (Eigen::Index i = 0; i < rows; ++i) {
      std::size_t used = 0;
      for (const level_part& part : parts)
        for (int q = 0; q < S; ++q) {
          const long v = part.G[static_cast<std::size_t>(q)][static_cast<std::size_t>(j * rows + i)];
          if (v == 0) continue;
          mpfr_set_si(terms[used], v, MPFR_RNDN);
          mpfr_mul_2si(terms[used], terms[used], part.base[jj] - static_cast<long>(q + 2) * beta, MPFR_RNDN);
          ++used;
        }
      mpfr_sum(Y(i, j).backend().data(), ptrs.data(), static_cast<unsigned long>(used), MPFR_RNDN);
    }
    for (auto& t : terms) mpfr_clear(t);
  });
  return Y;
}

// The slices of A restricted to the inner indices `idx` (columns of A, or its rows when op(A) = Aᵀ).
slices restrict_inner(const slices& A, bool transpose_a, const std::vector<Eigen::Index>& idx) {
  slices out;
  out.e = A.e;
  out.zero = A.zero;
  for (const matrix<double>& m : A.m) {
    const Eigen::Index nb = static_cast<Eigen::Index>(idx.size());
    matrix<double> r(transpose_a ? nb : m.rows(), transpose_a ? m.cols() : nb);
    for (Eigen::Index t = 0; t < nb; ++t) {
      if (transpose_a) r.row(t) = m.row(idx[static_cast<std::size_t>(t)]);
      else r.col(t) = m.col(idx[static_cast<std::size_t>(t)]);
    }
    out.m.push_back(std::move(r));
  }
  return out;
}

}  // namespace

matrix<mpfr_float> product(const slices& A, bool transpose_a, const slices& B, Eigen::Index inner, int S, int beta,
                           mpfr_float& eps, unsigned threads) {
  check_plan(inner, S, beta);
  const matrix<double>& a0 = A.m.at(0);
  const Eigen::Index rows = transpose_a ? a0.cols() : a0.rows(), k = B.m.at(0).cols();
  mpfr_set_ui(eps.backend().data(), 0, MPFR_RNDN);
  std::vector<level_part> parts;
  if (!B.ecol.empty()) throw std::invalid_argument("split product: B sliced by column");
  if (!A.zero && !B.zero && rows > 0 && k > 0)
    parts.push_back({level_sums(A, transpose_a, B, inner, S), std::vector<long>(static_cast<std::size_t>(k), A.e + B.e)});
  else if ((transpose_a ? a0.rows() : a0.cols()) != inner || B.m.at(0).rows() != inner)
    throw std::invalid_argument("split product: inner dimensions differ");
  const matrix<mpfr_float> Y = combine(parts, rows, k, S, beta, threads);
  if (!parts.empty()) {
    mpfr_set_ui(eps.backend().data(), static_cast<unsigned long>(inner) * static_cast<unsigned long>(S + 3), MPFR_RNDU);
    mpfr_mul_2si(eps.backend().data(), eps.backend().data(), A.e + B.e - static_cast<long>(S) * beta, MPFR_RNDU);
  }
  return Y;
}

banded slice_banded(const matrix<mpfr_float>& A, int S, int beta, std::size_t max_bands, unsigned threads) {
  constexpr long none = std::numeric_limits<long>::min();
  banded out;
  out.H = matrix<double>::Zero(A.rows(), A.cols());
  long e = none;
  for (Eigen::Index i = 0; i < A.size(); ++i) {
    mpfr_srcptr x = A(i).backend().data();
    if (mpfr_regular_p(x)) e = std::max<long>(e, mpfr_get_exp(x));
  }
  if (e == none || max_bands == 0) return out;
  out.e = e;
  // band of each entry: floor((e − exp)/beta), the last band taking every smaller entry
  matrix<int> band(A.rows(), A.cols());
  std::size_t nb = 0;
  for (Eigen::Index i = 0; i < A.size(); ++i) {
    mpfr_srcptr x = A(i).backend().data();
    if (!mpfr_regular_p(x)) {
      band(i) = -1;
      continue;
    }
    const long b = std::min<long>((e - mpfr_get_exp(x)) / beta, static_cast<long>(max_bands) - 1);
    band(i) = static_cast<int>(b);
    nb = std::max(nb, static_cast<std::size_t>(b) + 1);
  }
  for (std::size_t b = 0; b < nb; ++b) {
    matrix<mpfr_float> Ab(A.rows(), A.cols());
    bool any = false;
    for (Eigen::Index i = 0; i < A.size(); ++i) {
      if (band(i) == static_cast<int>(b)) {
        Ab(i) = A(i);
        any = true;
      } else {
        mpfr_set_ui(Ab(i).backend().data(), 0, MPFR_RNDN);
      }
    }
    if (!any) continue;
    slices sb = slice(Ab, S, beta, threads);
    // H_il = 2^(e_a − e) for the entries of band a (2^-1000 when smaller: an overestimate)
    const double h = std::ldexp(1.0, static_cast<int>(std::max(sb.e - e, -1000L)));
    for (Eigen::Index i = 0; i < A.size(); ++i)
      if (band(i) == static_cast<int>(b)) out.H(i) = h;
    out.bands.push_back(std::move(sb));
  }
  return out;
}

matrix<mpfr_float> product_banded(const banded& A, bool transpose_a, const matrix<mpfr_float>& X, int S, int beta,
                                  matrix<mpfr_float>& err, unsigned threads) {
  const Eigen::Index rows = transpose_a ? A.H.cols() : A.H.rows(), inner = X.rows(), k = X.cols();
  if ((transpose_a ? A.H.rows() : A.H.cols()) != inner) throw std::invalid_argument("split product: inner dimensions differ");
  check_plan(inner, S, beta);
  constexpr long none = std::numeric_limits<long>::min();
  // Bands of X's entries by exponent within their column: c_j = the largest exponent in column j
  // (|X_lj| < 2^c_j), entry (l, j) in band floor((c_j − exp X_lj)/beta); zeros in no band.
  std::vector<long> cmax(static_cast<std::size_t>(k), none);
  matrix<int> band(inner, k);
  for (Eigen::Index j = 0; j < k; ++j)
    for (Eigen::Index l = 0; l < inner; ++l) {
      mpfr_srcptr x = X(l, j).backend().data();
      if (mpfr_regular_p(x)) cmax[static_cast<std::size_t>(j)] = std::max<long>(cmax[static_cast<std::size_t>(j)], mpfr_get_exp(x));
    }
  int nbands = 0;
  for (Eigen::Index j = 0; j < k; ++j)
    for (Eigen::Index l = 0; l < inner; ++l) {
      mpfr_srcptr x = X(l, j).backend().data();
      band(l, j) = mpfr_regular_p(x) ? static_cast<int>((cmax[static_cast<std::size_t>(j)] - mpfr_get_exp(x)) / beta) : -1;
      nbands = std::max(nbands, band(l, j) + 1);
    }
  // Each band: X_b (X's entries of the band, 0 elsewhere) on the inner indices that have one,
  // sliced by column (exponent f_bj: |X_lj| < 2^f_bj for (l, j) in band b).
  std::vector<std::vector<Eigen::Index>> used_bands;
  std::vector<slices> xs;
  std::vector<int> band_of;
  for (int bnd = 0; bnd < nbands; ++bnd) {
    std::vector<Eigen::Index> idx;
    for (Eigen::Index l = 0; l < inner; ++l)
      for (Eigen::Index j = 0; j < k; ++j)
        if (band(l, j) == bnd) {
          idx.push_back(l);
          break;
        }
    if (idx.empty()) continue;
    matrix<mpfr_float> Xb(static_cast<Eigen::Index>(idx.size()), k);
    for (Eigen::Index t = 0; t < Xb.rows(); ++t)
      for (Eigen::Index j = 0; j < k; ++j) {
        const Eigen::Index l = idx[static_cast<std::size_t>(t)];
        if (band(l, j) == bnd) Xb(t, j) = X(l, j);
        else mpfr_set_ui(Xb(t, j).backend().data(), 0, MPFR_RNDN);
      }
    slices sb = slice(Xb, S, beta, threads, true);
    if (sb.zero) continue;
    used_bands.push_back(std::move(idx));
    xs.push_back(std::move(sb));
    band_of.push_back(bnd);
  }
  // every pair (band a of A, band b of X): base exponent e_a + f_bj by column
  std::vector<level_part> parts;
  for (const slices& Aa : A.bands)
    for (std::size_t b = 0; b < xs.size(); ++b) {
      std::vector<long> base(static_cast<std::size_t>(k));
      for (Eigen::Index j = 0; j < k; ++j) base[static_cast<std::size_t>(j)] = Aa.e + xs[b].ecol[static_cast<std::size_t>(j)];
      const bool all = used_bands[b].size() == static_cast<std::size_t>(inner);
      parts.push_back({level_sums(all ? Aa : restrict_inner(Aa, transpose_a, used_bands[b]), transpose_a, xs[b],
                                  static_cast<Eigen::Index>(used_bands[b].size()), S),
                       std::move(base)});
    }
  const matrix<mpfr_float> Y = combine(parts, rows, k, S, beta, threads);
  // err_ij = (S + 3)·2^(e + c_j − S·beta)·(op(H)·G)_ij with G_lj = 2^(f_bj − c_j) for (l, j) in band b
  // (2^-1000 when smaller: an overestimate), the product bounded from BLAS by fl/(1 − γ_n) + nη and
  // the rest in MPFR rounded up.
  err.resize(rows, k);
  for (Eigen::Index i = 0; i < err.size(); ++i) mpfr_set_ui(err(i).backend().data(), 0, MPFR_RNDN);
  if (parts.empty()) return Y;
  matrix<double> G = matrix<double>::Zero(inner, k);
  for (std::size_t b = 0; b < xs.size(); ++b)
    for (Eigen::Index j = 0; j < k; ++j) {
      const long c = cmax[static_cast<std::size_t>(j)];
      if (c == none) continue;  // a zero column of X: its products are exact zeros, G stays 0
      const double v = std::ldexp(1.0, static_cast<int>(std::max(xs[b].ecol[static_cast<std::size_t>(j)] - c, -1000L)));
      for (Eigen::Index l : used_bands[b])
        if (band(l, j) == band_of[b]) G(l, j) = v;
    }
  const matrix<double> c_h = approx_product_blas(A.H, G, transpose_a);
  const double gn = gamma_up(static_cast<std::size_t>(inner)), shrink = next_down(1.0 - gn),
               floor = next_up(static_cast<double>(inner) * 0x1p-1074);
  mpfr_t a;
  mpfr_init2(a, 64);
  for (Eigen::Index j = 0; j < k; ++j) {
    if (cmax[static_cast<std::size_t>(j)] == none) continue;  // a zero column: err stays 0 (exact)
    for (Eigen::Index i = 0; i < rows; ++i) {
      mpfr_set_d(a, next_up(next_up(c_h(i, j) / shrink) + floor), MPFR_RNDU);
      mpfr_mul_ui(a, a, static_cast<unsigned long>(S + 3), MPFR_RNDU);
      mpfr_mul_2si(a, a, A.e + cmax[static_cast<std::size_t>(j)] - static_cast<long>(S) * beta, MPFR_RNDU);
      mpfr_set(err(i, j).backend().data(), a, MPFR_RNDU);
    }
  }
  mpfr_clear(a);
  return Y;
}

}  // namespace detail::split

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double eta = 0x1p-1074;

// Threads for the n×n×k products below (parallel_for: one column per task, each column's
// operations the same on any thread, so the results are those of one thread).  Set for the
// duration of one deflated_trailing_singular_values call on its thread.
thread_local unsigned product_threads = 1;

mpfr_ptr raw(mpfr_float& x) { return x.backend().data(); }
mpfr_srcptr raw(const mpfr_float& x) { return x.backend().data(); }

// How the n×n×k products run at p bits: split into binary64 slices multiplied by BLAS (part D,
// "Split products") when the slices of an n×n matrix fit in 1 GiB and binary64 can hold them
// (S·beta <= 1000, i.e. p up to about 980 bits); otherwise MPFR loops.  beta is that of the
// inner dimension n, which bounds every inner dimension below (n − k for U₁·C).
struct split_plan {
  int beta = 0, S = 0;
  std::size_t bands = 0;  // at most this many bands of the n×n matrix's entries (its slices within 1 GiB)
  bool on = false;
};

split_plan plan_for(Eigen::Index n, long p) {
  split_plan pl;
  pl.beta = detail::split::slice_bits(n);
  pl.S = detail::split::slice_count(p, pl.beta);
  const double bytes = 8.0 * pl.S * static_cast<double>(n) * static_cast<double>(n);
  pl.bands = static_cast<std::size_t>(std::min(8.0, std::floor(0x1p30 / bytes)));
  pl.on = pl.beta >= 8 && static_cast<long>(pl.S) * pl.beta <= 1000 && bytes <= 0x1p30 &&
          std::getenv("ATTNCERT_NO_SPLIT_PRODUCTS") == nullptr;
  return pl;
}

// A as midpoint (p bits, mpfi_mid) plus radius: |Ã − mid| ≤ 2^-p·rad_scaled for every Ã inside A
// (rad_scaled rounded up in binary64), and abs_mid ≥ |mid| (binary64, rounded up); with the
// midpoint's slices when the products are split.
struct mid_rad {
  matrix<mpfr_float> mid;
  matrix<double> abs_mid, rad_scaled;
  long p = 0;
  split_plan plan;
  detail::split::banded sl;
};

mid_rad split_mid_rad(const matrix<mpfi_float>& A) {
  mid_rad m;
  m.p = static_cast<long>(current_mpfr_bits());
  m.mid.resize(A.rows(), A.cols());
  m.abs_mid.resize(A.rows(), A.cols());
  m.rad_scaled.resize(A.rows(), A.cols());
  mpfr_t t;
  mpfr_init2(t, 64);
  for (Eigen::Index i = 0; i < A.size(); ++i) {
    mpfi_srcptr a = A(i).backend().data();
    mpfr_ptr c = raw(m.mid(i));
    mpfi_mid(c, a);
    m.abs_mid(i) = std::fabs(mpfr_get_d(c, mpfr_sgn(c) >= 0 ? MPFR_RNDU : MPFR_RNDD));
    // rad = max(mid − lo, hi − mid), rounded up, times 2^p (exact).
    mpfr_sub(t, c, &a->left, MPFR_RNDU);
    double r = mpfr_get_d(t, MPFR_RNDU);
    mpfr_sub(t, &a->right, c, MPFR_RNDU);
    r = std::max(r, mpfr_get_d(t, MPFR_RNDU));
    m.rad_scaled(i) = std::ldexp(r, static_cast<int>(m.p));  // ≥ 0; +∞ on overflow (no claim then)
  }
  mpfr_clear(t);
  m.plan = plan_for(A.rows(), m.p);
  if (m.plan.on) m.sl = detail::split::slice_banded(m.mid, m.plan.S, m.plan.beta, m.plan.bands, product_threads);
  return m;
}

// fl_p(op(A)·X): each entry a sum of n products in index order, each product and each partial sum
// rounded to nearest at p bits — the recursive sum of part D, step 1 (|error| ≤ γ_n^(p)|op(A)||X|).
// op(A) = Aᵀ when `tr`.
matrix<mpfr_float> approx_times_mpfr(const matrix<mpfr_float>& A, const matrix<mpfr_float>& X, bool tr) {
  const Eigen::Index n = A.rows();
  matrix<mpfr_float> Y(n, X.cols());
  parallel_for(static_cast<std::size_t>(X.cols()), product_threads, [&](std::size_t jj) {
    const Eigen::Index j = static_cast<Eigen::Index>(jj);
    check_deadline();  // n² MPFR operations per column: the command's budget and interruption
    mpfr_float t;
    for (Eigen::Index i = 0; i < n; ++i) mpfr_set_ui(raw(Y(i, j)), 0, MPFR_RNDN);
    if (tr) {
      for (Eigen::Index i = 0; i < n; ++i) {
        mpfr_ptr y = raw(Y(i, j));
        for (Eigen::Index l = 0; l < n; ++l) {
          if (mpfr_zero_p(raw(A(l, i)))) continue;  // a masked entry: the term is an exact 0
          mpfr_mul(raw(t), raw(A(l, i)), raw(X(l, j)), MPFR_RNDN);
          mpfr_add(y, y, raw(t), MPFR_RNDN);
        }
      }
    } else {
      for (Eigen::Index l = 0; l < n; ++l) {
        mpfr_srcptr x = raw(X(l, j));
        for (Eigen::Index i = 0; i < n; ++i) {
          if (mpfr_zero_p(raw(A(i, l)))) continue;
          mpfr_mul(raw(t), raw(A(i, l)), x, MPFR_RNDN);
          mpfr_add(raw(Y(i, j)), raw(Y(i, j)), raw(t), MPFR_RNDN);
        }
      }
    }
  });
  return Y;
}

// op(mid)·X at p bits: split in bands (then |Y_ij − (op(mid)X)_ij| ≤ 2^-p|Y_ij| + row_err(i, j)) or
// by MPFR loops (then the recursive-sum bound above; row_err is returned empty).
matrix<mpfr_float> approx_times(const mid_rad& A, const matrix<mpfr_float>& X, bool tr, matrix<mpfr_float>& row_err) {
  if (!A.plan.on) {
    row_err.resize(0, 0);
    return approx_times_mpfr(A.mid, X, tr);
  }
  return detail::split::product_banded(A.sl, tr, X, A.plan.S, A.plan.beta, row_err, product_threads);
}

matrix<mpfr_float> approx_times(const mid_rad& A, const matrix<mpfr_float>& X, bool tr) {
  matrix<mpfr_float> row_err;
  return approx_times(A, X, tr, row_err);
}

// op(Ã)·X enclosed for every Ã inside A (part D, step 1): mid = op(mid)·X at p bits and
// rad = e + 2^-p·rad_scaled·|X|, where e bounds the product's own error — split: 2^-p|mid| + err;
// MPFR loops: γ_n^(p)·|mid||X| —, the nonnegative products bounded from BLAS by fl/(1 − γ_n) + nη
// and the radius accumulated in MPFR rounded up.
matrix<mpfi_float> enclose_times(const mid_rad& A, const matrix<mpfr_float>& X, bool tr) {
  const Eigen::Index n = A.mid.rows(), k = X.cols();
  matrix<mpfr_float> row_err;
  const matrix<mpfr_float> mid = approx_times(A, X, tr, row_err);
  const bool split = row_err.size() != 0;
  matrix<double> ax(n, k);
  for (Eigen::Index i = 0; i < X.size(); ++i) ax(i) = std::fabs(mpfr_get_d(raw(X(i)), mpfr_sgn(raw(X(i))) >= 0 ? MPFR_RNDU : MPFR_RNDD));
  const matrix<double> c1 = split ? matrix<double>() : approx_product_blas(A.abs_mid, ax, tr);
  const matrix<double> c2 = approx_product_blas(A.rad_scaled, ax, tr);
  const double gn = gamma_up(static_cast<std::size_t>(n)), shrink = next_down(1.0 - gn), floor = next_up(static_cast<double>(n) * eta);
  mpfr_t gp, r, t;
  mpfr_inits2(64, gp, r, t, static_cast<mpfr_ptr>(nullptr));
  // γ_n^(p) = n·2^-p / (1 − n·2^-p), rounded up.
  mpfr_set_ui(gp, static_cast<unsigned long>(n), MPFR_RNDU);
  mpfr_mul_2si(gp, gp, -A.p, MPFR_RNDU);
  mpfr_ui_sub(t, 1, gp, MPFR_RNDD);
  mpfr_div(gp, gp, t, MPFR_RNDU);
  matrix<mpfi_float> Y(n, k);
  for (Eigen::Index i = 0; i < Y.size(); ++i) {
    if (split) {
      // |mid_ij − (op(mid)X)_ij| ≤ 2^-p|mid_ij| + row_err(i, j)
      mpfr_abs(r, raw(mid(i)), MPFR_RNDU);
      mpfr_mul_2si(r, r, -A.p, MPFR_RNDU);
      mpfr_add(r, r, raw(row_err(i)), MPFR_RNDU);
    } else {
      const double b1 = next_up(next_up(c1(i) / shrink) + floor);
      mpfr_set_d(r, b1, MPFR_RNDU);
      mpfr_mul(r, r, gp, MPFR_RNDU);
    }
    const double b2 = next_up(next_up(c2(i) / shrink) + floor);
    mpfr_set_d(t, b2, MPFR_RNDU);
    mpfr_mul_2si(t, t, -A.p, MPFR_RNDU);
    mpfr_add(r, r, t, MPFR_RNDU);
    mpfi_ptr y = Y(i).backend().data();
    mpfi_interv_fr(y, r, r);
    mpfi_neg(y, y);
    mpfi_put_fr(y, r);  // [−r, r]
    mpfi_add_fr(y, y, raw(mid(i)));
  }
  mpfr_clears(gp, r, t, static_cast<mpfr_ptr>(nullptr));
  return Y;
}

// Modified Gram–Schmidt, twice: Q (n×k) with orthonormal columns to working precision and R (k×k)
// with X ≈ Q·R (approx tier).
void approx_qr(const matrix<mpfr_float>& X, matrix<mpfr_float>& Q, matrix<mpfr_float>& R) {
  const Eigen::Index n = X.rows(), k = X.cols();
  Q = X;
  R = matrix<mpfr_float>::Zero(k, k);
  for (int pass = 0; pass < 2; ++pass)
    for (Eigen::Index j = 0; j < k; ++j) {
      for (Eigen::Index i = 0; i < j; ++i) {
        mpfr_float c(0);
        for (Eigen::Index r = 0; r < n; ++r) c += Q(r, i) * Q(r, j);
        for (Eigen::Index r = 0; r < n; ++r) Q(r, j) -= c * Q(r, i);
        R(i, j) += pass == 0 ? c : mpfr_float(c * R(j, j));
      }
      mpfr_float s(0);
      for (Eigen::Index r = 0; r < n; ++r) s += Q(r, j) * Q(r, j);
      s = sqrt(s);
      if (pass == 0) R(j, j) = s;
      else R(j, j) *= s;
      if (s > 0)
        for (Eigen::Index r = 0; r < n; ++r) Q(r, j) /= s;
    }
}

// Rounds X·2^e to binary64 with e chosen so that the largest entry is near 1 (powers of two are
// exact); returns e.
long scaled_to_double(const matrix<mpfr_float>& X, matrix<double>& out) {
  long e = std::numeric_limits<long>::min();
  for (Eigen::Index i = 0; i < X.size(); ++i)
    if (mpfr_regular_p(raw(X(i)))) e = std::max<long>(e, mpfr_get_exp(raw(X(i))));
  e = e == std::numeric_limits<long>::min() ? 0 : -e;
  out.resize(X.rows(), X.cols());
  mpfr_t t;
  mpfr_init2(t, mpfr_get_default_prec());
  for (Eigen::Index i = 0; i < X.size(); ++i) {
    mpfr_mul_2si(t, raw(X(i)), e, MPFR_RNDN);
    out(i) = mpfr_get_d(t, MPFR_RNDN);
  }
  mpfr_clear(t);
  return e;
}

// The trailing triple (U₂, Σ₂, V₂) refined at the current precision (approx tier; part D, step 0).
struct trailing_triple {
  matrix<mpfr_float> U2, V2;
  std::vector<mpfr_float> s2;
  double residual = inf;  // ‖AᵀU₂ − V₂Σ₂‖_F (approx)
};

// Rayleigh–Ritz on span(V₂): V₂ orthonormalized, AV₂ = Q_y R_y, R_y = U_r Σ V_rᵀ;
// U₂ = Q_y U_r, V₂ ← V₂ V_r.  Returns false when the small SVD fails.
// AV₂ here is the MPFR loop's fl_p even when the products are split: near the resolution of p
// bits (a trailing σ of the block at the noise level), the triple refined from fl_p(AV₂) had
// certified residuals up to 10⁸ times smaller than from the split product (3.1e-23 against
// 1.8e-15 for the n = 40 graded causal matrix of tests/linalg/deflated_svd.cpp at 256 bits), and
// also smaller than from the MPFR loop run at 2p bits and rounded (3.6e-17); away from that
// resolution they agree (measured again with V₂ at exactly p bits, after the warm start's
// digits-for-bits mistake was fixed: split, 0 of 3 decided at 256 bits; fl_p, 2 of 3).
// Why fl_p's rounding helps there is not understood; the product is
// approx tier either way, and the other n×n×k products (Aᵀ·U₂ here, both enclosures) are split.
bool rayleigh_ritz(const mid_rad& Amid, trailing_triple& t) {
  matrix<mpfr_float> Q, R;
  approx_qr(t.V2, Q, R);
  t.V2 = Q;
  approx_qr(approx_times_mpfr(Amid.mid, t.V2, false), Q, R);
  matrix<mpfr_float> Ur, Vr;
  if (!approx_jacobi_svd(R, t.s2, &Ur, &Vr)) return false;
  t.U2 = Q * Ur;
  t.V2 = t.V2 * Vr;
  return true;
}

// The residual R_l = AᵀU₂ − V₂Σ₂ at p bits (approx) and its Frobenius norm as a double.
matrix<mpfr_float> left_residual(const mid_rad& Amid, trailing_triple& t) {
  matrix<mpfr_float> Rl = approx_times(Amid, t.U2, true);
  mpfr_float f(0);
  for (Eigen::Index j = 0; j < Rl.cols(); ++j)
    for (Eigen::Index i = 0; i < Rl.rows(); ++i) {
      Rl(i, j) -= t.V2(i, j) * t.s2[static_cast<std::size_t>(j)];
      f += Rl(i, j) * Rl(i, j);
    }
  t.residual = static_cast<double>(sqrt(f));
  return Rl;
}

// One correction step (part D, step 0): V₂ += V₁P with P_ij = −b_ij s_j / (ŝ_i² − s_j²),
// B = V₁ᵀR_l in binary64 on the scaled residual.  Returns log₂ of ‖P‖_F (−∞ for P = 0).
double correct(const binary64_svd_factors& F, Eigen::Index k, const matrix<mpfr_float>& Rl, trailing_triple& t) {
  const Eigen::Index n = F.V.cols(), m = n - k;
  matrix<double> rl;
  const long e = scaled_to_double(Rl, rl);
  const matrix<double> V1 = F.V.leftCols(m);
  matrix<double> P = approx_product_blas(V1, rl, true);
  for (Eigen::Index j = 0; j < k; ++j) {
    const double sj = static_cast<double>(t.s2[static_cast<std::size_t>(j)]);
    for (Eigen::Index i = 0; i < m; ++i) {
      const double si = F.s[static_cast<std::size_t>(i)];
      P(i, j) = -P(i, j) * sj / ((si - sj) * (si + sj));
    }
  }
  const matrix<double> D = approx_product_blas(V1, P);
  mpfr_t d;
  mpfr_init2(d, mpfr_get_default_prec());
  for (Eigen::Index i = 0; i < D.size(); ++i) {
    mpfr_set_d(d, D(i), MPFR_RNDN);
    mpfr_mul_2si(d, d, -e, MPFR_RNDN);
    mpfr_add(raw(t.V2(i)), raw(t.V2(i)), d, MPFR_RNDN);
  }
  mpfr_clear(d);
  const double norm = P.norm();
  return norm > 0 ? std::log2(norm) - static_cast<double>(e) : -inf;
}

// Rayleigh–Ritz and correction in turn until the correction is below 2^(4−p) (converged) or
// stops shrinking by half (stalled), then one last Rayleigh–Ritz: the triple returned is the one
// whose residual was measured.
trailing_triple refine(const mid_rad& A, const binary64_svd_factors& F, Eigen::Index k, const matrix<mpfr_float>& start,
                       int max_steps, int& steps) {
  trailing_triple t;
  t.V2 = start;
  steps = 0;
  double previous = inf;
  bool last = false;
  for (int it = 0; it < max_steps; ++it) {
    check_deadline();
    if (!rayleigh_ritz(A, t)) return trailing_triple{};
    const matrix<mpfr_float> Rl = left_residual(A, t);
    ++steps;
    if (last || it + 1 == max_steps || !std::isfinite(t.residual)) break;
    const double size = correct(F, k, Rl, t);

    last = size < 4.0 - static_cast<double>(A.p) || size > previous - 1.0;
    previous = size;
  }
  return t;
}

// ‖X‖_F rounded up, of a point matrix (MPFR, then binary64 rounded up).
mpfr_float frobenius_up(const matrix<mpfr_float>& X) {
  detail::csvd::frobenius_upper f;
  for (Eigen::Index i = 0; i < X.size(); ++i) f.add(raw(X(i)), raw(X(i)));
  return f.value();
}

// ‖Q₁ᵀQ₂‖₂ for Q₁ binary64 (n×m) and Q₂ at p bits (n×k), rounded up (part D, step 2):
// ‖fl(Q₁ᵀQ̂₂)‖_F + γ_n‖Q₁‖_F‖Q̂₂‖_F + √(mk)·nη + √(1 + a)·‖Q₂ − Q̂₂‖_F, Q̂₂ = Q₂ rounded to binary64,
// a ≥ ‖Q₁ᵀQ₁ − I‖₂ (so ‖Q₁‖₂ ≤ √(1 + a)).
mpfr_float cross_defect_up(const matrix<double>& Q1, const matrix<mpfr_float>& Q2, double a) {
  matrix<double> q2(Q2.rows(), Q2.cols());
  matrix<mpfr_float> diff(Q2.rows(), Q2.cols());
  for (Eigen::Index i = 0; i < Q2.size(); ++i) {
    q2(i) = mpfr_get_d(raw(Q2(i)), MPFR_RNDN);
    mpfr_sub_d(raw(diff(i)), raw(Q2(i)), q2(i), MPFR_RNDN);  // exact: the part below binary64
  }
  const matrix<double> G = approx_product_blas(Q1, q2, true);
  auto fro = [](const matrix<double>& M) {
    double s = 0;
    for (Eigen::Index i = 0; i < M.size(); ++i) s = next_up(s + next_up(M(i) * M(i)));
    return next_up(std::sqrt(s));
  };
  const double n = static_cast<double>(Q1.rows()), mk = static_cast<double>(Q1.cols()) * static_cast<double>(Q2.cols());
  double b = next_up(fro(G) + next_up(gamma_up(static_cast<std::size_t>(Q1.rows())) * next_up(fro(Q1) * fro(q2))));
  b = next_up(b + next_up(next_up(std::sqrt(mk) + 1) * next_up(n * eta)));
  const mpfi_float r = thin(mpfr_float(b)) + sqrt(mpfi_float(1) + thin(mpfr_float(a))) * thin(frobenius_up(diff));
  return upper_of(r);
}

// X = fl_p(Q₂ᵀQ₁) (k×m, one rounded product and one rounded sum per term, round to nearest) for Q₁
// binary64 (n×m) and Q₂ at p bits (n×k); `err` ≥ ‖Q₂ᵀQ₁ − X‖_F = γ_{n+1}^(p)·‖Q₂‖_F‖Q₁‖_F rounded up
// and `norm` ≥ ‖X‖_F (part D, step 2′).  The basis [Q₁ − Q₂X, Q₂] is then orthogonal across its
// blocks to p bits rather than to binary64's.
struct projection {
  matrix<mpfr_float> X;
  mpfr_float err, norm;
};

// U₁ or V₁ (the first n − k columns of a binary64 factor) with its slices when the products are
// split (sliced once per escalation: they serve every product with it at this precision).
struct kept_block {
  matrix<double> Q;
  split_plan plan;
  detail::split::slices sl;
};

kept_block kept_of(const matrix<double>& full, Eigen::Index k, long p) {
  kept_block b;
  b.Q = full.leftCols(full.cols() - k);
  b.plan = plan_for(full.rows(), p);
  if (b.plan.on) b.sl = detail::split::slice(b.Q, b.plan.S, b.plan.beta);
  return b;
}

projection project_out(const kept_block& B, const matrix<mpfr_float>& Q2) {
  projection pr;
  const matrix<double>& Q1 = B.Q;
  const Eigen::Index n = Q1.rows(), m = Q1.cols(), k = Q2.cols();
  const long p = static_cast<long>(current_mpfr_bits());
  const split_plan& pl = B.plan;
  if (pl.on) {
    // Split: |X − Q₂ᵀQ₁| ≤ 2^-p|X| + eps entrywise, so ξ = 2^-p‖X‖_F + √(km)·eps.
    mpfr_float eps;
    pr.X = detail::split::product(detail::split::slice(Q2, pl.S, pl.beta, product_threads), true, B.sl, n, pl.S,
                                  pl.beta, eps, product_threads);
    pr.norm = frobenius_up(pr.X);
    mpfi_float x = thin(pr.norm) * thin(mpfr_float(pow(mpfr_float(2), -p)));
    x += sqrt(mpfi_float(static_cast<double>(k) * static_cast<double>(m))) * thin(eps);
    pr.err = upper_of(x);
    return pr;
  }
  pr.X.resize(k, m);
  parallel_for(static_cast<std::size_t>(m), product_threads, [&](std::size_t jj) {
    const Eigen::Index j = static_cast<Eigen::Index>(jj);
    mpfr_float t;
    for (Eigen::Index i = 0; i < k; ++i) {
      mpfr_ptr x = raw(pr.X(i, j));
      mpfr_set_ui(x, 0, MPFR_RNDN);
      for (Eigen::Index l = 0; l < n; ++l) {
        mpfr_mul_d(raw(t), raw(Q2(l, i)), Q1(l, j), MPFR_RNDN);
        mpfr_add(x, x, raw(t), MPFR_RNDN);
      }
    }
  });
  mpfr_float q1(0);
  for (Eigen::Index i = 0; i < Q1.size(); ++i) mpfr_fma(raw(q1), mpfr_float(Q1(i)).backend().data(), mpfr_float(Q1(i)).backend().data(), raw(q1), MPFR_RNDU);
  mpfr_sqrt(raw(q1), raw(q1), MPFR_RNDU);
  mpfi_float g = thin(mpfr_float(static_cast<double>(n + 1)));
  g = g * thin(mpfr_float(pow(mpfr_float(2), -static_cast<long>(current_mpfr_bits()))));
  g = g / (mpfi_float(1) - g);
  pr.err = upper_of(g * thin(frobenius_up(Q2)) * thin(q1));
  pr.norm = frobenius_up(pr.X);
  return pr;
}

std::vector<mpfi_float> no_claim(std::size_t k, deflation_report& rep, std::string why) {
  rep.why_not = std::move(why);
  return std::vector<mpfi_float>(k, detail::csvd::nonnegative_half_line());
}


void orthogonalize_once(const kept_block& B, matrix<mpfr_float>& U2) {
  const matrix<double>& U1 = B.Q;
  const Eigen::Index n = U1.rows(), m = U1.cols(), k = U2.cols();
  const split_plan& pl = B.plan;
  if (pl.on) {  // U₂ ← U₂ − U₁(U₁ᵀU₂) with split products (approx tier)
    mpfr_float eps;
    const detail::split::slices& u1 = B.sl;
    const matrix<mpfr_float> C =
        detail::split::product(u1, true, detail::split::slice(U2, pl.S, pl.beta, product_threads), n, pl.S, pl.beta, eps, product_threads);
    const matrix<mpfr_float> D =
        detail::split::product(u1, false, detail::split::slice(C, pl.S, pl.beta, product_threads), m, pl.S, pl.beta, eps, product_threads);
    for (Eigen::Index i = 0; i < U2.size(); ++i) mpfr_sub(raw(U2(i)), raw(U2(i)), raw(D(i)), MPFR_RNDN);
    matrix<mpfr_float> Q, R;
    approx_qr(U2, Q, R);
    U2 = Q;
    return;
  }
  matrix<mpfr_float> C(m, k);
  parallel_for(static_cast<std::size_t>(k), product_threads, [&](std::size_t jj) {  // column j of C, then of U₂
    const Eigen::Index j = static_cast<Eigen::Index>(jj);
    mpfr_float t;
    for (Eigen::Index i = 0; i < m; ++i) {
      mpfr_ptr c = raw(C(i, j));
      mpfr_set_ui(c, 0, MPFR_RNDN);
      for (Eigen::Index l = 0; l < n; ++l) {
        mpfr_mul_d(raw(t), raw(U2(l, j)), U1(l, i), MPFR_RNDN);
        mpfr_add(c, c, raw(t), MPFR_RNDN);
      }
    }
    for (Eigen::Index i = 0; i < m; ++i) {
      mpfr_srcptr c = raw(C(i, j));
      for (Eigen::Index l = 0; l < n; ++l) {
        mpfr_mul_d(raw(t), c, U1(l, i), MPFR_RNDN);
        mpfr_sub(raw(U2(l, j)), raw(U2(l, j)), raw(t), MPFR_RNDN);
      }
    }
  });
  matrix<mpfr_float> Q, R;
  approx_qr(U2, Q, R);
  U2 = Q;
}

// U₂ ← U₂ − U₁(U₁ᵀU₂) at p bits, then orthonormalized (modified Gram–Schmidt twice); the whole
// done twice, since normalizing a column that was nearly inside span(U₁) amplifies what the first
// round left of U₁ ("twice is enough").  Approx tier.
void orthogonalize_against(const kept_block& U1, matrix<mpfr_float>& U2) {
  for (int round = 0; round < 2; ++round) orthogonalize_once(U1, U2);
}

// Step 1 of part D: r_r ≥ ‖ÃV₂ − U₂Σ₂‖_F, r_l ≥ ‖ÃᵀU₂ − V₂Σ₂‖_F, s_max = max |Σ₂| and M₂₂ ∋ U₂ᵀÃV₂,
// for every Ã inside A.
struct step_one {
  mpfr_float rr, rl, smax;
  matrix<mpfi_float> M22;
};

step_one residuals_and_block(const mid_rad& Am, const trailing_triple& t) {
  const Eigen::Index n = Am.mid.rows(), k = t.V2.cols();
  const matrix<mpfi_float> Y = enclose_times(Am, t.V2, false), Z = enclose_times(Am, t.U2, true);
  detail::csvd::frobenius_upper fr, fl;
  mpfi_float x;
  step_one out;
  out.smax = 0;
  for (Eigen::Index j = 0; j < k; ++j) {
    const mpfr_float& sj = t.s2[static_cast<std::size_t>(j)];
    out.smax = std::max(out.smax, mpfr_float(abs(sj)));
    for (Eigen::Index i = 0; i < n; ++i) {
      mpfi_set_fr(x.backend().data(), raw(t.U2(i, j)));
      mpfi_mul_fr(x.backend().data(), x.backend().data(), raw(sj));
      mpfi_sub(x.backend().data(), Y(i, j).backend().data(), x.backend().data());
      fr.add(x);
      mpfi_set_fr(x.backend().data(), raw(t.V2(i, j)));
      mpfi_mul_fr(x.backend().data(), x.backend().data(), raw(sj));
      mpfi_sub(x.backend().data(), Z(i, j).backend().data(), x.backend().data());
      fl.add(x);
    }
  }
  out.rr = fr.value();
  out.rl = fl.value();
  out.M22 = detail::csvd::point_transpose_times(t.U2, Y);
  return out;
}

// Steps 1–5 of part D for the triple t: enclosures of the k smallest singular values, or no claim
// (rep.why_not says why).
std::vector<mpfi_float> certify_triple(const mid_rad& Am, const binary64_svd_factors& F, const kept_block& U1b,
                                       const kept_block& V1b, const trailing_triple& t,
                                       deflation_report& rep) {
  const Eigen::Index n = Am.mid.rows(), k = t.V2.cols(), m = n - k;
  const std::size_t kk = static_cast<std::size_t>(k);
  // Step 1: Y = AV₂ and Z = AᵀU₂ enclosed; R_r = Y − U₂Σ₂, R_l = Z − V₂Σ₂; M₂₂ = U₂ᵀY.
  const step_one p1 = residuals_and_block(Am, t);
  const matrix<mpfi_float>& M22 = p1.M22;
  const mpfr_float& smax = p1.smax;
  if (mpfr_underflow_p()) return no_claim(kk, rep, "MPFR underflow");

  // Step 2: the binary64 blocks' cross defects ‖U₁ᵀU₂‖ ≤ b_u, ‖V₁ᵀV₂‖ ≤ b_v, and the couplings in
  // the basis [U₁ U₂], [V₁ V₂]: ‖M₁₂‖ ≤ e₁₂, ‖M₂₁‖ ≤ e₂₁.
  const matrix<double>& U1 = U1b.Q;
  const matrix<double>& V1 = V1b.Q;
  const mpfr_float bu = cross_defect_up(U1, t.U2, F.alpha), bv = cross_defect_up(V1, t.V2, F.beta);
  const mpfi_float a0 = thin(mpfr_float(F.alpha)), b0 = thin(mpfr_float(F.beta)), one(1);
  const mpfi_float gu = thin(detail::csvd::orthogonality_defect(t.U2)), gv = thin(detail::csvd::orthogonality_defect(t.V2));
  const mpfi_float rr = thin(p1.rr), rl = thin(p1.rl), sm = thin(smax);
  const mpfi_float e12 = thin(bu) * sm + sqrt(mpfi_float(one + a0)) * rr;
  const mpfi_float e21 = thin(bv) * sm + sqrt(mpfi_float(one + b0)) * rl;

  // Step 2′: the projected bases U₁′ = U₁ − U₂X, V₁′ = V₁ − V₂Y: their defects and couplings.
  const projection px = project_out(U1b, t.U2), py = project_out(V1b, t.V2);
  const mpfi_float xn = thin(px.norm), yn = thin(py.norm);
  const mpfi_float a11 = a0 + 2 * thin(bu) * xn + xn * xn * (one + gu), a12 = thin(px.err) + gu * xn;
  const mpfi_float b11 = b0 + 2 * thin(bv) * yn + yn * yn * (one + gv), b12 = thin(py.err) + gv * yn;
  const mpfr_float alpha = upper_of(sqrt(mpfi_float(a11 * a11 + 2 * a12 * a12 + gu * gu)));
  const mpfr_float beta = upper_of(sqrt(mpfi_float(b11 * b11 + 2 * b12 * b12 + gv * gv)));
  if (!(alpha < 1) || !(beta < 1))
    return no_claim(kk, rep, "the refined bases are too far from orthogonal: alpha' " + alpha.str(3) + ", beta' " + beta.str(3));
  const mpfr_float eps = std::max(upper_of(mpfi_float(a12 * sm + sqrt(mpfi_float(one + a11)) * rr)),
                                  upper_of(mpfi_float(b12 * sm + sqrt(mpfi_float(one + b11)) * rl)));
  rep.epsilon = mpfr_get_d(raw(eps), MPFR_RNDU);
  const singular_value_enclosures small = certified_singular_values(M22);
  const mpfi_float h1 = thin(upper_of(small.sigma[0]));

  // Step 3: σ_min(M₁₁′) ≥ (1 − α)·ŝ_{n−k} − √(1 + α)·ρ − (‖X‖e₂₁ + e₁₂‖Y‖ + ‖X‖‖Y‖h₁) (Weyl twice;
  // σ_min(U₁ᵀU₁ diag ŝ₁) ≥ λ_min(U₁ᵀU₁)·ŝ_{n−k} ≥ (1 − α)·ŝ_{n−k}).
  const mpfr_float s_low = lower_of((one - a0) * thin(mpfr_float(F.s[static_cast<std::size_t>(m - 1)])) -
                                    sqrt(mpfi_float(one + a0)) * thin(mpfr_float(F.rho)) - (xn * e21 + e12 * yn + xn * yn * h1));

  // Step 4: the gap η and the shift δ (Li and Li).
  const mpfr_float gap = lower_of(thin(s_low) - h1);
  rep.gap = mpfr_get_d(raw(gap), MPFR_RNDD);
  if (!(gap > 0))
    return no_claim(kk, rep, "no gap between the kept and the escalated singular values: sigma_min(M11) >= " + s_low.str(3) +
                                 ", sigma_max(M22) <= " + upper_of(h1).str(3));
  const mpfi_float E = thin(eps), G = thin(gap);
  const mpfr_float li = upper_of(mpfi_float(2 * E * E / (G + sqrt(mpfi_float(G * G + 4 * E * E)))));
  const mpfr_float delta = std::min(eps, li);

  // Step 5: back to A through U and V.
  const mpfi_float grow = sqrt(mpfi_float((one + thin(alpha)) * (one + thin(beta))));
  const mpfi_float shrink = sqrt(mpfi_float((one - thin(alpha)) * (one - thin(beta))));
  std::vector<mpfi_float> out(kk);
  for (std::size_t j = 0; j < kk; ++j) {
    mpfr_float lo(0);
    const mpfi_float num = thin(lower_of(small.sigma[j])) - thin(delta);
    if (lower_of(num) > 0) lo = lower_of(mpfi_float(num / grow));
    const mpfr_float hi = upper_of(mpfi_float((thin(upper_of(small.sigma[j])) + thin(delta)) / shrink));
    if (!mpfr_number_p(raw(hi))) return no_claim(kk, rep, "a bound is not finite");
    mpfi_interv_fr(out[j].backend().data(), raw(lo), raw(hi));
  }
  return out;
}

}  // namespace

std::size_t deflation_split(const std::vector<mpfi_float>& sigma, std::size_t k_min, std::size_t k_max) {
  const std::size_t n = sigma.size();
  for (std::size_t k = std::max<std::size_t>(k_min, 1); k <= k_max && k < n; ++k)
    if (lower_of(sigma[n - k - 1]) >= 2 * upper_of(sigma[n - k])) return k;
  return 0;
}

std::vector<mpfi_float> deflated_trailing_singular_values(const matrix<mpfi_float>& A, const binary64_svd_factors& F,
                                                          std::size_t kk, deflation_vectors& vectors,
                                                          deflation_report& rep, int max_steps, unsigned threads) {
  const Eigen::Index n = A.rows(), k = static_cast<Eigen::Index>(kk);
  struct threads_scope {
    unsigned saved = product_threads;
    explicit threads_scope(unsigned t) { product_threads = std::max(1u, t); }
    ~threads_scope() { product_threads = saved; }
  } scope(threads);
  if (A.cols() != n || !F.valid || F.transposed || F.V.rows() != n || F.V.cols() != n || F.U.rows() != n ||
      F.U.cols() != n || static_cast<Eigen::Index>(F.s.size()) != n || k <= 0 || k >= n)
    throw input_error("deflated singular values: need a square matrix, its binary64 factors and 0 < k < n");
  rep = deflation_report{};
  rep.k = kk;
  rep.bits = current_mpfr_bits();
  // Below 64 bits the conversions of binary64 bounds and factors to mpfr_float (round to nearest)
  // would no longer be exact, and the bounds that rely on them could round down.
  if (rep.bits < 64) return no_claim(kk, rep, "the precision is below 64 bits");
  for (Eigen::Index i = 0; i < A.size(); ++i)
    if (!mpfi_bounded_p(A(i).backend().data())) return no_claim(kk, rep, "an entry of the matrix is not bounded");
  mpfr_clear_underflow();
  const mid_rad Am = split_mid_rad(A);

  // Step 0 (approx): refine the trailing vectors at p bits.
  matrix<mpfr_float> start = vectors.V2;
  if (start.rows() != n || start.cols() != k) start = from_double_matrix<mpfr_float>(F.V.rightCols(k));
  else
    // to p bits exactly: Boost's precision(x) takes decimal digits (precision(p) gave about 3.3p
    // bits, which every product with these vectors then inherited)
    for (Eigen::Index i = 0; i < start.size(); ++i) mpfr_prec_round(start(i).backend().data(), rep.bits, MPFR_RNDN);
  const trailing_triple t = refine(Am, F, k, start, max_steps, rep.refinement_steps);
  rep.residual = t.residual;
  if (t.U2.size() == 0) return no_claim(kk, rep, "the refinement's small SVD failed");
  vectors.V2 = t.V2;

  const kept_block U1 = kept_of(F.U, k, Am.p), V1 = kept_of(F.V, k, Am.p);
  std::vector<mpfi_float> out = certify_triple(Am, F, U1, V1, t, rep);
  if (rep.why_not.empty()) return out;
  // Columns whose σ lies below what p bits resolve are noise, far from orthogonal to U₁ and V₁:
  // orthogonalize U₂ against U₁ and V₂ against V₁ once and orthonormalize them (any bases serve;
  // part D, step 0′), then bound again.
  trailing_triple o = t;
  orthogonalize_against(U1, o.U2);
  orthogonalize_against(V1, o.V2);
  deflation_report again = rep;
  again.why_not.clear();
  std::vector<mpfi_float> second = certify_triple(Am, F, U1, V1, o, again);
  if (!again.why_not.empty()) {
    rep.why_not += "; with U2, V2 orthogonalized: " + again.why_not;
    return out;
  }
  again.orthogonalized = true;
  rep = again;
  return second;
}

}  // namespace attncert
