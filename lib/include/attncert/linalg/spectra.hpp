// attncert/linalg/spectra.hpp — singular values and the statistics derived from them
// (approx tier: floating results with no error claim; certified enclosures are a later
// layer).  All functions here carry the `approx_` prefix.
#pragma once

#include <algorithm>
#include <vector>

#include "attncert/linalg/lapack.hpp"
#include "attncert/linalg/matrix.hpp"

namespace attncert {

/// Eigen's two-sided JacobiSVD of A in mpfr_float at the current precision (approx: no claim),
/// the one place the library instantiates it (lib/src/linalg/spectra.cpp; every unit that
/// takes a numerical rank or a certified SVD calls this instead of compiling Eigen's SVD again).
/// Fills sigma with the singular values in Eigen's (decreasing) order, and U (m×m) and V (n×n)
/// when they are not null.  Returns false if Eigen reports a failure (sigma is filled all the same).
bool approx_jacobi_svd(const matrix<mpfr_float>& A, std::vector<mpfr_float>& sigma, matrix<mpfr_float>* U,
                       matrix<mpfr_float>* V);

namespace detail {
/// Singular values of A, decreasing, by approx_jacobi_svd.
std::vector<mpfr_float> approx_singular_values_jacobi(const matrix<mpfr_float>& A);
/// Singular values of A, decreasing: Householder bidiagonalization in MPFR at the entries' precision (U and V
/// not formed), then the eigenvalues of the 2n×2n Golub–Kahan tridiagonal by Eigen's symmetric tridiagonal QR.
/// O(mn²) (Jacobi's sweeps cost many times that: 108 s against about 2 s for 256×256 at 256 bits here).
/// Tier: approx (backward stable: each σ within a modest multiple of ε·‖A‖₂ of the exact one).
std::vector<mpfr_float> approx_singular_values_bidiagonal(const matrix<mpfr_float>& A);
/// Up to this many rows or columns (the smaller side), mpfr singular values come from Jacobi, which also
/// resolves small σ of graded matrices to high relative accuracy (the checks' σ_min rows rely on it); above,
/// from the bidiagonal path, whose cost is a fraction of Jacobi's (0.9 s against 0.03 s at 64×64, 256 bits).
inline constexpr long mpfr_jacobi_max_dim = 48;
}  // namespace detail

/// Singular values of A in decreasing order, computed in the arithmetic of T: binary32 and
/// binary64 by LAPACK's dgesdd/sgesdd (linalg/lapack.hpp; what NumPy runs), mpfr at the current precision
/// by Eigen's two-sided JacobiSVD up to detail::mpfr_jacobi_max_dim rows or columns and above by Householder
/// bidiagonalization and tridiagonal QR (detail::approx_singular_values_bidiagonal, LAPACK's two steps, values
/// only).  For the emulated
/// 16-bit formats the SVD runs in binary32 on the exactly converted matrix and each σ is
/// rounded back to T (as NumPy and PyTorch upcast half precision; Eigen's 2×2 Jacobi step
/// computes 1 + u², which overflows binary16's range for moderately close entries).
/// Tier: approx (backward stable: each σ is within a modest multiple of ε·‖A‖₂ of the
/// exact one, no rigorous claim).  Not for intervals or rationals.
template <class T>
std::vector<T> approx_singular_values(const matrix<T>& A) {
  static_assert(tier_of<T> == tier::approx, "approx_singular_values needs an approx type");
  if (A.size() == 0) return {};
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return approx_singular_values_lapack(A);
  } else if constexpr (std::is_same_v<T, mpfr_float>) {
    return std::min(A.rows(), A.cols()) <= detail::mpfr_jacobi_max_dim ? detail::approx_singular_values_jacobi(A)
                                                                        : detail::approx_singular_values_bidiagonal(A);
  } else {
    matrix<float> F(A.rows(), A.cols());
    for (Eigen::Index i = 0; i < A.rows(); ++i)
      for (Eigen::Index j = 0; j < A.cols(); ++j) F(i, j) = static_cast<float>(A(i, j));
    std::vector<T> out;
    for (float s : approx_singular_values(F)) out.push_back(T(s));
    return out;
  }
}

/// Determinant by Gaussian elimination with partial pivoting in T (approx).  Precondition: square (else input_error).
/// The 0×0 determinant is 1; 2×2 is ad − bc in T.
/// Defined in lib/src/linalg/spectra.cpp for the five approx types (float, double, binary16,
/// bfloat16, mpfr_float), declared below; any other type does not link.
template <class T>
T approx_determinant(const matrix<T>& A);

extern template float approx_determinant<float>(const matrix<float>&);
extern template double approx_determinant<double>(const matrix<double>&);
extern template binary16 approx_determinant<binary16>(const matrix<binary16>&);
extern template bfloat16 approx_determinant<bfloat16>(const matrix<bfloat16>&);
extern template mpfr_float approx_determinant<mpfr_float>(const matrix<mpfr_float>&);

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
