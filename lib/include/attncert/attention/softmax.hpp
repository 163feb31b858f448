// attncert/attention/softmax.hpp — numerically stable masked row softmax, log-softmax,
// log-odds, and the forward derivative of softmax.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attncert/attention/empty_rows.hpp"
#include "attncert/attention/mask.hpp"
#include "attncert/deadline.hpp"
#include "attncert/field.hpp"
#include "attncert/linalg/matrix.hpp"

namespace attncert {

namespace detail {
template <class T>
bool is_finite_value(const T& x) {
  if constexpr (std::is_same_v<T, mpq_rational>) return true;
  else if constexpr (std::is_same_v<T, mpfi_float>) return mpfi_bounded_p(x.backend().data()) != 0;
  else if constexpr (std::is_same_v<T, mpfr_float>) return boost::multiprecision::isfinite(x);
  else { using std::isfinite; return isfinite(static_cast<double>(x)); }
}

template <class T>
T quiet_nan() { return std::numeric_limits<T>::quiet_NaN(); }

// Shift point of row i: a value m with exp(s_ij - m) <= 1 (approx) computed over allowed
// entries; returns false when the row has no allowed entry.
template <class T>
bool row_shift(const matrix<T>& S, const mask& M, Eigen::Index i, T& shift) {
  bool any = false;
  T mx(0);
  for (Eigen::Index j = 0; j < S.cols(); ++j) {
    if (!M.allows(i, j)) continue;
    if (!is_finite_value(S(i, j)))
      throw input_error("score (" + std::to_string(i) + ", " + std::to_string(j) + ") is not finite (NaN, Inf or overflow)");
    mx = any ? max_of(mx, S(i, j)) : S(i, j);
    any = true;
  }
  if (any) shift = shift_point(mx);
  return any;
}

template <class T>
void empty_row(matrix<T>& A, Eigen::Index i, empty_row_policy p) {
  if (p == empty_row_policy::error)
    throw input_error("row " + std::to_string(i) + " is fully masked: softmax is undefined (use " + field("empty_rows") +
                      " zeros|nan to choose a value)");
  for (Eigen::Index j = 0; j < A.cols(); ++j) A(i, j) = p == empty_row_policy::zeros ? T(0) : quiet_nan<T>();
}
}  // namespace detail

/// Row softmax of S under mask M: A_ij = exp(S_ij - m_i) / Σ_{k allowed} exp(S_ik - m_i)
/// for allowed (i, j), exactly 0 for masked (i, j); m_i is the row maximum over allowed
/// entries (subtracting it is the standard overflow-free evaluation and leaves the exact
/// value unchanged).  Tier: that of T — approx types round every operation; for intervals
/// every entry encloses the exact softmax of the (exact) scores inside S.  Not available
/// for rationals (exp is transcendental).
/// Errors (input_error): non-finite allowed score; shape mismatch with an explicit mask; a
/// fully masked row under empty_row_policy::error.
namespace detail {
/// Row i of masked_softmax(S, M, empty), written to row i of A (sized as S; M's shape checked by
/// the caller): the rows are independent, so callers may compute them on several threads.
template <class T>
void masked_softmax_row(const matrix<T>& S, const mask& M, Eigen::Index i, matrix<T>& A, empty_row_policy empty) {
  using std::exp;
  check_deadline();  // the command's budget and interruption (deadline.hpp): one poll per row
  T shift(0);
  if (!row_shift(S, M, i, shift)) {
    empty_row(A, i, empty);
    return;
  }
  T z(0);
  for (Eigen::Index j = 0; j < S.cols(); ++j) {
    if (M.allows(i, j)) {
      A(i, j) = exp(S(i, j) - shift);
      z += A(i, j);
    } else {
      A(i, j) = T(0);
    }
  }
  for (Eigen::Index j = 0; j < S.cols(); ++j)
    if (M.allows(i, j)) A(i, j) = A(i, j) / z;
}
}  // namespace detail

template <class T>
matrix<T> masked_softmax(const matrix<T>& S, const mask& M = mask::none(),
                         empty_row_policy empty = empty_row_policy::error) {
  static_assert(!std::is_same_v<T, mpq_rational>, "softmax of rationals is not rational: see proofs/");
  M.check_shape(S.rows(), S.cols());
  matrix<T> A(S.rows(), S.cols());
  for (Eigen::Index i = 0; i < S.rows(); ++i) detail::masked_softmax_row(S, M, i, A, empty);
  return A;
}

/// Row log-softmax: L_ij = (S_ij - m_i) - log Σ_k exp(S_ik - m_i) on allowed entries, -∞ on
/// masked ones (log 0).  Same tier, preconditions and errors as masked_softmax.  Computing
/// log-probabilities this way never takes the log of an underflowed probability.
template <class T>
matrix<T> masked_log_softmax(const matrix<T>& S, const mask& M = mask::none(),
                             empty_row_policy empty = empty_row_policy::error) {
  using std::exp;
  using std::log;
  M.check_shape(S.rows(), S.cols());
  matrix<T> L(S.rows(), S.cols());
  for (Eigen::Index i = 0; i < S.rows(); ++i) {
    T shift(0);
    if (!detail::row_shift(S, M, i, shift)) {
      detail::empty_row(L, i, empty);
      continue;
    }
    T z(0);
    for (Eigen::Index j = 0; j < S.cols(); ++j)
      if (M.allows(i, j)) z += exp(S(i, j) - shift);
    const T lz = log(z);
    for (Eigen::Index j = 0; j < S.cols(); ++j)
      L(i, j) = M.allows(i, j) ? T((S(i, j) - shift) - lz) : T(-std::numeric_limits<T>::infinity());
  }
  return L;
}

/// Log-odds relative to a reference key: O_ij = log A_ij − log A_i,ref, computed from the
/// log-softmax.  For strictly positive rows the exact value equals S_ij − S_i,ref (§3).
/// Precondition: every (i, ref) allowed (else input_error).
template <class T>
matrix<T> log_odds(const matrix<T>& S, const mask& M, Eigen::Index ref) {
  if (ref < 0 || ref >= S.cols()) throw input_error("reference column out of range");
  matrix<T> L = masked_log_softmax(S, M);
  matrix<T> O(S.rows(), S.cols());
  for (Eigen::Index i = 0; i < S.rows(); ++i) {
    if (!M.allows(i, ref)) throw input_error("log-odds reference key is masked in row " + std::to_string(i));
    for (Eigen::Index j = 0; j < S.cols(); ++j)
      O(i, j) = M.allows(i, j) ? T(L(i, j) - L(i, ref)) : T(-std::numeric_limits<T>::infinity());
  }
  return O;
}

/// Forward derivative of the row softmax: given A = softmax(S) and a direction dS, returns
/// dA with dA_ij = A_ij (dS_ij − Σ_k A_ik dS_ik) on allowed entries and 0 on masked ones.
/// Tier: that of T.  Preconditions: A and dS have the same shape.
template <class T>
matrix<T> softmax_jvp(const matrix<T>& A, const matrix<T>& dS, const mask& M = mask::none()) {
  if (A.rows() != dS.rows() || A.cols() != dS.cols()) throw input_error("softmax_jvp: shape mismatch");
  matrix<T> dA(A.rows(), A.cols());
  for (Eigen::Index i = 0; i < A.rows(); ++i) {
    T mean(0);
    for (Eigen::Index k = 0; k < A.cols(); ++k)
      if (M.allows(i, k)) mean += A(i, k) * dS(i, k);
    for (Eigen::Index j = 0; j < A.cols(); ++j) dA(i, j) = M.allows(i, j) ? T(A(i, j) * (dS(i, j) - mean)) : T(0);
  }
  return dA;
}

}  // namespace attncert
