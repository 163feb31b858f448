// attncert/attention/bounds.hpp — the output-error bound of §11.
//
// For attention matrices A, Â (n_q × n_k) and values V (n_k × d_v), for every row i:
//   ‖((Â − A)V)_i‖₂ ≤ ‖Â_i − A_i‖₁ · max_j ‖v_j‖₂                     (row-L1 form)
//   ‖((Â − A)V)_i‖₂ ≤ n_k · max_j |Â_ij − A_ij| · max_j ‖v_j‖₂          (entrywise-max form)
// Proof: ((Â − A)V)_i = Σ_j (Â_ij − A_ij) v_j and the triangle inequality; the second
// follows from ‖x‖₁ ≤ n_k ‖x‖_∞.  See proofs/P04-output-bound.md.  No assumption on Â
// (it need not be stochastic).
#pragma once

#include <vector>

#include "attncert/linalg/matrix.hpp"

namespace attncert {

/// The three sides of the bound for one row, in T.
template <class T>
struct output_bound_row {
  T lhs;         ///< ‖((Â − A)V)_i‖₂
  T rhs_l1;      ///< ‖Â_i − A_i‖₁ · max_j ‖v_j‖₂
  T rhs_max;     ///< n_k · max_j |Â_ij − A_ij| · max_j ‖v_j‖₂
  T row_l1;      ///< ‖Â_i − A_i‖₁
};

/// Evaluate both sides of the bound for every row.  Tier: that of T (for rationals use
/// output_bound_rows_squared, which avoids the square roots).  Preconditions: Â and A have
/// the same shape; A.cols() == V.rows().
template <class T>
std::vector<output_bound_row<T>> output_bound_rows(const matrix<T>& A_hat, const matrix<T>& A, const matrix<T>& V) {
  using std::sqrt;
  if (A_hat.rows() != A.rows() || A_hat.cols() != A.cols()) throw input_error("output bound: Â and A differ in shape");
  if (A.cols() != V.rows()) throw input_error("output bound: A has " + std::to_string(A.cols()) + " columns but V has " + std::to_string(V.rows()) + " rows");
  T vmax(0);
  for (Eigen::Index j = 0; j < V.rows(); ++j) {
    T s(0);
    for (Eigen::Index k = 0; k < V.cols(); ++k) s += V(j, k) * V(j, k);
    vmax = j == 0 ? sqrt(s) : max_of(vmax, sqrt(s));
  }
  std::vector<output_bound_row<T>> rows;
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    T l1(0), linf(0), l2sq(0);
    for (Eigen::Index j = 0; j < A.cols(); ++j) {
      const T d = abs_of(T(A_hat(i, j) - A(i, j)));
      l1 += d;
      linf = j == 0 ? d : max_of(linf, d);
    }
    for (Eigen::Index k = 0; k < V.cols(); ++k) {
      T s(0);
      for (Eigen::Index j = 0; j < A.cols(); ++j) s += (A_hat(i, j) - A(i, j)) * V(j, k);
      l2sq += s * s;
    }
    rows.push_back({sqrt(l2sq), T(l1 * vmax), T(T(static_cast<int>(A.cols())) * linf * vmax), l1});
  }
  return rows;
}

/// Exact form for rationals: returns, per row, {lhs², rhs_l1², rhs_max², row_l1}, so that
/// lhs ≤ rhs  ⇔  lhs² ≤ rhs² can be decided exactly.
inline std::vector<output_bound_row<mpq_rational>> output_bound_rows_squared(const matrix<mpq_rational>& A_hat,
                                                                             const matrix<mpq_rational>& A,
                                                                             const matrix<mpq_rational>& V) {
  using Q = mpq_rational;
  if (A_hat.rows() != A.rows() || A_hat.cols() != A.cols()) throw input_error("output bound: Â and A differ in shape");
  if (A.cols() != V.rows()) throw input_error("output bound: A and V do not chain");
  Q vmax2(0);
  for (Eigen::Index j = 0; j < V.rows(); ++j) {
    Q s(0);
    for (Eigen::Index k = 0; k < V.cols(); ++k) s += V(j, k) * V(j, k);
    if (s > vmax2) vmax2 = s;
  }
  std::vector<output_bound_row<Q>> rows;
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    Q l1(0), linf(0), l2sq(0);
    for (Eigen::Index j = 0; j < A.cols(); ++j) {
      Q d = abs(Q(A_hat(i, j) - A(i, j)));
      l1 += d;
      if (d > linf) linf = d;
    }
    for (Eigen::Index k = 0; k < V.cols(); ++k) {
      Q s(0);
      for (Eigen::Index j = 0; j < A.cols(); ++j) s += (A_hat(i, j) - A(i, j)) * V(j, k);
      l2sq += s * s;
    }
    const Q n(static_cast<int>(A.cols()));
    rows.push_back({l2sq, Q(l1 * l1 * vmax2), Q(n * n * linf * linf * vmax2), l1});
  }
  return rows;
}

}  // namespace attncert
