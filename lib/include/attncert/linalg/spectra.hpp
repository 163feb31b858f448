// attncert/linalg/spectra.hpp — singular values and the statistics derived from them
// (approx tier: floating results with no error claim; certified enclosures are a later
// layer).  All functions here carry the `approx_` prefix.
#pragma once

#include <Eigen/SVD>
#include <Eigen/LU>
#include <algorithm>
#include <vector>

#include "attncert/linalg/lapack.hpp"
#include "attncert/linalg/matrix.hpp"

namespace attncert {

/// Singular values of A in decreasing order, computed in the arithmetic of T: binary32 and
/// binary64 by LAPACK's dgesdd/sgesdd (linalg/lapack.hpp; what NumPy runs), mpfr at the current
/// precision by Eigen's two-sided JacobiSVD.  For the emulated
/// 16-bit formats the SVD runs in binary32 on the exactly converted matrix and each σ is
/// rounded back to T (as NumPy and PyTorch upcast half precision; Eigen's 2×2 Jacobi step
/// computes 1 + u², which overflows binary16's range for moderately close entries).
/// Tier: approx (backward stable: each σ is within a modest multiple of ε·‖A‖₂ of the
/// exact one, no rigorous claim).  Not for intervals or rationals.
template <class T>
std::vector<T> approx_singular_values(const matrix<T>& A) {
  static_assert(tier_of<T> == tier::approx, "approx_singular_values needs an approx type");
  if (A.size() == 0) return {};
  if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double> && !std::is_same_v<T, mpfr_float>) {
    matrix<float> F(A.rows(), A.cols());
    for (Eigen::Index i = 0; i < A.rows(); ++i)
      for (Eigen::Index j = 0; j < A.cols(); ++j) F(i, j) = static_cast<float>(A(i, j));
    std::vector<T> out;
    for (float s : approx_singular_values(F)) out.push_back(T(s));
    return out;
  }
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return approx_singular_values_lapack(A);
  Eigen::JacobiSVD<matrix<T>> svd(A);
  const auto& s = svd.singularValues();
  std::vector<T> out(s.data(), s.data() + s.size());
  std::sort(out.begin(), out.end(), [](const T& a, const T& b) { return b < a; });
  return out;
}

/// Determinant by partial-pivot LU in T (approx).  Precondition: square.
template <class T>
T approx_determinant(const matrix<T>& A) {
  static_assert(tier_of<T> == tier::approx, "approx_determinant needs an approx type");
  if (A.rows() != A.cols()) throw input_error("determinant of a non-square matrix");
  if (A.rows() == 0) return T(1);
  if (A.rows() == 2) return A(0, 0) * A(1, 1) - A(0, 1) * A(1, 0);
  return Eigen::PartialPivLU<matrix<T>>(A).determinant();
}

/// Condition number σ₁/σ_min (2-norm) from singular values; +∞ when σ_min = 0.
template <class T>
T approx_condition_number(const std::vector<T>& sigma) {
  if (sigma.empty()) return T(0);
  if (!(sigma.back() > T(0))) return std::numeric_limits<T>::infinity();
  return sigma.front() / sigma.back();
}

/// Stable rank ‖A‖_F² / ‖A‖₂² = Σσᵢ² / σ₁²; 0 for the zero matrix.
template <class T>
T approx_stable_rank(const std::vector<T>& sigma) {
  if (sigma.empty() || !(sigma.front() > T(0))) return T(0);
  T s(0);
  for (const T& x : sigma) s += x * x;
  return s / (sigma.front() * sigma.front());
}

/// Effective rank exp(H(p)), pᵢ = σᵢ/Σσ, H the Shannon entropy (Roy & Vetterli 2007);
/// 0 for the zero matrix.
template <class T>
T approx_effective_rank(const std::vector<T>& sigma) {
  using std::exp;
  using std::log;
  T total(0);
  for (const T& x : sigma) total += x;
  if (!(total > T(0))) return T(0);
  T h(0);
  for (const T& x : sigma)
    if (x > T(0)) {
      const T p = x / total;
      h -= p * log(p);
    }
  return exp(h);
}

}  // namespace attncert
