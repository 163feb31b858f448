// attncert/linalg/lapack.hpp — the LAPACK and BLAS calls of the library (approx tier), through
// LAPACKE and CBLAS on the BLAS Debian selects (OpenBLAS when installed).  Nothing else in
// attncert calls LAPACK or BLAS directly.
#pragma once

#include <vector>

#include "attncert/linalg/matrix.hpp"

namespace attncert {

/// Singular values of A by LAPACK's divide and conquer (dgesdd / sgesdd, values only),
/// decreasing — the SVD NumPy's matrix_rank and svd run.  Tier: approx (backward stable, no
/// claim).  A matrix with a NaN or infinite entry gives NaN singular values.  Errors: input_error
/// if LAPACK reports a failure.
std::vector<double> approx_singular_values_lapack(const matrix<double>& A);
std::vector<float> approx_singular_values_lapack(const matrix<float>& A);

/// Thin SVD A ≈ U·diag(s)·Vᵀ by dgesdd (jobz 'S'): U m×k, s k (decreasing), V n×k, k = min(m, n).
/// Tier: approx.  Returns false if LAPACK reports a failure.  Precondition: A finite.
bool approx_svd_lapack(const matrix<double>& A, matrix<double>& U, std::vector<double>& s, matrix<double>& V);

/// fl(op(X)·Y) by BLAS dgemm, op(X) = Xᵀ when `transpose_x`.  Tier: approx; callers that
/// need a bound use |fl(XY) − XY| ≤ γ_k|X||Y| + kη (any summation order, blocking or FMA; not a
/// Strassen-like product, which no Debian BLAS uses for dgemm).
matrix<double> approx_product_blas(const matrix<double>& X, const matrix<double>& Y, bool transpose_x = false);

}  // namespace attncert
