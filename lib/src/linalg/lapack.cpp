// LAPACK and BLAS through LAPACKE and CBLAS (approx tier): see linalg/lapack.hpp.
#include "attncert/linalg/lapack.hpp"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "attncert/error.hpp"

namespace attncert {

namespace {

int as_int(Eigen::Index k) {
  if (k > std::numeric_limits<int>::max()) throw input_error("matrix too large for LAPACK (32-bit indices)");
  return static_cast<int>(k);
}

template <class T>
bool all_finite(const matrix<T>& A) {
  for (Eigen::Index i = 0; i < A.size(); ++i)
    if (!std::isfinite(A.data()[i])) return false;
  return true;
}

// The values-only SVD of A by gesdd in A's own format (dgesdd or sgesdd), decreasing.
template <class T>
std::vector<T> values_gesdd(const matrix<T>& A) {
  if (A.size() == 0) return {};
  std::vector<T> s(static_cast<std::size_t>(std::min(A.rows(), A.cols())));
  if (!all_finite(A)) {  // as an SVD in the format itself would: NaN singular values
    std::fill(s.begin(), s.end(), std::numeric_limits<T>::quiet_NaN());
    return s;
  }
  matrix<T> W = A;
  const lapack_int m = as_int(A.rows()), n = as_int(A.cols());
  lapack_int info = 0;
  if constexpr (std::is_same_v<T, double>)
    info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', m, n, W.data(), m, s.data(), nullptr, 1, nullptr, 1);
  else
    info = LAPACKE_sgesdd(LAPACK_COL_MAJOR, 'N', m, n, W.data(), m, s.data(), nullptr, 1, nullptr, 1);
  if (info != 0)
    throw input_error(std::string("LAPACK ") + (std::is_same_v<T, double> ? "d" : "s") + "gesdd failed (info " +
                      std::to_string(info) + ")");
  std::sort(s.begin(), s.end(), [](T a, T b) { return b < a; });
  return s;
}

}  // namespace

std::vector<double> approx_singular_values_lapack(const matrix<double>& A) { return values_gesdd(A); }

std::vector<float> approx_singular_values_lapack(const matrix<float>& A) { return values_gesdd(A); }

bool approx_svd_lapack(const matrix<double>& A, matrix<double>& U, std::vector<double>& s, matrix<double>& V) {
  const Eigen::Index m = A.rows(), n = A.cols(), k = std::min(m, n);
  matrix<double> W = A, VT(k, n);
  U.resize(m, k);
  s.assign(static_cast<std::size_t>(k), 0.0);
  if (k == 0) {
    V.resize(n, 0);
    return true;
  }
  const lapack_int info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', as_int(m), as_int(n), W.data(), as_int(m), s.data(),
                                         U.data(), as_int(m), VT.data(), as_int(k));
  V = VT.transpose();
  return info == 0;
}

matrix<double> approx_product_blas(const matrix<double>& X, const matrix<double>& Y, bool transpose_x) {
  const Eigen::Index rows = transpose_x ? X.cols() : X.rows(), inner = transpose_x ? X.rows() : X.cols();
  if (inner != Y.rows()) throw std::invalid_argument("approx_product_blas: inner dimensions differ");
  matrix<double> C(rows, Y.cols());
  if (C.size() == 0) return C;
  if (inner == 0) return matrix<double>::Zero(rows, Y.cols());
  cblas_dgemm(CblasColMajor, transpose_x ? CblasTrans : CblasNoTrans, CblasNoTrans, as_int(rows), as_int(Y.cols()),
              as_int(inner), 1.0, X.data(), as_int(X.rows()), Y.data(), as_int(Y.rows()), 0.0, C.data(),
              as_int(C.rows()));
  return C;
}

}  // namespace attncert
