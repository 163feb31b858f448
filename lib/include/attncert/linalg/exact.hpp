// attncert/linalg/exact.hpp — exact rank and determinant over ℚ (exact tier), and a
// rigorous determinant enclosure for interval matrices (enclosure tier).
#pragma once

#include <vector>

#include "attncert/linalg/matrix.hpp"

namespace attncert {

/// Rank of a rational matrix over ℚ by Gaussian elimination (first nonzero pivot).
/// Tier: exact — the true rank.
inline std::size_t rank(matrix<mpq_rational> A) {
  const Eigen::Index m = A.rows(), n = A.cols();
  std::size_t r = 0;
  for (Eigen::Index c = 0; c < n && static_cast<Eigen::Index>(r) < m; ++c) {
    Eigen::Index piv = -1;
    for (Eigen::Index i = static_cast<Eigen::Index>(r); i < m; ++i)
      if (A(i, c) != 0) { piv = i; break; }
    if (piv < 0) continue;
    A.row(piv).swap(A.row(static_cast<Eigen::Index>(r)));
    const Eigen::Index pr = static_cast<Eigen::Index>(r);
    for (Eigen::Index i = pr + 1; i < m; ++i) {
      if (A(i, c) == 0) continue;
      const mpq_rational f = A(i, c) / A(pr, c);
      for (Eigen::Index j = c; j < n; ++j) A(i, j) -= f * A(pr, j);
    }
    ++r;
  }
  return r;
}

/// Determinant of a square rational matrix (exact tier).  Precondition: square.
inline mpq_rational determinant(matrix<mpq_rational> A) {
  if (A.rows() != A.cols()) throw input_error("determinant of a non-square matrix");
  const Eigen::Index n = A.rows();
  mpq_rational det(1);
  for (Eigen::Index c = 0; c < n; ++c) {
    Eigen::Index piv = -1;
    for (Eigen::Index i = c; i < n; ++i)
      if (A(i, c) != 0) { piv = i; break; }
    if (piv < 0) return mpq_rational(0);
    if (piv != c) { A.row(piv).swap(A.row(c)); det = -det; }
    det *= A(c, c);
    for (Eigen::Index i = c + 1; i < n; ++i) {
      if (A(i, c) == 0) continue;
      const mpq_rational f = A(i, c) / A(c, c);
      for (Eigen::Index j = c; j < n; ++j) A(i, j) -= f * A(c, j);
    }
  }
  return det;
}

/// Determinant by cofactor (Laplace) expansion along the first row, in T.  Uses only +, −
/// and ×, never compares, so it is safe for intervals; exact zeros contribute exact zeros
/// (a triangular matrix gives the product of its diagonal, rounded n − 1 times).  Cost n!:
/// for n ≤ 8 only (input_error otherwise).  Tier: that of T.
template <class T>
T cofactor_determinant(const matrix<T>& A) {
  if (A.rows() != A.cols()) throw input_error("determinant of a non-square matrix");
  const Eigen::Index n = A.rows();
  if (n > 8) throw input_error("determinant by cofactor expansion is limited to n <= 8");
  if (n == 0) return T(1);
  if (n == 1) return A(0, 0);
  if (n == 2) return A(0, 0) * A(1, 1) - A(0, 1) * A(1, 0);
  T det(0);
  for (Eigen::Index j = 0; j < n; ++j) {
    matrix<T> minor(n - 1, n - 1);
    for (Eigen::Index i = 1; i < n; ++i)
      for (Eigen::Index k = 0, c = 0; k < n; ++k)
        if (k != j) minor(i - 1, c++) = A(i, k);
    const T term = A(0, j) * cofactor_determinant(minor);
    det = (j % 2 == 0) ? T(det + term) : T(det - term);
  }
  return det;
}

/// Enclosure of the determinant of an interval matrix: the returned interval contains
/// det(M) for every real matrix M inside A (cofactor expansion; n ≤ 8).  Tier: enclosure.
inline mpfi_float determinant(const matrix<mpfi_float>& A) { return cofactor_determinant(A); }

/// Certified lower bound on the rank of an interval matrix: if some r×r minor (r ≤ 8) has
/// an enclosure that excludes 0, every matrix inside has rank ≥ r.  Returns the largest such r found and the
/// witness rows/columns.  The search tries every row and column subset of size r, from the
/// largest r down (small matrices only: declared constructions).  Tier: enclosure (a lower
/// bound, backed by the witness minor).
struct rank_lower_bound {
  std::size_t rank = 0;
  std::vector<Eigen::Index> rows, cols;  ///< the witness minor
  mpfi_float minor;                      ///< its determinant enclosure (excludes 0)
};

inline rank_lower_bound certified_rank_lower_bound(const matrix<mpfi_float>& A) {
  rank_lower_bound best;
  const Eigen::Index m = A.rows(), n = A.cols();
  const Eigen::Index rmax = std::min<Eigen::Index>(std::min(m, n), 8);
  // Try the full leading square choice for each size r from the top, over all row and
  // column subsets (small matrices only: this is for declared constructions).
  for (Eigen::Index r = rmax; r >= 1; --r) {
    std::vector<Eigen::Index> rows(r), cols(r);
    std::vector<bool> rs(m, false), cs(n, false);
    std::fill(rs.begin(), rs.begin() + r, true);
    do {
      std::fill(cs.begin(), cs.end(), false);
      std::fill(cs.begin(), cs.begin() + r, true);
      do {
        for (Eigen::Index i = 0, a = 0; i < m; ++i) if (rs[i]) rows[a++] = i;
        for (Eigen::Index j = 0, b = 0; j < n; ++j) if (cs[j]) cols[b++] = j;
        matrix<mpfi_float> M(r, r);
        for (Eigen::Index i = 0; i < r; ++i)
          for (Eigen::Index j = 0; j < r; ++j) M(i, j) = A(rows[i], cols[j]);
        mpfi_float d = determinant(M);
        if (!contains_zero(d)) {
          best.rank = static_cast<std::size_t>(r);
          best.rows = rows;
          best.cols = cols;
          best.minor = d;
          return best;
        }
      } while (std::prev_permutation(cs.begin(), cs.end()));
    } while (std::prev_permutation(rs.begin(), rs.end()));
  }
  return best;
}

}  // namespace attncert
