// The heavy parts of linalg/spectra.hpp, compiled once: Eigen's JacobiSVD over mpfr_float and the
// determinant of every approx type (approx tier: no error claim; see the header).
#include "attncert/linalg/spectra.hpp"

#include <Eigen/SVD>
#include <algorithm>

namespace attncert {

bool approx_jacobi_svd(const matrix<mpfr_float>& A, std::vector<mpfr_float>& sigma, matrix<mpfr_float>* U,
                       matrix<mpfr_float>* V) {
  unsigned options = 0;
  if (U != nullptr) options |= Eigen::ComputeFullU;
  if (V != nullptr) options |= Eigen::ComputeFullV;
  Eigen::JacobiSVD<matrix<mpfr_float>> svd(A, options);
  const auto& s = svd.singularValues();
  sigma.assign(s.data(), s.data() + s.size());
  if (svd.info() != Eigen::Success) return false;
  if (U != nullptr) *U = svd.matrixU();
  if (V != nullptr) *V = svd.matrixV();
  return true;
}

namespace detail {
std::vector<mpfr_float> approx_singular_values_jacobi(const matrix<mpfr_float>& A) {
  std::vector<mpfr_float> out;
  if (A.size() == 0) return out;
  approx_jacobi_svd(A, out, nullptr, nullptr);
  std::sort(out.begin(), out.end(), [](const mpfr_float& a, const mpfr_float& b) { return b < a; });
  return out;
}
}  // namespace detail

// Gaussian elimination with partial pivoting (the largest |entry| of the column, the first of
// equal ones), written out as matrix.hpp's `multiply` is: every operation in T, in a fixed order.
// (Eigen's PartialPivLU computes the same factorization in exact arithmetic, with another order of
// rounded operations; instantiated for five number types it was most of this unit's compile time,
// for a function only the tests call.  The tests hold it to the same tolerances as before.)
template <class T>
T approx_determinant(const matrix<T>& A) {
  static_assert(tier_of<T> == tier::approx, "approx_determinant needs an approx type");
  if (A.rows() != A.cols()) throw input_error("determinant of a non-square matrix");
  const Eigen::Index n = A.rows();
  if (n == 0) return T(1);
  if (n == 2) return A(0, 0) * A(1, 1) - A(0, 1) * A(1, 0);
  matrix<T> U = A;
  T det(1);
  for (Eigen::Index k = 0; k < n; ++k) {
    Eigen::Index p = k;
    for (Eigen::Index i = k + 1; i < n; ++i)
      if (abs_of(U(i, k)) > abs_of(U(p, k))) p = i;
    if (p != k) {
      U.row(p).swap(U.row(k));
      det = -det;
    }
    det = det * U(k, k);
    if (U(k, k) == T(0)) return det;  // singular: a zero pivot column
    for (Eigen::Index i = k + 1; i < n; ++i) {
      const T f = U(i, k) / U(k, k);
      for (Eigen::Index j = k + 1; j < n; ++j) U(i, j) = U(i, j) - f * U(k, j);
    }
  }
  return det;
}

template float approx_determinant<float>(const matrix<float>&);
template double approx_determinant<double>(const matrix<double>&);
template binary16 approx_determinant<binary16>(const matrix<binary16>&);
template bfloat16 approx_determinant<bfloat16>(const matrix<bfloat16>&);
template mpfr_float approx_determinant<mpfr_float>(const matrix<mpfr_float>&);

}  // namespace attncert
